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
