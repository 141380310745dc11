//! The export archive's document: workspaces, their sessions as whole trees (every branch),
//! tool calls with their decisions, settings and prompt templates. Written by export, read by
//! import, and produced by the importers of other products' exports (ChatGPT, Open WebUI), so
//! every import goes through one check and one writer.
//!
//! Ids inside the document are the archive's own strings: a message names its parent and chosen
//! child by them. Import gives everything new ids, so nothing refers to the instance it came
//! from. Files are named by their content hash; their bytes travel beside the document.

use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};

/// The one document format this version writes and reads.
pub const ARCHIVE_FORMAT: u32 = 1;

/// The whole document.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct Archive {
    /// `ARCHIVE_FORMAT` when written.
    pub format: u32,
    /// What wrote it (`arbor <version>`, `chatgpt`, `open-webui`).
    pub source: String,
    /// When it was written.
    pub exported_at: Option<DateTime<Utc>>,
    /// The workspaces, each with its sessions.
    #[serde(default)]
    pub workspaces: Vec<ArchivedWorkspace>,
    /// The owner's prompt templates.
    #[serde(default)]
    pub prompt_templates: Vec<ArchivedTemplate>,
}

/// A workspace and its settings.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct ArchivedWorkspace {
    /// Display name.
    pub name: String,
    /// Default system prompt template.
    #[serde(default)]
    pub system_prompt: Option<String>,
    /// Default `provider/model`.
    #[serde(default)]
    pub default_model: Option<String>,
    /// Default approval mode.
    #[serde(default)]
    pub approval_mode: Option<String>,
    /// Whether the model proposes titles.
    #[serde(default)]
    pub infer_titles: Option<bool>,
    /// Automatic compression threshold (percent).
    #[serde(default)]
    pub compact_at_percent: Option<u8>,
    /// Its sessions.
    #[serde(default)]
    pub sessions: Vec<ArchivedSession>,
}

/// A session: settings and the whole tree.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct ArchivedSession {
    /// Title.
    pub title: String,
    /// Whether the person chose the title.
    #[serde(default)]
    pub title_user_set: bool,
    /// System prompt template.
    #[serde(default)]
    pub system_prompt: Option<String>,
    /// `provider/model`.
    #[serde(default)]
    pub model: Option<String>,
    /// Generation settings as stored.
    #[serde(default)]
    pub params: Option<serde_json::Value>,
    /// Approval mode.
    #[serde(default)]
    pub approval_mode: Option<String>,
    /// Hidden from the recent list.
    #[serde(default)]
    pub archived: bool,
    /// Made.
    #[serde(default)]
    pub created_at: Option<DateTime<Utc>>,
    /// The first message of the active path (an archive id).
    #[serde(default)]
    pub active_root: Option<String>,
    /// Every message of every branch, parents before children.
    #[serde(default)]
    pub messages: Vec<ArchivedMessage>,
}

/// One node of the tree.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct ArchivedMessage {
    /// The archive's id for it.
    pub id: String,
    /// Its parent's archive id (none for a root).
    #[serde(default)]
    pub parent: Option<String>,
    /// The child the active path follows.
    #[serde(default)]
    pub chosen_child: Option<String>,
    /// `user`, `assistant`, `tool` or `system`.
    pub role: String,
    /// `text`, `tool_call`, `tool_result` or a boundary kind.
    #[serde(default = "text_kind")]
    pub kind: String,
    /// Content parts, as Arbor stores them (`providers::types::Part`).
    #[serde(default)]
    pub parts: serde_json::Value,
    /// `provider/model` that wrote it.
    #[serde(default)]
    pub model: Option<String>,
    /// `complete`, `interrupted`, `stopped` or `error` (never `streaming`: a live reply is
    /// exported as interrupted).
    #[serde(default = "complete_status")]
    pub status: String,
    /// What went wrong.
    #[serde(default)]
    pub error: Option<String>,
    /// Token counts and cost.
    #[serde(default)]
    pub usage: Option<ArchivedUsage>,
    /// Written.
    #[serde(default)]
    pub created_at: Option<DateTime<Utc>>,
    /// Its files.
    #[serde(default)]
    pub files: Vec<ArchivedFile>,
    /// The tool calls it made, with what was decided.
    #[serde(default)]
    pub tool_calls: Vec<ArchivedToolCall>,
}

fn text_kind() -> String {
    "text".into()
}

fn complete_status() -> String {
    "complete".into()
}

/// Token counts and cost of an assistant message.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct ArchivedUsage {
    /// Prompt tokens.
    pub input: i64,
    /// Generated tokens.
    pub output: i64,
    /// Prompt tokens from cache.
    #[serde(default)]
    pub cached: i64,
    /// Cost in micro-dollars.
    #[serde(default)]
    pub cost_micros: Option<i64>,
}

/// An attached file: its bytes are `blobs/<hash>` in the archive.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct ArchivedFile {
    /// SHA-256 of the bytes, lowercase hex.
    pub hash: String,
    /// The thumbnail's hash, for images.
    #[serde(default)]
    pub thumb: Option<String>,
    /// Name it was uploaded under.
    pub name: String,
    /// Size in bytes.
    pub size: i64,
    /// Verified type.
    pub mime: String,
    /// Image dimensions.
    #[serde(default)]
    pub width: Option<i32>,
    /// Image dimensions.
    #[serde(default)]
    pub height: Option<i32>,
}

/// A tool call and its decision.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct ArchivedToolCall {
    /// The model's id for the call.
    pub call_id: String,
    /// Tool name.
    pub tool: String,
    /// Arguments as the model sent them.
    pub arguments: String,
    /// `read`, `write`, … as classified.
    pub risk: String,
    /// Where it ended (`done`, `refused`, `failed`, …).
    pub status: String,
    /// `yes`, `no`, `always`, … when a person decided.
    #[serde(default)]
    pub decision: Option<String>,
    /// Who decided (their email; people are not exported).
    #[serde(default)]
    pub decided_by: Option<String>,
    /// When.
    #[serde(default)]
    pub decided_at: Option<DateTime<Utc>>,
    /// The explanation asked for.
    #[serde(default)]
    pub explanation: Option<String>,
    /// The change it proposed.
    #[serde(default)]
    pub diff: Option<String>,
    /// The archive id of the message holding its result.
    #[serde(default)]
    pub result_message: Option<String>,
}

/// A prompt template.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct ArchivedTemplate {
    /// Name.
    pub name: String,
    /// Template text.
    pub body: String,
}
