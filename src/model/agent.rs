//! The agent's records: every tool call a run proposed, with the decision taken on it.

use chrono::{DateTime, Utc};
use uuid::Uuid;

/// One proposed tool call and what became of it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ToolCall {
    /// Row id (the dialog's).
    pub id: Uuid,
    /// The run that proposed it.
    pub run_id: Uuid,
    /// Its session.
    pub session_id: Uuid,
    /// Whose run it is.
    pub owner_id: Uuid,
    /// The assistant message holding the call.
    pub message_id: Uuid,
    /// The provider's call id.
    pub call_id: String,
    /// Its place among the message's calls.
    pub position: i32,
    /// Tool name.
    pub tool_name: String,
    /// Canonical JSON of the arguments.
    pub arguments: String,
    /// SHA-256 of tool name and canonical arguments (what an approval is bound to).
    pub args_hash: String,
    /// Fingerprint of the tool's description and schema as offered.
    pub tool_digest: String,
    /// The tool's description as offered (capped), for the dialog.
    pub tool_description: Option<String>,
    /// read, write, exec or network.
    pub risk: String,
    /// proposed, approved, denied, executed or failed.
    pub status: String,
    /// What was decided (yes, no, no_continue, always, auto, rule).
    pub decision: Option<String>,
    /// Who decided, when a person did.
    pub decided_by: Option<Uuid>,
    /// When it was decided.
    pub decided_at: Option<DateTime<Utc>>,
    /// The model's explanation, when asked for.
    pub explanation: Option<String>,
    /// The unified diff of the file it changed.
    pub diff: Option<String>,
    /// The result message, once there is one.
    pub result_message_id: Option<Uuid>,
    /// When it was proposed.
    pub created_at: DateTime<Utc>,
    /// Last change.
    pub updated_at: DateTime<Utc>,
}

/// One run: a model answering (and calling tools) until it ends.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Run {
    /// Stable id.
    pub id: Uuid,
    /// Its session.
    pub session_id: Uuid,
    /// Who started it.
    pub owner_id: Uuid,
    /// The message it answers.
    pub leaf_message_id: Option<Uuid>,
    /// The answer it is writing.
    pub assistant_message_id: Option<Uuid>,
    /// running, awaiting_confirmation, completed, failed, cancelled or interrupted.
    pub status: String,
    /// Model calls made so far.
    pub iterations: i32,
    /// What went wrong, safe to show.
    pub error: Option<String>,
    /// Started.
    pub created_at: DateTime<Utc>,
    /// Last change.
    pub updated_at: DateTime<Utc>,
    /// Ended.
    pub finished_at: Option<DateTime<Utc>>,
    /// The instance executing it (several instances on one database).
    pub instance_id: Option<Uuid>,
}

/// A member's "always allow" rule.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ApprovalRule {
    /// Stable id.
    pub id: Uuid,
    /// Whose rule it is.
    pub user_id: Uuid,
    /// session or workspace.
    pub scope: String,
    /// The session's or workspace's id.
    pub scope_id: Uuid,
    /// The tool it lets run.
    pub tool_name: String,
    /// What the call's subject must match (a path, an origin, or exact arguments).
    pub pattern: String,
    /// The fingerprint of the tool it was given for.
    pub tool_digest: String,
    /// Created.
    pub created_at: DateTime<Utc>,
}

/// One item of a session's todo list as stored.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TodoRecord {
    /// Stable id.
    pub id: Uuid,
    /// Its session.
    pub session_id: Uuid,
    /// Its place in the list.
    pub position: i32,
    /// What to do.
    pub text: String,
    /// pending, in_progress or done.
    pub status: String,
    /// Last change.
    pub updated_at: DateTime<Utc>,
}

/// A host folder an admin allowed a workspace to expose to the agent.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct HostRoot {
    /// Stable id.
    pub id: Uuid,
    /// The workspace.
    pub workspace_id: Uuid,
    /// The folder's absolute path on the host.
    pub path: String,
    /// The admin who allowed it.
    pub created_by: Option<Uuid>,
    /// Created.
    pub created_at: DateTime<Utc>,
}
