//! What the instance keeps about its own use: the usage ledger, the audit log, and the gateway's
//! stored Responses API answers.

use chrono::{DateTime, Utc};
use uuid::Uuid;

/// One model call in the usage ledger.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct UsageRecord {
    /// Stable id.
    pub id: Uuid,
    /// Who made it (none once the person is deleted).
    pub user_id: Option<Uuid>,
    /// The session it answered in, for browser runs.
    pub session_id: Option<Uuid>,
    /// The message it wrote, for browser runs.
    pub message_id: Option<Uuid>,
    /// Provider name.
    pub provider: String,
    /// Model id.
    pub model: String,
    /// Input tokens.
    pub tokens_in: i64,
    /// Output tokens.
    pub tokens_out: i64,
    /// Input tokens read from the provider's cache.
    pub tokens_cached: i64,
    /// Whether the counts are Arbor's estimate (the provider sent none).
    pub estimated: bool,
    /// What it cost, in millionths of a dollar, when the price is known.
    pub cost_micros: Option<i64>,
    /// How long the call took.
    pub latency_ms: i64,
    /// `ui` (a browser run) or `api` (the gateway).
    pub via: String,
    /// When.
    pub created_at: DateTime<Utc>,
}

/// One entry of the audit log.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AuditEntry {
    /// Stable id.
    pub id: Uuid,
    /// When.
    pub at: DateTime<Utc>,
    /// Who acted, when a person did.
    pub actor_id: Option<Uuid>,
    /// Who acted, as shown (an email, `system` or `cli`).
    pub actor: String,
    /// What was done.
    pub action: String,
    /// What it was done to.
    pub target: String,
    /// Details, as JSON.
    pub details: String,
    /// The client address, when known.
    pub ip: Option<String>,
}

/// A Responses API answer kept for `previous_response_id`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct StoredResponse {
    /// The response id given to the client.
    pub id: String,
    /// Whose it is.
    pub user_id: Uuid,
    /// The response it continued, if any.
    pub previous_id: Option<String>,
    /// Its instructions.
    pub system: Option<String>,
    /// This turn's messages (its new input, then the answer) as JSON.
    pub turn: String,
    /// The response object as returned, as JSON.
    pub body: String,
    /// When it was kept.
    pub created_at: DateTime<Utc>,
}
