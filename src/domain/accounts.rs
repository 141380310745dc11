//! People and the acting-user value that authorizes every call.

use serde::Serialize;
use uuid::Uuid;

/// What a user may do across the instance.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Role {
    /// Runs the instance.
    Admin,
    /// Uses it.
    Member,
}

impl Role {
    /// The stored spelling.
    pub fn as_str(self) -> &'static str {
        match self {
            Role::Admin => "admin",
            Role::Member => "member",
        }
    }

    /// Parses the stored spelling.
    pub fn parse(s: &str) -> Option<Role> {
        match s {
            "admin" => Some(Role::Admin),
            "member" => Some(Role::Member),
            _ => None,
        }
    }
}

/// Whether a user may sign in.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum UserStatus {
    /// May sign in.
    Active,
    /// Blocked by an admin.
    Disabled,
    /// Invited, not yet signed in.
    Invited,
}

impl UserStatus {
    /// The stored spelling.
    pub fn as_str(self) -> &'static str {
        match self {
            UserStatus::Active => "active",
            UserStatus::Disabled => "disabled",
            UserStatus::Invited => "invited",
        }
    }

    /// Parses the stored spelling.
    pub fn parse(s: &str) -> Option<UserStatus> {
        match s {
            "active" => Some(UserStatus::Active),
            "disabled" => Some(UserStatus::Disabled),
            "invited" => Some(UserStatus::Invited),
            _ => None,
        }
    }
}

/// A user as the rest of Arbor sees one.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct User {
    /// Stable id.
    pub id: Uuid,
    /// Contact address (display data, never an identity key).
    pub email: String,
    /// Name shown in the UI.
    pub display_name: String,
    /// Instance role.
    pub role: Role,
    /// Sign-in status.
    pub status: UserStatus,
}

/// The authenticated user on whose behalf a service call runs. Only obtainable from a verified
/// session (or the CLI), so holding one proves who is asking.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Actor {
    /// The acting user's id.
    pub user_id: Uuid,
    /// The acting user's role at the time of the request.
    pub role: Role,
}

impl Actor {
    /// The actor for a loaded, active user.
    pub fn for_user(user: &User) -> Actor {
        Actor {
            user_id: user.id,
            role: user.role,
        }
    }

    /// Whether the actor is an instance admin.
    pub fn is_admin(&self) -> bool {
        self.role == Role::Admin
    }
}
