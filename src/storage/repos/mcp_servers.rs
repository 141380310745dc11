//! Queries over `mcp_servers`: the instance's servers (no owner) and members' own.

use sea_orm::sea_query::Expr;
use sea_orm::{
    ActiveModelTrait, ColumnTrait, Condition, ConnectionTrait, EntityTrait, QueryFilter, QueryOrder,
};
use uuid::Uuid;

use crate::model::mcp::McpServerRecord;
use crate::storage::changes::{self, Kept};
use crate::storage::entities::mcp_server;
use crate::storage::{Db, StorageResult};

/// The instance's servers, by name.
pub async fn list_instance(db: &Db) -> StorageResult<Vec<McpServerRecord>> {
    Ok(mcp_server::Entity::find()
        .filter(mcp_server::Column::OwnerId.is_null())
        .order_by_asc(mcp_server::Column::Name)
        .all(db)
        .await?
        .into_iter()
        .map(Into::into)
        .collect())
}

/// A member's own servers, by name.
pub async fn list_owned(db: &Db, owner: Uuid) -> StorageResult<Vec<McpServerRecord>> {
    Ok(mcp_server::Entity::find()
        .filter(mcp_server::Column::OwnerId.eq(owner))
        .order_by_asc(mcp_server::Column::Name)
        .all(db)
        .await?
        .into_iter()
        .map(Into::into)
        .collect())
}

/// The enabled servers a user's agent may use, by name: the instance's and the user's own,
/// then those colleagues shared with one of `groups` (the user's) or attached to `workspace`
/// (the run's).
pub async fn enabled_for(
    db: &Db,
    user: Uuid,
    groups: &[Uuid],
    workspace: Option<Uuid>,
) -> StorageResult<Vec<McpServerRecord>> {
    let mut reach = Condition::any()
        .add(mcp_server::Column::OwnerId.is_null())
        .add(mcp_server::Column::OwnerId.eq(user))
        .add(mcp_server::Column::GroupId.is_in(groups.iter().copied()));
    if let Some(ws) = workspace {
        reach = reach.add(mcp_server::Column::WorkspaceId.eq(ws));
    }
    let mut rows = mcp_server::Entity::find()
        .filter(mcp_server::Column::Enabled.eq(true))
        .filter(reach)
        .order_by_asc(mcp_server::Column::Name)
        .all(db)
        .await?;
    // Stable: the instance's and the user's own first, each group of names in order.
    rows.sort_by_key(|r| r.owner_id.is_some_and(|o| o != user));
    Ok(rows.into_iter().map(Into::into).collect())
}

/// Members' servers shared with any of these groups, except `user`'s own, by name.
pub async fn shared_with(db: &Db, user: Uuid, groups: &[Uuid]) -> StorageResult<Vec<McpServerRecord>> {
    if groups.is_empty() {
        return Ok(Vec::new());
    }
    Ok(mcp_server::Entity::find()
        .filter(mcp_server::Column::GroupId.is_in(groups.iter().copied()))
        .filter(mcp_server::Column::OwnerId.ne(user))
        .order_by_asc(mcp_server::Column::Name)
        .all(db)
        .await?
        .into_iter()
        .map(Into::into)
        .collect())
}

/// Shares one of `owner`'s servers with a group, or with nobody; `false` when it is not theirs.
pub async fn set_group(db: &Db, owner: Uuid, id: Uuid, group: Option<Uuid>) -> StorageResult<bool> {
    set_owned(db, owner, id, mcp_server::Column::GroupId, group).await
}

/// Sets one id column of one of `owner`'s servers; `false` when it is not theirs.
async fn set_owned(
    db: &Db,
    owner: Uuid,
    id: Uuid,
    column: mcp_server::Column,
    value: Option<Uuid>,
) -> StorageResult<bool> {
    let res = mcp_server::Entity::update_many()
        .col_expr(column, Expr::value(value))
        .filter(mcp_server::Column::Id.eq(id))
        .filter(mcp_server::Column::OwnerId.eq(owner))
        .exec(db)
        .await?;
    changes::changed(Kept::McpServers);
    Ok(res.rows_affected == 1)
}

/// Stops sharing every server with a group (it is being deleted).
pub async fn unshare_group<C: ConnectionTrait>(conn: &C, group: Uuid) -> StorageResult<()> {
    mcp_server::Entity::update_many()
        .col_expr(mcp_server::Column::GroupId, Expr::value(Option::<Uuid>::None))
        .filter(mcp_server::Column::GroupId.eq(group))
        .exec(conn)
        .await?;
    changes::changed(Kept::McpServers);
    Ok(())
}

/// The instance's server with this name.
pub async fn find_instance_by_name(db: &Db, name: &str) -> StorageResult<Option<McpServerRecord>> {
    Ok(mcp_server::Entity::find()
        .filter(mcp_server::Column::OwnerId.is_null())
        .filter(mcp_server::Column::Name.eq(name))
        .one(db)
        .await?
        .map(Into::into))
}

/// One of the instance's servers.
pub async fn find_instance(db: &Db, id: Uuid) -> StorageResult<Option<McpServerRecord>> {
    Ok(mcp_server::Entity::find_by_id(id)
        .filter(mcp_server::Column::OwnerId.is_null())
        .one(db)
        .await?
        .map(Into::into))
}

/// One of a member's own servers.
pub async fn find_owned(db: &Db, owner: Uuid, id: Uuid) -> StorageResult<Option<McpServerRecord>> {
    Ok(mcp_server::Entity::find_by_id(id)
        .filter(mcp_server::Column::OwnerId.eq(owner))
        .one(db)
        .await?
        .map(Into::into))
}

/// Any server, whoever owns it.
pub async fn find(db: &Db, id: Uuid) -> StorageResult<Option<McpServerRecord>> {
    Ok(mcp_server::Entity::find_by_id(id).one(db).await?.map(Into::into))
}

/// Stores a new server.
pub async fn insert(db: &Db, record: McpServerRecord) -> StorageResult<McpServerRecord> {
    let row: mcp_server::ActiveModel = record.into();
    let made = mcp_server::Entity::insert(row).exec_with_returning(db).await?;
    changes::changed(Kept::McpServers);
    Ok(made.into())
}

/// Saves every column of an existing server.
pub async fn update(db: &Db, record: McpServerRecord) -> StorageResult<McpServerRecord> {
    let row: mcp_server::ActiveModel = record.into();
    let saved = row.reset_all().update(db).await?;
    changes::changed(Kept::McpServers);
    Ok(saved.into())
}

/// Deletes a server row.
pub async fn delete(db: &Db, id: Uuid) -> StorageResult<()> {
    mcp_server::Entity::delete_by_id(id).exec(db).await?;
    changes::changed(Kept::McpServers);
    Ok(())
}

/// Attaches one of `owner`'s servers to a workspace, or to none; `false` when it is not theirs.
pub async fn set_workspace(db: &Db, owner: Uuid, id: Uuid, workspace: Option<Uuid>) -> StorageResult<bool> {
    set_owned(db, owner, id, mcp_server::Column::WorkspaceId, workspace).await
}
