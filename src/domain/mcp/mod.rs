//! MCP servers: their configuration (admins' and members' own) and running them for the agent.

pub mod runtime;
pub mod servers;
pub mod sharing;

/// MCP server configuration as a service: admins' servers, members' own, and what members share
/// with their groups. Built once in the app state over the database and the vault (which keeps
/// each server's secrets); the run engine's `runtime::McpRuntime` starts them.
#[derive(Clone)]
pub struct McpServers {
    db: crate::storage::Db,
    vault: crate::vault::Vault,
}

impl McpServers {
    /// The service over this database and vault.
    pub fn new(db: crate::storage::Db, vault: crate::vault::Vault) -> McpServers {
        McpServers { db, vault }
    }
}
