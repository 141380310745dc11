//! People in the console: the list, status and role, and deleting someone with their data.

use serde::Serialize;
use uuid::Uuid;

use super::{AdminConsole, UserRow};
use crate::domain::accounts::{Role, User, UserStatus};
use crate::domain::audit::{self, Origin};
use crate::domain::authz::Admin;
use crate::domain::{DomainError, DomainResult};
use crate::storage::Db;
use crate::storage::repos::{auth_sessions, users as users_repo, workspaces as workspace_repo};
use crate::vault::Vault;
use crate::vault::store::SecretKind;

/// Users page size.
pub const USERS_PAGE: u64 = 50;

async fn target_user(db: &Db, id: Uuid) -> DomainResult<User> {
    users_repo::find(db, id).await?.ok_or(DomainError::NotFound)
}

/// What deleting a user takes with them.
#[derive(Debug, Clone, Default, Serialize)]
pub struct DeletionSummary {
    /// The user.
    pub email: String,
    /// Their workspaces.
    pub workspaces: u64,
    /// Their sessions.
    pub sessions: u64,
    /// Messages in those sessions.
    pub messages: u64,
    /// Their stored provider keys.
    pub keys: u64,
}

impl AdminConsole {
    /// Users whose email or name contains `query`, by email, one page, and the total.
    pub async fn list_users(
        &self,
        admin: &Admin,
        query: &str,
        page: u64,
    ) -> DomainResult<(Vec<UserRow>, u64)> {
        let db = &self.db;
        let _actor = admin.actor();
        Ok(users_repo::search(db, query.trim(), page * USERS_PAGE, USERS_PAGE).await?)
    }

    /// Disables or enables a user. Disabling ends their browser sessions at once; nobody can
    /// disable themselves.
    pub async fn set_status(
        &self,
        admin: &Admin,
        origin: &Origin,
        id: Uuid,
        active: bool,
    ) -> DomainResult<User> {
        let db = &self.db;
        let actor = admin.actor();
        let target = target_user(db, id).await?;
        if id == actor.user_id() {
            return Err(DomainError::Invalid("You cannot disable your own account.".into()));
        }
        let status = if active { UserStatus::Active } else { UserStatus::Disabled };
        users_repo::set_status(db, id, status).await?;
        if !active {
            auth_sessions::delete_for_user(db, id).await?;
        }
        audit::record(
            db,
            origin,
            if active { "user.enable" } else { "user.disable" },
            &format!("user:{}", target.email),
            serde_json::json!({ "user_id": id, "from": target.status.as_str(), "to": status.as_str() }),
        )
        .await?;
        target_user(db, id).await
    }

    /// Promotes or demotes a user; the last admin cannot be demoted.
    pub async fn set_role(&self, admin: &Admin, origin: &Origin, id: Uuid, role: Role) -> DomainResult<User> {
        let db = &self.db;
        let _actor = admin.actor();
        let target = target_user(db, id).await?;
        if target.role == role {
            return Ok(target);
        }
        if role == Role::Member && target.role == Role::Admin && users_repo::count_admins(db).await? <= 1 {
            return Err(DomainError::Invalid("This is the last admin: promote someone else first.".into()));
        }
        users_repo::set_role(db, id, role).await?;
        audit::record(
            db,
            origin,
            "user.role",
            &format!("user:{}", target.email),
            serde_json::json!({ "user_id": id, "from": target.role.as_str(), "to": role.as_str() }),
        )
        .await?;
        target_user(db, id).await
    }

    /// Counts what deleting a user would remove.
    pub async fn deletion_summary(&self, admin: &Admin, id: Uuid) -> DomainResult<DeletionSummary> {
        let db = &self.db;
        let _actor = admin.actor();
        let target = target_user(db, id).await?;
        let mut s = DeletionSummary { email: target.email, ..DeletionSummary::default() };
        for w in workspace_repo::list_workspaces(db, id).await? {
            let (sessions, messages) = workspace_repo::workspace_counts(db, id, w.id).await?;
            s.workspaces += 1;
            s.sessions += sessions;
            s.messages += messages;
        }
        s.keys = Vault::list_secrets(db, id, SecretKind::ProviderKey).await?.len() as u64;
        Ok(s)
    }

    /// Every session of a user (to stop live answers before deleting them).
    pub async fn user_session_ids(&self, admin: &Admin, id: Uuid) -> DomainResult<Vec<Uuid>> {
        let db = &self.db;
        let _actor = admin.actor();
        let mut out = Vec::new();
        for w in workspace_repo::list_workspaces(db, id).await? {
            out.extend(workspace_repo::workspace_session_ids(db, id, w.id).await?);
        }
        Ok(out)
    }

    /// Deletes a user with their workspaces, sessions, messages, keys, quota and browser sessions.
    /// Usage rows stay (without the user) so totals remain right; audit rows stay as written.
    pub async fn delete_user(
        &self,
        admin: &Admin,
        origin: &Origin,
        id: Uuid,
    ) -> DomainResult<DeletionSummary> {
        let db = &self.db;
        let actor = admin.actor();
        if id == actor.user_id() {
            return Err(DomainError::Invalid("You cannot delete your own account here.".into()));
        }
        let summary = self.deletion_summary(admin, id).await?;
        let target = target_user(db, id).await?;
        if target.role == Role::Admin && users_repo::count_admins(db).await? <= 1 {
            return Err(DomainError::Invalid("This is the last admin: promote someone else first.".into()));
        }
        for w in workspace_repo::list_workspaces(db, id).await? {
            workspace_repo::delete_workspace(db, id, w.id).await?;
        }
        Vault::delete_owner(db, id).await?;
        crate::storage::repos::quotas::remove(db, &id.to_string()).await?;
        users_repo::delete(db, id).await?;
        audit::record(
            db,
            origin,
            "user.delete",
            &format!("user:{}", summary.email),
            serde_json::json!({
                "user_id": id,
                "workspaces": summary.workspaces,
                "sessions": summary.sessions,
                "messages": summary.messages,
                "keys": summary.keys,
            }),
        )
        .await?;
        Ok(summary)
    }
}
