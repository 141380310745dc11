//! Deleting workspaces, sessions, messages and people: one service that decides what may be
//! deleted while an answer is being written, deletes it, and tidies after it (the search index
//! forgets it, files nothing refers to any more are collected). A live run owns its session's
//! tree until it ends, so deleting under it is refused (or, for a person an admin deletes, their
//! runs are stopped first and the admin asked to try again).

use std::sync::Arc;

use uuid::Uuid;

use crate::domain::accounts::Actor;
use crate::domain::admin::{AdminConsole, DeletionSummary};
use crate::domain::audit::Origin;
use crate::domain::authz::Admin;
use crate::domain::files::Files;
use crate::domain::search::SearchService;
use crate::domain::sessions::Sessions;
use crate::domain::{DomainError, DomainResult};
use crate::events::RunRegistry;

/// Deletes against the live runs; built once in the app state (`state.deletions`).
#[derive(Clone)]
pub struct Deletions {
    sessions: Sessions,
    runs: RunRegistry,
    admin: AdminConsole,
    search: Arc<SearchService>,
    files: Files,
}

impl Deletions {
    /// The service over these: the sessions to delete from, the live runs, the console (for a
    /// person), the search index to forget in, and the files to collect.
    pub fn new(
        sessions: Sessions,
        runs: RunRegistry,
        admin: AdminConsole,
        search: Arc<SearchService>,
        files: Files,
    ) -> Deletions {
        Deletions { sessions, runs, admin, search, files }
    }

    /// Deletes one of the actor's workspaces with its sessions, when none of them is live.
    pub async fn workspace(&self, actor: &Actor, workspace_id: Uuid) -> DomainResult<()> {
        let ids = self.sessions.workspace_session_ids(actor, workspace_id).await?;
        if ids.iter().any(|id| self.runs.is_active(*id)) {
            return Err(DomainError::Conflict(
                "An answer is still being written in this workspace: stop it first.".into(),
            ));
        }
        self.sessions.delete_workspace(actor, workspace_id).await?;
        for id in ids {
            self.search.forget_session(id);
        }
        self.collect_files();
        Ok(())
    }

    /// Deletes one of the actor's sessions, when it is not live.
    pub async fn session(&self, actor: &Actor, session_id: Uuid) -> DomainResult<()> {
        let session = self.sessions.own_session(actor, session_id).await?;
        if self.runs.is_active(session.id) {
            return Err(DomainError::Conflict("An answer is still being written: stop it first.".into()));
        }
        self.sessions.delete_session(actor, session.id).await?;
        self.search.forget_session(session.id);
        self.collect_files();
        Ok(())
    }

    /// Deletes a message and everything below it, when no answer is being written in the
    /// session; returns how many messages went. The index drops them when a search next meets
    /// them.
    pub async fn branch(&self, actor: &Actor, session_id: Uuid, message_id: Uuid) -> DomainResult<u64> {
        let live = self.runs.is_active(session_id);
        let removed = self.sessions.delete_branch(actor, session_id, message_id, live).await?;
        self.collect_files();
        Ok(removed)
    }

    /// Deletes a person with everything they own, when none of their sessions is live; live
    /// ones are stopped now, and the admin is asked to try again once they have ended.
    pub async fn user(&self, admin: &Admin, origin: &Origin, user_id: Uuid) -> DomainResult<DeletionSummary> {
        let live: Vec<Uuid> = self
            .admin
            .user_session_ids(admin, user_id)
            .await?
            .into_iter()
            .filter(|s| self.runs.is_active(*s))
            .collect();
        if !live.is_empty() {
            for s in &live {
                self.runs.cancel(*s);
            }
            return Err(DomainError::Conflict(
                "This user has answers being written; they are being stopped. Try again in a moment.".into(),
            ));
        }
        let summary = self.admin.delete_user(admin, origin, user_id).await?;
        // Every instance's search index forgets their messages (a tombstone reaches the others).
        self.search.forget_user(user_id);
        self.collect_files();
        Ok(summary)
    }

    /// Collects the files nothing refers to any more, in the background.
    fn collect_files(&self) {
        let files = self.files.clone();
        tokio::spawn(async move {
            if let Err(e) = files.collect_unreferenced().await {
                tracing::warn!(error = %e, "collecting unreferenced files failed");
            }
        });
    }
}
