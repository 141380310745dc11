//! People: their role on the instance, whether they may sign in, and invitations.

use chrono::{DateTime, Utc};
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

/// The colour theme a member chose.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Theme {
    /// Follow the browser's (the operating system's) setting.
    #[default]
    System,
    /// Always light.
    Light,
    /// Always dark.
    Dark,
}

impl Theme {
    /// The stored and submitted spelling.
    pub fn as_str(self) -> &'static str {
        match self {
            Theme::System => "system",
            Theme::Light => "light",
            Theme::Dark => "dark",
        }
    }

    /// Parses the stored or submitted spelling.
    pub fn parse(s: &str) -> Option<Theme> {
        match s {
            "system" => Some(Theme::System),
            "light" => Some(Theme::Light),
            "dark" => Some(Theme::Dark),
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
    /// Colour theme.
    pub theme: Theme,
}

/// A row of the admin console's users page.
#[derive(Debug, Clone, Serialize)]
pub struct UserRow {
    /// The user.
    pub user: User,
    /// When the account was made.
    pub created_at: DateTime<Utc>,
    /// Last sign-in.
    pub last_login_at: Option<DateTime<Utc>>,
    /// Whether they sign in through OpenID Connect.
    pub oidc: bool,
    /// The email their provider sent without verifying it, shown apart.
    pub unverified_email: Option<String>,
}

/// An invitation as admins see it (never with its token).
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Invitation {
    /// Stable id.
    pub id: Uuid,
    /// Invited address.
    pub email: String,
    /// Role the account gets.
    pub role: Role,
    /// Who invited.
    pub invited_by: Option<Uuid>,
    /// When it was made.
    pub created_at: DateTime<Utc>,
    /// When the link stops working.
    pub expires_at: DateTime<Utc>,
    /// When it was used, if it was.
    pub accepted_at: Option<DateTime<Utc>>,
}

impl Invitation {
    /// Whether the link can still be used.
    pub fn is_open(&self) -> bool {
        self.accepted_at.is_none() && Utc::now() < self.expires_at
    }
}

/// An API token as stored: its hash, never the token itself.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TokenRecord {
    /// Stable id.
    pub id: Uuid,
    /// Whose token it is.
    pub user_id: Uuid,
    /// The name its owner gave it.
    pub name: String,
    /// The token's first characters, to recognise it by.
    pub prefix: String,
    /// SHA-256 of the token.
    pub token_hash: String,
    /// `api` (the gateway only) or `full` (the whole account).
    pub scope: String,
    /// When it stops working, if ever.
    pub expires_at: Option<DateTime<Utc>>,
    /// Last use.
    pub last_used_at: Option<DateTime<Utc>>,
    /// When it was revoked.
    pub revoked_at: Option<DateTime<Utc>>,
    /// Created.
    pub created_at: DateTime<Utc>,
}
