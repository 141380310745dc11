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
