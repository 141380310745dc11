//! Who may do what in a workspace and its sessions: the workspace's owner may do everything;
//! someone it is shared with holds the most generous role of the shares that reach them (to
//! them, or to a group they are in). Everyone else is told it does not exist. Every read and
//! write of a session or workspace goes through [`session_as`] or [`workspace_as`], which is
//! what makes a role a check and not a habit.

use uuid::Uuid;

use crate::domain::accounts::Actor;
use crate::domain::{DomainError, DomainResult};
pub use crate::model::teams::ShareRole;
use crate::storage::Db;
use crate::storage::repos::{shares as shares_repo, workspaces as repo};

use super::{ChatSession, Workspace};

/// The actor's role in a workspace owned by `owner_id`, or none.
pub async fn role_in(
    db: &Db,
    actor: &Actor,
    owner_id: Uuid,
    workspace_id: Uuid,
) -> DomainResult<Option<ShareRole>> {
    if owner_id == actor.user_id() {
        return Ok(Some(ShareRole::Owner));
    }
    Ok(shares_repo::roles_of(db, workspace_id, actor.user_id()).await?.into_iter().max())
}

/// The workspaces of others shared with the person (at most [`super::SHARED_IN_SIDEBAR`]): what
/// search and files look in beside the person's own.
pub async fn shared_workspace_ids(db: &Db, user_id: Uuid) -> DomainResult<Vec<Uuid>> {
    Ok(shares_repo::shared_with(db, user_id, super::SHARED_IN_SIDEBAR)
        .await?
        .into_iter()
        .map(|(w, _)| w.id)
        .collect())
}

fn check(role: Option<ShareRole>, need: ShareRole) -> DomainResult<ShareRole> {
    match role {
        None => Err(DomainError::NotFound),
        Some(role) if role < need => Err(DomainError::Forbidden),
        Some(role) => Ok(role),
    }
}

/// The session, when the actor holds at least `need` in its workspace (one statement for the
/// owner, two for someone it is shared with); with the role they hold.
pub async fn session_as(
    db: &Db,
    actor: &Actor,
    session_id: Uuid,
    need: ShareRole,
) -> DomainResult<(ChatSession, ShareRole)> {
    let session = repo::find_session_by_id(db, session_id).await?.ok_or(DomainError::NotFound)?;
    let role = check(role_in(db, actor, session.owner_id, session.workspace_id).await?, need)?;
    Ok((session, role))
}

/// The workspace, when the actor holds at least `need` in it; with the role they hold.
pub async fn workspace_as(
    db: &Db,
    actor: &Actor,
    workspace_id: Uuid,
    need: ShareRole,
) -> DomainResult<(Workspace, ShareRole)> {
    let workspace = repo::find_workspace_by_id(db, workspace_id).await?.ok_or(DomainError::NotFound)?;
    let role = check(role_in(db, actor, workspace.owner_id, workspace.id).await?, need)?;
    Ok((workspace, role))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_role_below_the_need_is_forbidden_and_none_is_not_found() {
        assert!(matches!(check(None, ShareRole::Viewer), Err(DomainError::NotFound)));
        assert!(matches!(check(Some(ShareRole::Viewer), ShareRole::Editor), Err(DomainError::Forbidden)));
        assert!(matches!(check(Some(ShareRole::Editor), ShareRole::Owner), Err(DomainError::Forbidden)));
        assert_eq!(check(Some(ShareRole::Owner), ShareRole::Viewer).ok(), Some(ShareRole::Owner));
        assert!(ShareRole::Viewer < ShareRole::Editor && ShareRole::Editor < ShareRole::Owner);
    }
}
