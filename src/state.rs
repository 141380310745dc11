//! Application state, built once before the HTTP server starts and shared by every worker.

use std::sync::Arc;

use tera::Tera;

use crate::config::Config;
use crate::events::RunRegistry;
use crate::storage::Db;

/// Everything handlers need, cheap to clone.
#[derive(Clone)]
pub struct AppState {
    /// The effective configuration.
    pub config: Arc<Config>,
    /// The database pool.
    pub db: Db,
    /// Compiled templates.
    pub templates: Arc<Tera>,
    /// Live runs and their event fan-out.
    pub runs: RunRegistry,
    /// The OpenID Connect relying party, when configured.
    pub oidc: Option<Arc<crate::auth::oidc::Oidc>>,
    /// Outgoing mail.
    pub mailer: crate::mail::Mailer,
    /// Starts, stops and resumes replies; owns the providers registry.
    pub engine: crate::domain::runs::RunEngine,
    /// Sign-in attempt counters.
    pub login_limiter: crate::auth::ratelimit::RateLimiter,
    /// The opened key vault.
    pub vault: crate::vault::Vault,
    /// Writes the API's usage rows in batches.
    pub usage: crate::storage::usage_writer::UsageWriter,
}
