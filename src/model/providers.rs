//! Providers an admin configured, their shared keys, and what admins and members say a model
//! can do.

use chrono::{DateTime, Utc};
use uuid::Uuid;

/// A provider configured in the admin console.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ManagedProvider {
    /// Stable id.
    pub id: Uuid,
    /// Short unique name (the `provider/` of model references).
    pub name: String,
    /// Display name.
    pub label: String,
    /// Wire format.
    pub kind: String,
    /// Base URL, empty for the kind's public one.
    pub base_url: String,
    /// Whether members may use it.
    pub enabled: bool,
    /// Enabled models, as a JSON array.
    pub models: String,
    /// Who may use it.
    pub visibility: String,
    /// The users allowed when visibility is `users`, as a JSON array of ids.
    pub allowed_users: String,
    /// Requests per minute per user.
    pub rpm: Option<i64>,
    /// Tokens per minute per user.
    pub tpm: Option<i64>,
    /// Created.
    pub created_at: DateTime<Utc>,
    /// Last change.
    pub updated_at: DateTime<Utc>,
}

/// A shared key of a provider (its secret stays in the vault).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ProviderKey {
    /// Stable id (also the vault secret's).
    pub id: Uuid,
    /// Its provider.
    pub provider_id: Uuid,
    /// Display label.
    pub label: String,
    /// The key's last four characters, to tell keys apart.
    pub last4: String,
    /// Failures in a row.
    pub failures: i32,
    /// Not used before this time after failures.
    pub cooldown_until: Option<DateTime<Utc>>,
    /// Last use.
    pub last_used_at: Option<DateTime<Utc>>,
    /// Created.
    pub created_at: DateTime<Utc>,
}

/// An admin's or a member's word on one model; `None` leaves the fact to the provider or the
/// catalog.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct CapabilityOverride {
    /// Offer tools.
    pub tools: Option<bool>,
    /// Send images.
    pub vision: Option<bool>,
    /// Send a reasoning effort or thinking budget.
    pub reasoning: Option<bool>,
    /// Tokens it reads at most.
    pub context_window: Option<u32>,
    /// Tokens it writes at most.
    pub max_output: Option<u32>,
    /// USD per million input tokens.
    pub input_per_mtok: Option<f64>,
    /// USD per million output tokens.
    pub output_per_mtok: Option<f64>,
}

impl CapabilityOverride {
    /// Whether it says nothing (such a row is deleted rather than stored).
    pub fn is_empty(&self) -> bool {
        *self == Self::default()
    }
}

/// What a model can do and costs, in an admin's words.
#[derive(Debug, Clone, PartialEq)]
pub struct ModelOverride {
    /// Provider name.
    pub provider: String,
    /// Model id.
    pub model: String,
    /// What the admin says.
    pub stated: CapabilityOverride,
    /// Last change.
    pub updated_at: DateTime<Utc>,
}

/// What a model of a member's own key can do, in the member's words.
#[derive(Debug, Clone, PartialEq)]
pub struct MemberModelOverride {
    /// The key (a secret of the member's vault).
    pub secret_id: Uuid,
    /// Model id.
    pub model: String,
    /// The member.
    pub owner_id: Uuid,
    /// What the member says.
    pub stated: CapabilityOverride,
    /// Last change.
    pub updated_at: DateTime<Utc>,
}
