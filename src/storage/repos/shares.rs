//! Queries over `workspace_shares`: who a workspace is shared with, and what is shared with a
//! person directly or through their groups.

use chrono::Utc;
use sea_orm::sea_query::{OnConflict, Query};
use sea_orm::{
    ColumnTrait, Condition, ConnectionTrait, EntityTrait, PaginatorTrait, QueryFilter, QueryOrder,
    QuerySelect, Set,
};
use uuid::Uuid;

use crate::model::sessions::Workspace;
use crate::model::teams::{Share, ShareRole, ShareSubject};
use crate::storage::entities::{group, group_member, user, workspace, workspace_share};
use crate::storage::repos::workspaces::workspace_to_domain;
use crate::storage::{Db, StorageError, StorageResult};

fn role(raw: &str) -> StorageResult<ShareRole> {
    ShareRole::parse(raw).ok_or_else(|| StorageError::Corrupt(format!("share role {raw:?}")))
}

/// Shares that reach the person: to them, or to a group they are in.
fn reaching(user_id: Uuid) -> Condition {
    let groups = Query::select()
        .column(group_member::Column::GroupId)
        .from(group_member::Entity)
        .and_where(group_member::Column::UserId.eq(user_id))
        .to_owned();
    Condition::any()
        .add(workspace_share::Column::UserId.eq(user_id))
        .add(workspace_share::Column::GroupId.in_subquery(groups))
}

/// The roles the person holds in the workspace through shares (one statement).
pub async fn roles_of(db: &Db, workspace_id: Uuid, user_id: Uuid) -> StorageResult<Vec<ShareRole>> {
    workspace_share::Entity::find()
        .select_only()
        .column(workspace_share::Column::Role)
        .filter(workspace_share::Column::WorkspaceId.eq(workspace_id))
        .filter(reaching(user_id))
        .into_tuple::<String>()
        .all(db)
        .await?
        .iter()
        .map(|r| role(r))
        .collect()
}

/// Workspaces of others shared with the person, each with every role that reaches them, at
/// most `limit` workspaces, by name (two statements).
pub async fn shared_with(
    db: &Db,
    user_id: Uuid,
    limit: u64,
) -> StorageResult<Vec<(Workspace, Vec<ShareRole>)>> {
    let rows: Vec<(Uuid, String)> = workspace_share::Entity::find()
        .select_only()
        .column(workspace_share::Column::WorkspaceId)
        .column(workspace_share::Column::Role)
        .filter(reaching(user_id))
        .limit(limit.saturating_mul(4))
        .into_tuple()
        .all(db)
        .await?;
    let ids: Vec<Uuid> = rows.iter().map(|(w, _)| *w).collect();
    let workspaces = workspace::Entity::find()
        .filter(workspace::Column::Id.is_in(ids))
        .filter(workspace::Column::OwnerId.ne(user_id))
        .order_by_asc(workspace::Column::Name)
        .limit(limit)
        .all(db)
        .await?;
    workspaces
        .into_iter()
        .map(|w| {
            let roles = rows
                .iter()
                .filter(|(id, _)| *id == w.id)
                .map(|(_, r)| role(r))
                .collect::<StorageResult<_>>()?;
            Ok((workspace_to_domain(w), roles))
        })
        .collect()
}

/// A workspace's shares: people by email, then groups by name (three statements).
pub async fn list(db: &Db, workspace_id: Uuid) -> StorageResult<Vec<Share>> {
    let rows = workspace_share::Entity::find()
        .filter(workspace_share::Column::WorkspaceId.eq(workspace_id))
        .all(db)
        .await?;
    let user_ids: Vec<Uuid> = rows.iter().filter_map(|r| r.user_id).collect();
    let group_ids: Vec<Uuid> = rows.iter().filter_map(|r| r.group_id).collect();
    let people = user::Entity::find().filter(user::Column::Id.is_in(user_ids)).all(db).await?;
    let groups = group::Entity::find().filter(group::Column::Id.is_in(group_ids)).all(db).await?;
    let mut out = Vec::with_capacity(rows.len());
    for r in rows {
        let subject = match (r.user_id, r.group_id) {
            (Some(id), _) => {
                let Some(u) = people.iter().find(|u| u.id == id) else { continue };
                let label = if u.email.is_empty() { u.display_name.clone() } else { u.email.clone() };
                ShareSubject::Person { id, label }
            }
            (None, Some(id)) => {
                let Some(g) = groups.iter().find(|g| g.id == id) else { continue };
                ShareSubject::Group { id, label: g.name.clone() }
            }
            (None, None) => continue,
        };
        out.push(Share { id: r.id, subject, role: role(&r.role)? });
    }
    out.sort_by_key(|s| match &s.subject {
        ShareSubject::Person { label, .. } => (0, label.to_lowercase()),
        ShareSubject::Group { label, .. } => (1, label.to_lowercase()),
    });
    Ok(out)
}

/// How many shares the workspace has.
pub async fn count(db: &Db, workspace_id: Uuid) -> StorageResult<u64> {
    Ok(workspace_share::Entity::find()
        .filter(workspace_share::Column::WorkspaceId.eq(workspace_id))
        .count(db)
        .await?)
}

/// Who a new share is for.
#[derive(Debug, Clone, Copy)]
pub enum Subject {
    /// One person.
    Person(Uuid),
    /// A group.
    Group(Uuid),
}

/// Shares the workspace with the subject in `role`, or changes the role of their share.
pub async fn put<C: ConnectionTrait>(
    conn: &C,
    workspace_id: Uuid,
    subject: Subject,
    role: ShareRole,
    shared_by: Uuid,
) -> StorageResult<()> {
    let (user_id, group_id, key) = match subject {
        Subject::Person(id) => (Some(id), None, workspace_share::Column::UserId),
        Subject::Group(id) => (None, Some(id), workspace_share::Column::GroupId),
    };
    let row = workspace_share::ActiveModel {
        id: Set(Uuid::now_v7()),
        workspace_id: Set(workspace_id),
        user_id: Set(user_id),
        group_id: Set(group_id),
        role: Set(role.as_str().to_string()),
        shared_by: Set(Some(shared_by)),
        created_at: Set(Utc::now()),
    };
    workspace_share::Entity::insert(row)
        .on_conflict(
            OnConflict::columns([key, workspace_share::Column::WorkspaceId])
                .update_column(workspace_share::Column::Role)
                .to_owned(),
        )
        .exec_without_returning(conn)
        .await?;
    Ok(())
}

/// One share of the workspace.
pub async fn find(db: &Db, workspace_id: Uuid, share_id: Uuid) -> StorageResult<Option<Share>> {
    Ok(list(db, workspace_id).await?.into_iter().find(|s| s.id == share_id))
}

/// Removes one share of the workspace; true when there was one.
pub async fn delete<C: ConnectionTrait>(conn: &C, workspace_id: Uuid, share_id: Uuid) -> StorageResult<bool> {
    Ok(workspace_share::Entity::delete_many()
        .filter(workspace_share::Column::WorkspaceId.eq(workspace_id))
        .filter(workspace_share::Column::Id.eq(share_id))
        .exec(conn)
        .await?
        .rows_affected
        == 1)
}
