//! A member shares one of their own MCP servers with one of their groups: the group's members'
//! agents get its tools (asked before every call, like any member's server), called with the
//! owner's stored headers. Others see its name, address, owner and group, never its headers.

use super::McpServers;
use serde::Serialize;
use uuid::Uuid;

use crate::domain::accounts::Actor;
use crate::domain::audit::{self, Origin};
use crate::domain::{DomainError, DomainResult};
use crate::storage::repos::groups as group_repo;
use crate::storage::repos::mcp_servers as repo;

/// A colleague's server shared with one of the reader's groups, as their settings list it.
#[derive(Debug, Clone, Serialize)]
pub struct SharedServer {
    /// Name; its tools appear as `name__tool` (unless one of the reader's own has the name).
    pub name: String,
    /// The URL.
    pub url: String,
    /// Who keeps it.
    pub owner: String,
    /// The group it is shared with.
    pub group: String,
    /// Whether its owner has it switched on.
    pub enabled: bool,
}

impl McpServers {
    /// Shares one of the actor's own servers with one of their groups (`group`: its id), or with
    /// nobody (blank). Audited.
    pub async fn share_own(&self, actor: &Actor, origin: &Origin, id: Uuid, group: &str) -> DomainResult<()> {
        let db = &self.db;
        let server = repo::find_owned(db, actor.user_id(), id).await?.ok_or(DomainError::NotFound)?;
        let group = crate::domain::teams::groups::one_of_mine(db, actor, group).await?;
        if !repo::set_group(db, actor.user_id(), id, group.as_ref().map(|g| g.id)).await? {
            return Err(DomainError::NotFound);
        }
        audit::record(
            db,
            origin,
            "mcp.own.share",
            &format!("mcp:{}", server.name),
            serde_json::json!({ "group": group.map(|g| g.name) }),
        )
        .await
    }

    /// Colleagues' servers shared with the actor's groups.
    pub async fn shared_with_me(&self, actor: &Actor) -> DomainResult<Vec<SharedServer>> {
        let db = &self.db;
        let groups = group_repo::groups_of(db, actor.user_id()).await?;
        let ids: Vec<Uuid> = groups.iter().map(|g| g.id).collect();
        let rows = repo::shared_with(db, actor.user_id(), &ids).await?;
        let owners: Vec<Uuid> = rows.iter().filter_map(|r| r.owner_id).collect();
        let labels = crate::domain::accounts::names(db, &owners).await?;
        Ok(rows
            .into_iter()
            .map(|r| SharedServer {
                owner: r.owner_id.and_then(|o| labels.get(&o).cloned()).unwrap_or_default(),
                group: groups
                    .iter()
                    .find(|g| Some(g.id) == r.group_id)
                    .map(|g| g.name.clone())
                    .unwrap_or_default(),
                name: r.name,
                url: r.url,
                enabled: r.enabled,
            })
            .collect())
    }

    /// Attaches one of the actor's own servers to one of their own workspaces (`workspace`: its
    /// id), or to none (blank): runs in it get its tools whoever starts them, so editors the
    /// workspace is shared with use it with the owner's headers. Audited.
    pub async fn attach_to_workspace(
        &self,
        actor: &Actor,
        origin: &Origin,
        id: Uuid,
        workspace: &str,
    ) -> DomainResult<()> {
        let db = &self.db;
        let server = repo::find_owned(db, actor.user_id(), id).await?.ok_or(DomainError::NotFound)?;
        let workspace = match workspace.trim() {
            "" => None,
            raw => {
                let mine = crate::storage::repos::workspaces::list_workspaces(db, actor.user_id()).await?;
                let found = Uuid::parse_str(raw).ok().and_then(|id| mine.into_iter().find(|w| w.id == id));
                Some(
                    found
                        .ok_or_else(|| DomainError::Invalid("Attach it to one of your workspaces.".into()))?,
                )
            }
        };
        if !repo::set_workspace(db, actor.user_id(), id, workspace.as_ref().map(|w| w.id)).await? {
            return Err(DomainError::NotFound);
        }
        audit::record(
            db,
            origin,
            "mcp.own.workspace",
            &format!("mcp:{}", server.name),
            serde_json::json!({ "workspace": workspace.map(|w| w.name) }),
        )
        .await
    }
}
