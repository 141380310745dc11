//! Workspaces and the sessions in them, as their owner sees them.

use serde::Serialize;
use uuid::Uuid;

/// A workspace as shown to its owner.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Workspace {
    /// Stable id.
    pub id: Uuid,
    /// Owner's user id.
    pub owner_id: Uuid,
    /// Display name.
    pub name: String,
    /// Default system prompt template for its sessions.
    pub system_prompt: Option<String>,
    /// Default `provider/model` for its sessions.
    pub default_model: Option<String>,
    /// Default approval mode for its sessions' tool calls.
    pub approval_mode: String,
    /// Whether the model proposes session titles.
    pub infer_titles: bool,
    /// Share of a model's window (percent) past which a reply is preceded by an automatic
    /// compression: none for the default, 0 for never.
    pub compact_at_percent: Option<u8>,
    /// A provider key of the owner's vault attached to the workspace: runs here use it for its
    /// provider, whoever starts them.
    pub key_secret_id: Option<Uuid>,
}

/// A chat session as shown to its owner.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct ChatSession {
    /// Stable id.
    pub id: Uuid,
    /// Containing workspace.
    pub workspace_id: Uuid,
    /// Owner's user id.
    pub owner_id: Uuid,
    /// Title shown in the sidebar.
    pub title: String,
    /// Whether the user chose the title (a proposed one never replaces it).
    pub title_user_set: bool,
    /// System prompt template; the workspace's applies when none.
    pub system_prompt: Option<String>,
    /// `provider/model`; the workspace's default applies when none.
    pub model: Option<String>,
    /// Generation settings as stored (see `providers::types::GenParams`).
    pub params: serde_json::Value,
    /// Approval mode; the workspace's applies when none.
    pub approval_mode: Option<String>,
    /// Folders exposed to the agent, relative to the workspace folder.
    pub exposed_roots: Vec<String>,
    /// The first message of the active path.
    pub active_root_id: Option<Uuid>,
    /// Hidden from the recent list.
    pub archived: bool,
    /// What changed in the exposed folders since the last message (told to the model once).
    pub env_note: Option<String>,
    /// Last activity.
    pub updated_at: chrono::DateTime<chrono::Utc>,
}

/// One entry of a session's activity log.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct ActivityEvent {
    /// When.
    pub at: chrono::DateTime<chrono::Utc>,
    /// What: `message`, `answer`, `tool_result`, `compression`, `clear`, `clear_files`,
    /// `task_start`, `task_end`, `run_started`, `run_ended`, `tool_call`, `decision`, `settings`,
    /// `branch`.
    pub kind: String,
    /// Who (the person who wrote, started, decided or changed it), when known.
    pub actor_id: Option<Uuid>,
    /// The rest: ids, statuses, what changed.
    pub details: serde_json::Value,
}

/// A member's prompt template as stored.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PromptTemplateRecord {
    /// Stable id.
    pub id: Uuid,
    /// Whose template it is.
    pub owner_id: Uuid,
    /// Its name, as the library lists it.
    pub name: String,
    /// The system prompt template itself.
    pub body: String,
    /// The group it is shared with (read-only for its members).
    pub group_id: Option<Uuid>,
    /// Created.
    pub created_at: chrono::DateTime<chrono::Utc>,
    /// Last change.
    pub updated_at: chrono::DateTime<chrono::Utc>,
}
