//! What may be deleted while an answer is being written: one rule for workspaces, sessions,
//! messages and people, instead of one per handler. A live run owns its session's tree until
//! it ends, so deleting under it is refused (or, for a person an admin deletes, their runs are
//! stopped first and the admin asked to try again).

use uuid::Uuid;

use crate::domain::accounts::Actor;
use crate::domain::admin::AdminConsole;
use crate::domain::authz::Admin;
use crate::domain::{DomainError, DomainResult};
use crate::events::RunRegistry;
use crate::storage::Db;

/// Decides deletions against the live runs; built once in the app state.
#[derive(Clone)]
pub struct Deletions {
    sessions: crate::domain::sessions::Sessions,
    runs: RunRegistry,
    admin: AdminConsole,
}

impl Deletions {
    /// The rule over this database, run registry and console (for a person's sessions).
    pub fn new(db: Db, runs: RunRegistry, admin: AdminConsole) -> Deletions {
        Deletions { sessions: crate::domain::sessions::Sessions::new(db), runs, admin }
    }

    /// Whether a session has an answer being written.
    pub fn session_is_live(&self, session_id: Uuid) -> bool {
        self.runs.is_active(session_id)
    }

    /// A workspace may go when none of its sessions is live; returns its sessions (for the
    /// search index to forget).
    pub async fn workspace(&self, actor: &Actor, workspace_id: Uuid) -> DomainResult<Vec<Uuid>> {
        let ids = self.sessions.workspace_session_ids(actor, workspace_id).await?;
        if ids.iter().any(|id| self.runs.is_active(*id)) {
            return Err(DomainError::Conflict(
                "An answer is still being written in this workspace: stop it first.".into(),
            ));
        }
        Ok(ids)
    }

    /// A session may go when it is not live.
    pub async fn session(&self, actor: &Actor, session_id: Uuid) -> DomainResult<()> {
        let session = self.sessions.own_session(actor, session_id).await?;
        if self.runs.is_active(session.id) {
            return Err(DomainError::Conflict("An answer is still being written: stop it first.".into()));
        }
        Ok(())
    }

    /// A person may go when none of their sessions is live; live ones are stopped now, and the
    /// admin is asked to try again once they have ended.
    pub async fn user(&self, admin: &Admin, user_id: Uuid) -> DomainResult<()> {
        let live: Vec<Uuid> = self
            .admin
            .user_session_ids(admin, user_id)
            .await?
            .into_iter()
            .filter(|s| self.runs.is_active(*s))
            .collect();
        if live.is_empty() {
            return Ok(());
        }
        for s in &live {
            self.runs.cancel(*s);
        }
        Err(DomainError::Conflict(
            "This user has answers being written; they are being stopped. Try again in a moment.".into(),
        ))
    }
}
