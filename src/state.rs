//! Application state, built once before the HTTP server starts and shared by every worker.

use std::sync::Arc;

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
    /// The templates, compiled at the first page rendered.
    pub templates: Arc<crate::web::render::Templates>,
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
    /// Live event streams each member holds (SECURITY.md 54).
    pub streams: crate::limits::MemberSlots,
    /// Readiness and the present state behind `/metrics`.
    pub operations: crate::domain::operations::Operations,
    /// Uploads each member is sending (SECURITY.md 54).
    pub uploads: crate::limits::MemberSlots,
    /// The opened key vault.
    pub vault: crate::vault::Vault,
    /// Writes the API's usage rows in batches.
    pub usage: crate::storage::usage_writer::UsageWriter,
    /// Attached files, by content hash.
    pub blobs: crate::blobs::BlobStore,
    /// Attachments: uploads, serving and collection, with the upload limits.
    pub files: crate::domain::files::Files,
    /// Chat search.
    pub search: std::sync::Arc<crate::domain::search::SearchService>,
    /// Export and import.
    pub transfers: crate::domain::transfer::Transfers,
    /// Local accounts, sign-in and the member's own account settings.
    pub accounts: crate::domain::accounts::Accounts,
    /// Workspaces, sessions and their trees.
    pub sessions: crate::domain::sessions::Sessions,
    /// Groups, shared workspaces and share links.
    pub teams: crate::domain::teams::Teams,
    /// Members' own provider keys and their models.
    pub keys: crate::domain::providers::user_keys::MemberKeys,
    /// Members' model aliases.
    pub aliases: crate::domain::providers::aliases::Aliases,
    /// The agent's rules, todos and memory, and the host folders admins allow.
    pub agent: crate::domain::agent::Agent,
    /// The gateway: models for API callers, and the Responses API's stored answers.
    pub gateway: crate::domain::gateway::Gateway,
    /// The SCIM directory: its tokens and the people and groups it provisions.
    pub scim: crate::domain::scim::Directory,
    /// MCP server configuration: admins' servers and members' own.
    pub mcp: crate::domain::mcp::McpServers,
    /// The admin console's people and providers.
    pub admin: crate::domain::admin::AdminConsole,
    /// What each page shows, gathered in one call.
    pub pages: crate::domain::pages::Pages,
    /// What may be deleted while answers are being written.
    pub deletions: crate::domain::deletion::Deletions,
    /// How many statements the database connection has run.
    pub queries: crate::storage::QueryCounter,
}
