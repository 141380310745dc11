//! MCP servers in the agent: which servers a user's runs may use, their tools offered under
//! `server__tool` names, and calls routed to them.
//!
//! A server's environment or headers are decrypted only when its configuration is new or
//! changed (one audited decryption per version), never per call. Servers start on first use,
//! through [`McpManager`], which restarts a crashed one and stops them all on shutdown.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use serde_json::Value;
use sha2::{Digest, Sha256};
use uuid::Uuid;

use crate::domain::agent::{OfferedTool, tool_digest};
use crate::domain::fresh::FreshCopies;
use crate::domain::mcp::servers::{self, Transport};
use crate::domain::{DomainError, DomainResult};
use crate::model::mcp::McpServerRecord;
use crate::netguard::AllowedRanges;
use crate::providers::types::ToolSpec;
use crate::storage::Db;
use crate::storage::changes::{self, Kept};
use crate::storage::repos::mcp_servers as repo;
use crate::tools::mcp::{McpManager, McpServerConfig, McpTransport};
use crate::tools::{Risk, ToolOutput};
use crate::vault::Vault;

/// The agent's MCP servers.
pub struct McpRuntime {
    db: Db,
    vault: Vault,
    manager: McpManager,
    /// Ranges a member's server URL may reach although they are private.
    member_allowed: AllowedRanges,
    /// Decrypted configurations by server id, with the fingerprint they were made for.
    configs: Mutex<HashMap<Uuid, McpServerConfig>>,
    /// Servers whose tools could not be listed, and until when runs go on without them (so a
    /// server that is down does not hold up every reply for its start timeout).
    resting: Mutex<HashMap<Uuid, std::time::Instant>>,
    /// The servers each member may use, by workspace (see [`Self::servers_for`]).
    kept: FreshCopies<(Uuid, Option<Uuid>), Vec<McpServerRecord>>,
}

/// How long a kept list of servers is used at most (bounds a missed note from another instance
/// or a write by the command line).
const KEPT_AGE: std::time::Duration = std::time::Duration::from_secs(10);
/// Lists kept at most; past it all are read again.
const KEPT_MOST: usize = 4096;

/// How long runs go on without a server whose tools could not be listed.
const REST_AFTER_FAILURE: std::time::Duration = std::time::Duration::from_secs(60);

/// A fingerprint of everything that decides how a server is started or reached.
fn fingerprint(row: &McpServerRecord) -> String {
    let mut h = Sha256::new();
    for part in [
        row.id.to_string(),
        row.name.clone(),
        row.transport.clone(),
        row.command.clone(),
        row.args.clone(),
        row.url.clone(),
        row.secret_id.map(|s| s.to_string()).unwrap_or_default(),
        row.updated_at.to_rfc3339(),
    ] {
        h.update(part.as_bytes());
        h.update([0u8]);
    }
    h.finalize().iter().map(|b| format!("{b:02x}")).collect()
}

impl McpRuntime {
    /// A runtime over the stored servers.
    pub fn new(db: Db, vault: Vault, manager: McpManager, member_allowed: AllowedRanges) -> McpRuntime {
        McpRuntime {
            db,
            vault,
            manager,
            member_allowed,
            configs: Mutex::new(HashMap::new()),
            resting: Mutex::new(HashMap::new()),
            kept: FreshCopies::new(KEPT_AGE, KEPT_MOST),
        }
    }

    /// The enabled servers a user's agent may use: the instance's, the user's own, and those
    /// colleagues shared with the user's groups or attached to the run's workspace; a shared server whose name is taken by one
    /// listed before it is left out (tool names must stay unique).
    async fn servers_for(
        &self,
        user_id: Uuid,
        workspace: Option<Uuid>,
    ) -> DomainResult<Vec<McpServerRecord>> {
        // Every reply asks this before its first call: the list is kept between writes to the
        // servers or to group memberships (`Kept::McpServers`), like the other kept rows.
        let generation = changes::generation(Kept::McpServers);
        self.kept
            .get_or_read((user_id, workspace), generation, async || {
                let groups = crate::storage::repos::groups::group_ids_of(&self.db, user_id).await?;
                let mut seen = std::collections::HashSet::new();
                Ok::<_, DomainError>(
                    repo::enabled_for(&self.db, user_id, &groups, workspace)
                        .await?
                        .into_iter()
                        .filter(|r| seen.insert(r.name.clone()))
                        .collect(),
                )
            })
            .await
    }

    /// The server's configuration for the manager, decrypting its secrets only when it changed.
    async fn config(&self, row: &McpServerRecord, user_id: Uuid) -> DomainResult<McpServerConfig> {
        let print = fingerprint(row);
        if let Some(known) = self.lock().get(&row.id).filter(|c| c.fingerprint == print) {
            return Ok(known.clone());
        }
        let secrets = servers::secrets_for(&self.db, &self.vault, row.id, Some(user_id)).await?;
        let transport = match Transport::parse(&row.transport) {
            Some(Transport::Stdio) => McpTransport::Stdio {
                command: row.command.clone(),
                args: serde_json::from_str(&row.args).unwrap_or_default(),
                env: secrets,
                cwd: None,
            },
            Some(Transport::Http) => McpTransport::Http {
                url: row.url.clone(),
                headers: secrets,
                // A member's server may not reach private addresses; an admin's may.
                guard: row.owner_id.map(|_| self.member_allowed.clone()),
            },
            None => {
                return Err(DomainError::Invalid(format!(
                    "MCP server {} has no usable transport.",
                    row.name
                )));
            }
        };
        let config = McpServerConfig { key: row.id, name: row.name.clone(), transport, fingerprint: print };
        self.lock().insert(row.id, config.clone());
        Ok(config)
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, HashMap<Uuid, McpServerConfig>> {
        // Each critical section is one lookup or insert: a poisoned map is still consistent.
        self.configs.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Every tool of every server the user may use, ready to offer. A server that cannot be
    /// started or listed is left out (and logged); the run goes on without it.
    pub async fn tools_for(&self, user_id: Uuid) -> Vec<OfferedTool> {
        self.tools_in(user_id, None).await
    }

    /// [`McpRuntime::tools_for`] for a run in a workspace: the servers attached to it too.
    pub async fn tools_in(&self, user_id: Uuid, workspace: Option<Uuid>) -> Vec<OfferedTool> {
        let servers = match self.servers_for(user_id, workspace).await {
            Ok(s) => s,
            Err(e) => {
                tracing::warn!(error = %e, "could not read the MCP servers");
                return Vec::new();
            }
        };
        let mut out = Vec::new();
        for row in servers {
            let now = std::time::Instant::now();
            let resting = self
                .resting
                .lock()
                .unwrap_or_else(|p| p.into_inner())
                .get(&row.id)
                .is_some_and(|until| *until > now);
            if resting {
                continue;
            }
            let config = match self.config(&row, user_id).await {
                Ok(c) => c,
                Err(e) => {
                    tracing::warn!(server = %row.name, error = %e, "an MCP server's settings could not be used");
                    continue;
                }
            };
            match self.manager.tools(&config, false).await {
                Ok(tools) => {
                    for t in tools {
                        let spec = ToolSpec {
                            name: t.qualified.clone(),
                            description: format!("[MCP server {}] {}", t.server, t.description),
                            parameters: t.input_schema.clone().into(),
                        };
                        // Only an admin's server is trusted to say a tool changes nothing.
                        let risk =
                            if t.read_only && row.owner_id.is_none() { Risk::Read } else { Risk::Network };
                        out.push(OfferedTool {
                            digest: tool_digest(&spec),
                            spec,
                            risk,
                            mcp: Some((row.id, t.name.clone())),
                        });
                    }
                }
                Err(e) => {
                    tracing::warn!(
                        server = %row.name,
                        error = %e,
                        "an MCP server's tools are unavailable; runs go on without it for a minute"
                    );
                    self.resting
                        .lock()
                        .unwrap_or_else(|p| p.into_inner())
                        .insert(row.id, std::time::Instant::now() + REST_AFTER_FAILURE);
                }
            }
        }
        out
    }

    /// Calls a tool of a server the user may use.
    pub async fn call(&self, user_id: Uuid, server: Uuid, tool: &str, arguments: &Value) -> ToolOutput {
        self.call_in(user_id, None, server, tool, arguments).await
    }

    /// [`McpRuntime::call`] for a run in a workspace: a server attached to it may be called too.
    pub async fn call_in(
        &self,
        user_id: Uuid,
        workspace: Option<Uuid>,
        server: Uuid,
        tool: &str,
        arguments: &Value,
    ) -> ToolOutput {
        let rows = match self.servers_for(user_id, workspace).await {
            Ok(rows) => rows,
            Err(e) => {
                tracing::warn!(error = %e, "could not read the MCP servers");
                return ToolOutput::error("The MCP server could not be reached.");
            }
        };
        // Checked again at the call: a server disabled or removed since the tools were listed
        // is not called.
        let Some(row) = rows.into_iter().find(|r| r.id == server) else {
            return ToolOutput::error("This MCP server is no longer available.");
        };
        let config = match self.config(&row, user_id).await {
            Ok(c) => c,
            Err(e) => return ToolOutput::error(format!("The MCP server could not be used: {e}")),
        };
        match self.manager.call(&config, tool, arguments.clone()).await {
            Ok(result) => ToolOutput { content: result.text, is_error: result.is_error, diff: None },
            Err(e) => ToolOutput::error(format!("The MCP server failed: {e}")),
        }
    }

    /// Stops every running server.
    pub async fn shutdown(&self) {
        self.manager.shutdown().await;
    }

    /// Names of the running servers.
    pub fn running(&self) -> Vec<String> {
        self.manager.running()
    }
}

/// Shared handle.
pub type SharedMcp = Arc<McpRuntime>;
