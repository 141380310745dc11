//! MCP servers as stored: an admin's (for the whole instance) or a member's own.

use chrono::{DateTime, Utc};
use uuid::Uuid;

/// One configured MCP server.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct McpServerRecord {
    /// Stable id.
    pub id: Uuid,
    /// The member whose own server it is; none for an instance server.
    pub owner_id: Option<Uuid>,
    /// Its name (the prefix of its tools' names).
    pub name: String,
    /// stdio or http.
    pub transport: String,
    /// The command that starts it (stdio).
    pub command: String,
    /// The command's arguments, as a JSON array.
    pub args: String,
    /// Where it is reached (http).
    pub url: String,
    /// Whether runs get its tools.
    pub enabled: bool,
    /// The vault secret holding its environment or headers, if any.
    pub secret_id: Option<Uuid>,
    /// The names of those secrets, as a JSON array (shown; their values stay in the vault).
    pub secret_names: String,
    /// The group a member's own server is shared with: its members' agents get its tools.
    pub group_id: Option<Uuid>,
    /// The owner's workspace it is attached to: runs there get its tools, whoever starts them.
    pub workspace_id: Option<Uuid>,
    /// Created.
    pub created_at: DateTime<Utc>,
    /// Last change.
    pub updated_at: DateTime<Utc>,
}
