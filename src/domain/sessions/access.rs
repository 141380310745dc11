//! Who may do what in a workspace and its sessions: the workspace's owner may do everything;
//! someone it is shared with holds the most generous role of the shares that reach them (to
//! them, or to a group they are in). Everyone else is told it does not exist. Every read and
//! write of a session or workspace goes through [`session_as`] or [`workspace_as`], which is
//! what makes a role a check and not a habit.

use std::sync::LazyLock;
use std::time::Duration;

use uuid::Uuid;

use crate::domain::accounts::Actor;
use crate::domain::fresh::FreshCopies;
use crate::domain::{DomainError, DomainResult};
pub use crate::model::teams::ShareRole;
use crate::storage::Db;
use crate::storage::changes::{self, Kept};
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

/// The actor's role in a workspace whose owner is known, when it is at least `need`.
pub async fn role_as(
    db: &Db,
    actor: &Actor,
    owner_id: Uuid,
    workspace_id: Uuid,
    need: ShareRole,
) -> DomainResult<ShareRole> {
    check(role_in(db, actor, owner_id, workspace_id).await?, need)
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
    let session = repo::find_session_by_id(db, session_id).await?;
    session_row_as(db, actor, session, need).await
}

/// [`session_as`] on a session's row a caller read itself (with more in the same statement);
/// `None`, no such session, is `NotFound` like a session the actor may not see.
pub async fn session_row_as(
    db: &Db,
    actor: &Actor,
    session: Option<ChatSession>,
    need: ShareRole,
) -> DomainResult<(ChatSession, ShareRole)> {
    let session = session.ok_or(DomainError::NotFound)?;
    let role = role_as(db, actor, session.owner_id, session.workspace_id, need).await?;
    Ok((session, role))
}

/// The workspace, when the actor holds at least `need` in it; with the role they hold.
pub async fn workspace_as(
    db: &Db,
    actor: &Actor,
    workspace_id: Uuid,
    need: ShareRole,
) -> DomainResult<(Workspace, ShareRole)> {
    let workspace = workspace_by_id(db, workspace_id).await?.ok_or(DomainError::NotFound)?;
    let role = role_as(db, actor, workspace.owner_id, workspace.id, need).await?;
    Ok((workspace, role))
}

/// How long a workspace's row is used from memory at most (see `domain::fresh`: a write to it
/// here, or announced by another instance, ends the copy at once).
const KEPT_AGE: Duration = Duration::from_secs(10);
/// Workspaces kept at once; past it all are read again.
const KEPT_MOST: usize = 10_000;

/// Workspace rows as last read: a turn reads its workspace several times (the model, the key,
/// the system prompt, the page), and workspaces change seldom. Who may open one is not kept.
static KEPT: LazyLock<FreshCopies<Uuid, Workspace>> = LazyLock::new(|| FreshCopies::new(KEPT_AGE, KEPT_MOST));

async fn workspace_by_id(db: &Db, workspace_id: Uuid) -> DomainResult<Option<Workspace>> {
    // Read before the row: a write to it moves it.
    let generation = changes::generation(Kept::Workspaces);
    Ok(KEPT
        .get_or_find(workspace_id, generation, async || repo::find_workspace_by_id(db, workspace_id).await)
        .await?)
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
