//! Read models: what each page of the web interface shows, gathered by one call.
//!
//! A page of the web interface shows what several subsystems know (a session page: the
//! conversation, the waiting call, the todos, the files, who wrote what, the models on offer,
//! the sidebar). `Pages` gathers each page's read model in one call, with a bounded number of
//! queries whatever the number of items (`tests/it/tree.rs` and `tests/it/shares.rs` count
//! them), so that a handler extracts, makes this one call and renders. Nothing here writes:
//! every operation is a read scoped to the acting user by the subsystem it asks.

mod admin;
mod session;
mod settings;

pub use admin::{ProviderPage, QuotasPage};

pub use session::{
    AgentPanel, CallDialog, ContextFilesPanel, DecidedCall, HomePage, MessageExtras, MessagePage,
    SessionHeader, SessionPage, SessionState, THREAD_WINDOW, TurnPage, older_before, window_of,
};
pub use settings::{
    AliasesPage, KeysPage, McpPage, PromptsPage, SearchAsk, SearchPage, TransferPage, WorkspacePage,
};

use crate::domain::admin::AdminConsole;
use crate::domain::agent::Agent;
use crate::domain::files::Files;
use crate::domain::mcp::McpServers;
use crate::domain::providers::aliases::Aliases;
use crate::domain::providers::user_keys::MemberKeys;
use std::sync::Arc;

use crate::domain::runs::RunEngine;
use crate::domain::search::SearchService;
use crate::domain::sessions::Sessions;
use crate::domain::teams::Teams;
use crate::domain::transfer::Transfers;
use crate::storage::Db;

/// Builds the pages' read models from the subsystems' services (built once in the app state as
/// `state.pages`); the database only for the lookups subsystems share (people's names).
#[derive(Clone)]
pub struct Pages {
    db: Db,
    sessions: Sessions,
    engine: RunEngine,
    agent: Agent,
    files: Files,
    keys: MemberKeys,
    aliases: Aliases,
    teams: Teams,
    mcp: McpServers,
    admin: AdminConsole,
    search: Arc<SearchService>,
    transfers: Transfers,
}

/// The services a [`Pages`] reads from.
pub struct PageSources {
    /// The database, for the lookups subsystems share.
    pub db: Db,
    /// Workspaces, sessions and their trees.
    pub sessions: Sessions,
    /// The run engine: waiting calls, models, files in context.
    pub engine: RunEngine,
    /// Todos.
    pub agent: Agent,
    /// Attached files.
    pub files: Files,
    /// Members' own keys and default model.
    pub keys: MemberKeys,
    /// Members' model aliases.
    pub aliases: Aliases,
    /// Groups and shares.
    pub teams: Teams,
    /// MCP servers.
    pub mcp: McpServers,
    /// The admin console.
    pub admin: AdminConsole,
    /// Chat search.
    pub search: Arc<SearchService>,
    /// Export and import.
    pub transfers: Transfers,
}

impl Pages {
    /// Read models over the given services.
    pub fn new(s: PageSources) -> Pages {
        Pages {
            db: s.db,
            sessions: s.sessions,
            engine: s.engine,
            agent: s.agent,
            files: s.files,
            keys: s.keys,
            aliases: s.aliases,
            teams: s.teams,
            mcp: s.mcp,
            admin: s.admin,
            search: s.search,
            transfers: s.transfers,
        }
    }
}
