//! Shared workspaces: a workspace's owners share it with people or groups as viewer, editor or
//! owner, change the role and revoke it. A revocation is announced at once so that live streams
//! of people who lost access end (see [`AccessChanges`]); what they may do is decided per
//! request by `sessions::access`.

use uuid::Uuid;

use crate::domain::audit::{self, Origin};
use crate::domain::authz::Actor;
use crate::domain::sessions::access::{ShareRole, workspace_as};
use crate::domain::{DomainError, DomainResult};
use crate::model::teams::{Share, ShareSubject};
use crate::storage::Db;

pub use super::changes::AccessChanges;
use crate::storage::repos::shares::{self as repo, Subject};

/// At most this many shares on one workspace.
pub const MAX_SHARES: u64 = 200;

/// Sharing workspaces with people and groups.
#[derive(Clone)]
pub struct Shares {
    pub(super) db: Db,
    pub(super) access: AccessChanges,
}

/// Who the owner names in the share form.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Target {
    /// A person, by email.
    Person(String),
    /// A group, by name.
    Group(String),
}

impl Shares {
    /// Resolves when the actor can no longer view the workspace (a share revoked, a group
    /// left); never for its owner. Live streams of a shared session end with it.
    pub async fn lost(&self, actor: &Actor, workspace_id: Uuid) {
        self.access.lost(&self.db, actor, workspace_id).await
    }

    /// The workspace's shares (its owners only).
    pub async fn list(&self, actor: &Actor, workspace_id: Uuid) -> DomainResult<Vec<Share>> {
        let db = &self.db;
        let (workspace, _) = workspace_as(db, actor, workspace_id, ShareRole::Owner).await?;
        Ok(repo::list(db, workspace.id).await?)
    }

    /// Shares the workspace with a person or a group (or changes the role of their share).
    pub async fn share(
        &self,
        actor: &Actor,
        origin: &Origin,
        workspace_id: Uuid,
        target: &Target,
        role: ShareRole,
    ) -> DomainResult<Share> {
        let db = &self.db;
        let (workspace, _) = workspace_as(db, actor, workspace_id, ShareRole::Owner).await?;
        let (subject, label) = match target {
            Target::Person(raw) => {
                let user = super::person(db, raw).await?;
                let email = user.email.clone();
                if user.id == workspace.owner_id {
                    return Err(DomainError::Invalid(format!("{email} owns this workspace already.")));
                }
                if user.status != crate::domain::accounts::UserStatus::Active {
                    return Err(DomainError::Invalid(format!(
                        "{email} is disabled: enable the account first."
                    )));
                }
                (Subject::Person(user.id), email)
            }
            Target::Group(raw) => {
                let group = crate::domain::teams::groups::named(db, raw).await?;
                (Subject::Group(group.id), group.name)
            }
        };
        let existing = repo::list(db, workspace.id).await?;
        let already = existing.iter().any(|s| is_for(s, subject));
        if !already && existing.len() as u64 >= MAX_SHARES {
            return Err(DomainError::Invalid(format!(
                "A workspace is shared with at most {MAX_SHARES} people and groups."
            )));
        }
        repo::put(db, workspace.id, subject, role, actor.user_id()).await?;
        audit::record(
            db,
            origin,
            "workspace.share",
            &format!("workspace:{}", workspace.name),
            serde_json::json!({ "workspace_id": workspace.id, "with": label, "role": role.as_str() }),
        )
        .await?;
        repo::list(db, workspace.id)
            .await?
            .into_iter()
            .find(|s| is_for(s, subject))
            .ok_or(DomainError::NotFound)
    }

    /// Changes the role of one share.
    pub async fn change(
        &self,
        actor: &Actor,
        origin: &Origin,
        workspace_id: Uuid,
        share_id: Uuid,
        role: ShareRole,
    ) -> DomainResult<Share> {
        let db = &self.db;
        let (workspace, _) = workspace_as(db, actor, workspace_id, ShareRole::Owner).await?;
        let existing = repo::find(db, workspace.id, share_id).await?.ok_or(DomainError::NotFound)?;
        let target = match &existing.subject {
            ShareSubject::Person { label, .. } => Target::Person(label.clone()),
            ShareSubject::Group { label, .. } => Target::Group(label.clone()),
        };
        self.share(actor, origin, workspace.id, &target, role).await
    }

    /// Revokes one share; streams of the people who lose access end at once.
    pub async fn revoke(
        &self,
        actor: &Actor,
        origin: &Origin,
        workspace_id: Uuid,
        share_id: Uuid,
    ) -> DomainResult<Share> {
        let db = &self.db;
        let (workspace, _) = workspace_as(db, actor, workspace_id, ShareRole::Owner).await?;
        let share = repo::find(db, workspace.id, share_id).await?.ok_or(DomainError::NotFound)?;
        if !repo::delete(db, workspace.id, share_id).await? {
            return Err(DomainError::NotFound);
        }
        let label = match &share.subject {
            ShareSubject::Person { label, .. } | ShareSubject::Group { label, .. } => label.clone(),
        };
        audit::record(
            db,
            origin,
            "workspace.unshare",
            &format!("workspace:{}", workspace.name),
            serde_json::json!({ "workspace_id": workspace.id, "with": label, "role": share.role.as_str() }),
        )
        .await?;
        self.access.announce(workspace.id);
        Ok(share)
    }
}

/// Parses the share form's role.
pub fn parse_role(raw: &str) -> DomainResult<ShareRole> {
    ShareRole::parse(raw.trim())
        .ok_or_else(|| DomainError::Invalid("Pick a role: viewer, editor or owner.".into()))
}

/// Whether a share is the one of this person or group.
fn is_for(share: &Share, subject: Subject) -> bool {
    match (&share.subject, subject) {
        (ShareSubject::Person { id, .. }, Subject::Person(p)) => *id == p,
        (ShareSubject::Group { id, .. }, Subject::Group(g)) => *id == g,
        _ => false,
    }
}
