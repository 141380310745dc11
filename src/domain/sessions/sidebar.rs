//! The sidebar's read model: every workspace with its first page of sessions, in a bounded number
//! of queries.

use super::Sessions;
use super::*;

/// A workspace in the sidebar with the first page of its sessions.
#[derive(Debug, Clone, Serialize)]
pub struct SidebarWorkspace {
    /// The workspace.
    pub workspace: Workspace,
    /// Its first page of sessions, most recently active first.
    pub sessions: Vec<ChatSession>,
    /// The next page to load, when there is one.
    pub more: Option<u64>,
    /// The actor's role in it (`Owner` for their own).
    pub role: ShareRole,
    /// Whether it is someone else's, shared with the actor.
    pub shared: bool,
}

/// At most this many workspaces shared with a person are listed in their sidebar.
pub const SHARED_IN_SIDEBAR: u64 = 200;

impl Sessions {
    /// The sidebar's read model: the actor's workspaces (a "Personal" one made when there is none),
    /// each with its first page of sessions, and the open session `active` always listed. A bounded
    /// number of queries whatever the number of workspaces and sessions.
    pub async fn sidebar(&self, actor: &Actor, active: Option<Uuid>) -> DomainResult<Vec<SidebarWorkspace>> {
        let db = &self.db;
        let mut own = repo::list_workspaces(db, actor.user_id()).await?;
        if own.is_empty() {
            own.push(self.default_workspace(actor).await?);
        }
        let shared =
            crate::storage::repos::shares::shared_with(db, actor.user_id(), SHARED_IN_SIDEBAR).await?;
        let shared_ids: Vec<Uuid> = shared.iter().map(|(w, _)| w.id).collect();
        let mut firsts =
            repo::first_sessions_per_workspace(db, actor.user_id(), false, SIDEBAR_PAGE + 1).await?;
        firsts.extend(repo::first_sessions_in(db, &shared_ids, false, SIDEBAR_PAGE + 1).await?);
        let workspaces = own.into_iter().map(|w| (w, ShareRole::Owner, false)).chain(
            shared.into_iter().filter_map(|(w, roles)| roles.into_iter().max().map(|role| (w, role, true))),
        );
        let mut out = Vec::new();
        for (workspace, role, shared) in workspaces {
            let mut sessions: Vec<ChatSession> = Vec::new();
            firsts.retain(|s| {
                if s.workspace_id == workspace.id {
                    sessions.push(s.clone());
                    false
                } else {
                    true
                }
            });
            let more = sessions.len() as u64 > SIDEBAR_PAGE;
            sessions.truncate(SIDEBAR_PAGE as usize);
            out.push(SidebarWorkspace { workspace, sessions, more: more.then_some(1), role, shared });
        }
        // The open session is always listed (and can be highlighted and retitled live), even when
        // it is older than the first page.
        if let Some(id) = active.filter(|id| !out.iter().any(|w| w.sessions.iter().any(|s| s.id == *id))) {
            let (session, _) = self.view_session(actor, id).await?;
            if let Some(w) =
                out.iter_mut().find(|w| w.workspace.id == session.workspace_id && !session.archived)
            {
                w.sessions.push(session);
            }
        }
        Ok(out)
    }
}
