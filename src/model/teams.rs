//! Groups of people: a subject beside the person wherever access is granted.

use chrono::{DateTime, Utc};
use serde::Serialize;
use uuid::Uuid;

/// A group as the console shows it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Group {
    /// Stable id.
    pub id: Uuid,
    /// Display name (unique, ignoring case).
    pub name: String,
    /// Synced from the identity provider's groups claim: sign-ins replace its memberships.
    pub managed_by_idp: bool,
    /// The role its members get when they first sign in (the most generous of their groups').
    pub default_role: crate::model::accounts::Role,
    /// The least-asking approval mode its members may use (the loosest of their groups'
    /// settings); `None` leaves it to the instance's `agent.loosest_approval_mode`.
    pub loosest_approval_mode: Option<String>,
    /// When it was made.
    pub created_at: DateTime<Utc>,
}

/// The case-folded form a group's name is unique by.
pub fn name_key(name: &str) -> String {
    name.trim().to_lowercase()
}

/// What someone a workspace is shared with may do in it; ordered, so the most generous of
/// several shares (one to the person, some to their groups) is the greatest.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum ShareRole {
    /// Reads, searches and follows live runs.
    Viewer,
    /// Also sends, branches, edits, regenerates and decides confirmation dialogs.
    Editor,
    /// Also changes the workspace's settings and shares, and deletes.
    Owner,
}

impl ShareRole {
    /// The stored spelling.
    pub fn as_str(self) -> &'static str {
        match self {
            ShareRole::Viewer => "viewer",
            ShareRole::Editor => "editor",
            ShareRole::Owner => "owner",
        }
    }

    /// Parses the stored spelling.
    pub fn parse(s: &str) -> Option<ShareRole> {
        match s {
            "viewer" => Some(ShareRole::Viewer),
            "editor" => Some(ShareRole::Editor),
            "owner" => Some(ShareRole::Owner),
            _ => None,
        }
    }
}

/// Who a workspace is shared with.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(tag = "kind", rename_all = "lowercase")]
pub enum ShareSubject {
    /// One person.
    Person {
        /// Their id.
        id: Uuid,
        /// How they are shown (their email, else their name).
        label: String,
    },
    /// Everyone in a group.
    Group {
        /// The group's id.
        id: Uuid,
        /// Its name.
        label: String,
    },
}

/// One share of a workspace.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Share {
    /// Stable id.
    pub id: Uuid,
    /// Who.
    pub subject: ShareSubject,
    /// In which role.
    pub role: ShareRole,
}

/// A share link as its creator and admins see it (never with its token).
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct ShareLink {
    /// Stable id.
    pub id: Uuid,
    /// The session it was taken from.
    pub session_id: Uuid,
    /// The session's title when shared.
    pub title: String,
    /// How many messages the snapshot holds.
    pub message_count: u32,
    /// Open to anyone with the link, not only people signed in to this instance.
    pub public: bool,
    /// When it stops opening.
    pub expires_at: Option<DateTime<Utc>>,
    /// Who made it.
    pub created_by: Uuid,
    /// When.
    pub created_at: DateTime<Utc>,
}

/// One file a snapshot message carried.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, serde::Deserialize)]
pub struct SnapshotFile {
    /// The blob.
    pub hash: String,
    /// Its thumbnail, for images.
    pub thumb: Option<String>,
    /// The name it came with.
    pub name: String,
    /// Verified type.
    pub mime: String,
    /// Size in bytes.
    pub size: i64,
}

/// One message of a snapshot, as it was when shared.
#[derive(Debug, Clone, PartialEq, Serialize, serde::Deserialize)]
pub struct SnapshotMessage {
    /// Speaker (`user`, `assistant`, `tool`, `system`).
    pub role: String,
    /// Content or boundary kind.
    pub kind: String,
    /// Content.
    pub parts: serde_json::Value,
    /// `provider/model` that wrote it.
    pub model: Option<String>,
    /// When it was written.
    pub created_at: DateTime<Utc>,
    /// Its files.
    #[serde(default)]
    pub files: Vec<SnapshotFile>,
}

/// A person as directory provisioning (SCIM) sees them.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct DirectoryUser {
    /// Stable id (the SCIM `id`).
    pub id: Uuid,
    /// Their email (the SCIM `userName`).
    pub email: String,
    /// Name shown.
    pub display_name: String,
    /// The identity provider's id for them.
    pub external_id: Option<String>,
    /// May sign in.
    pub active: bool,
    /// Made.
    pub created_at: DateTime<Utc>,
    /// Last changed.
    pub updated_at: DateTime<Utc>,
}

/// A group as directory provisioning (SCIM) sees it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct DirectoryGroup {
    /// Stable id.
    pub id: Uuid,
    /// Its name (the SCIM `displayName`).
    pub name: String,
    /// The identity provider's id for it.
    pub external_id: Option<String>,
    /// Made.
    pub created_at: DateTime<Utc>,
}

/// Which attribute a directory query filters on (`eq` only).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum DirectoryFilter {
    /// Every resource.
    All,
    /// `userName` or `emails`: the email, case-insensitively.
    Email(String),
    /// `externalId`.
    ExternalId(String),
    /// `displayName`.
    DisplayName(String),
    /// `id`.
    Id(Uuid),
}
