//! Messages: the nodes of a session's tree, who wrote them, their state and what they cost.

use chrono::{DateTime, Utc};
use serde::Serialize;
use uuid::Uuid;

use crate::providers::types::Part;

/// Who wrote a message.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Role {
    /// The person.
    User,
    /// The model.
    Assistant,
    /// A tool's result.
    Tool,
    /// A system note.
    System,
}

impl Role {
    /// Stored name.
    pub fn as_str(self) -> &'static str {
        match self {
            Role::User => "user",
            Role::Assistant => "assistant",
            Role::Tool => "tool",
            Role::System => "system",
        }
    }

    /// Parses a stored name.
    pub fn parse(s: &str) -> Option<Role> {
        Some(match s {
            "user" => Role::User,
            "assistant" => Role::Assistant,
            "tool" => Role::Tool,
            "system" => Role::System,
            _ => return None,
        })
    }
}

/// What a message is: ordinary content, or a boundary Arbor writes into the path (system role)
/// where the context sent to the model starts afresh.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum MessageKind {
    /// Words of the person or the model, or a note of Arbor's.
    Text,
    /// The model's words with the tool calls it made.
    ToolCall,
    /// A tool's result.
    ToolResult,
    /// A summary of the path before it (`/compress` or automatic compaction): the context
    /// starts with it, and what it replaced stays in the tree.
    Summary,
    /// `/clear`: the context starts after it.
    Clear,
    /// `/clearblobs`: files attached before it are no longer sent.
    ClearFiles,
    /// A task begins (its text is the goal): the messages below it, up to its end, are the
    /// task's work.
    TaskStart,
    /// A task ends (its text is the summary): the context past it sees the summary in place
    /// of the task's work.
    TaskEnd,
}

impl MessageKind {
    /// Stored name.
    pub fn as_str(self) -> &'static str {
        match self {
            MessageKind::Text => "text",
            MessageKind::ToolCall => "tool_call",
            MessageKind::ToolResult => "tool_result",
            MessageKind::Summary => "summary",
            MessageKind::Clear => "clear",
            MessageKind::ClearFiles => "clear_files",
            MessageKind::TaskStart => "task_start",
            MessageKind::TaskEnd => "task_end",
        }
    }

    /// Parses a stored name.
    pub fn parse(s: &str) -> Option<MessageKind> {
        Some(match s {
            "text" => MessageKind::Text,
            "tool_call" => MessageKind::ToolCall,
            "tool_result" => MessageKind::ToolResult,
            "summary" => MessageKind::Summary,
            "clear" => MessageKind::Clear,
            "clear_files" => MessageKind::ClearFiles,
            "task_start" => MessageKind::TaskStart,
            "task_end" => MessageKind::TaskEnd,
            _ => return None,
        })
    }

    /// Whether Arbor wrote this message into the path to shape the context (a boundary or a
    /// task's start or end), rather than a person, a model or a tool.
    pub fn is_boundary(self) -> bool {
        !matches!(self, MessageKind::Text | MessageKind::ToolCall | MessageKind::ToolResult)
    }
}

/// Where a message's generation stands.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum MessageStatus {
    /// Finished normally (all user messages).
    Complete,
    /// Being written by a live run.
    Streaming,
    /// The process died while writing it; the text up to the last flush is kept.
    Interrupted,
    /// The user pressed Stop; the partial text is kept.
    Stopped,
    /// The provider failed; `error` says how.
    Error,
}

impl MessageStatus {
    /// Stored name.
    pub fn as_str(self) -> &'static str {
        match self {
            MessageStatus::Complete => "complete",
            MessageStatus::Streaming => "streaming",
            MessageStatus::Interrupted => "interrupted",
            MessageStatus::Stopped => "stopped",
            MessageStatus::Error => "error",
        }
    }

    /// Parses a stored name.
    pub fn parse(s: &str) -> Option<MessageStatus> {
        Some(match s {
            "complete" => MessageStatus::Complete,
            "streaming" => MessageStatus::Streaming,
            "interrupted" => MessageStatus::Interrupted,
            "stopped" => MessageStatus::Stopped,
            "error" => MessageStatus::Error,
            _ => return None,
        })
    }

    /// Whether generation can be resumed from the partial text.
    pub fn can_continue(self) -> bool {
        matches!(self, MessageStatus::Interrupted | MessageStatus::Stopped | MessageStatus::Error)
    }
}

/// Token counts and cost of one assistant message.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize)]
pub struct MessageUsage {
    /// Prompt tokens.
    pub input: u64,
    /// Generated tokens.
    pub output: u64,
    /// Prompt tokens served from cache.
    pub cached: u64,
    /// Cost in micro-dollars, when the price is known.
    pub cost_micros: Option<i64>,
    /// Whether the counts are Arbor's estimate (the provider sent none).
    pub estimated: bool,
}

/// One node of the tree.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Message {
    /// Stable id.
    pub id: Uuid,
    /// Its session.
    pub session_id: Uuid,
    /// The message it answers or follows (none for a root).
    pub parent_id: Option<Uuid>,
    /// Which child the active path follows.
    pub chosen_child_id: Option<Uuid>,
    /// Speaker.
    pub role: Role,
    /// Content or boundary.
    pub kind: MessageKind,
    /// Content, in order.
    pub parts: Vec<Part>,
    /// `provider/model` that wrote it (assistant messages).
    pub model: Option<String>,
    /// Generation state.
    pub status: MessageStatus,
    /// What went wrong, safe to show.
    pub error: Option<String>,
    /// Usage, for assistant messages that have any.
    pub usage: Option<MessageUsage>,
    /// Its size in tokens: the provider's output count for an answer that has one, otherwise
    /// Arbor's count of its parts; none while it streams and on messages from before counts
    /// were kept.
    pub tokens: Option<u64>,
    /// The composer's id of the submit that created it.
    pub client_id: Option<String>,
    /// Who wrote it (the person who asked, or who started the answering run); none on messages
    /// older than shared workspaces.
    pub author_id: Option<Uuid>,
    /// Creation time.
    pub created_at: DateTime<Utc>,
}

impl Message {
    /// The visible answer text (text parts joined).
    pub fn text(&self) -> String {
        self.parts
            .iter()
            .filter_map(|p| match p {
                Part::Text { text } => Some(text.as_str()),
                _ => None,
            })
            .collect::<Vec<_>>()
            .join("")
    }

    /// The reasoning text (thought parts joined).
    pub fn thoughts(&self) -> String {
        self.parts
            .iter()
            .filter_map(|p| match p {
                Part::Thought { text, .. } => Some(text.as_str()),
                _ => None,
            })
            .collect::<Vec<_>>()
            .join("")
    }
}
