//! Queries over `mcp_servers`: the instance's servers (no owner) and members' own.

use sea_orm::{ActiveModelTrait, ColumnTrait, Condition, EntityTrait, QueryFilter, QueryOrder};
use uuid::Uuid;

use crate::storage::entities::mcp_server;
pub use crate::storage::entities::mcp_server::Model as McpServerRecord;
use crate::storage::{Db, StorageResult};

/// The instance's servers, by name.
pub async fn list_instance(db: &Db) -> StorageResult<Vec<McpServerRecord>> {
    Ok(mcp_server::Entity::find()
        .filter(mcp_server::Column::OwnerId.is_null())
        .order_by_asc(mcp_server::Column::Name)
        .all(db)
        .await?)
}

/// A member's own servers, by name.
pub async fn list_owned(db: &Db, owner: Uuid) -> StorageResult<Vec<McpServerRecord>> {
    Ok(mcp_server::Entity::find()
        .filter(mcp_server::Column::OwnerId.eq(owner))
        .order_by_asc(mcp_server::Column::Name)
        .all(db)
        .await?)
}

/// The enabled servers a user's agent may use: the instance's and the user's own, by name.
pub async fn enabled_for(db: &Db, user: Uuid) -> StorageResult<Vec<McpServerRecord>> {
    Ok(mcp_server::Entity::find()
        .filter(mcp_server::Column::Enabled.eq(true))
        .filter(
            Condition::any()
                .add(mcp_server::Column::OwnerId.is_null())
                .add(mcp_server::Column::OwnerId.eq(user)),
        )
        .order_by_asc(mcp_server::Column::Name)
        .all(db)
        .await?)
}

/// The instance's server with this name.
pub async fn find_instance_by_name(db: &Db, name: &str) -> StorageResult<Option<McpServerRecord>> {
    Ok(mcp_server::Entity::find()
        .filter(mcp_server::Column::OwnerId.is_null())
        .filter(mcp_server::Column::Name.eq(name))
        .one(db)
        .await?)
}

/// One of the instance's servers.
pub async fn find_instance(db: &Db, id: Uuid) -> StorageResult<Option<McpServerRecord>> {
    Ok(mcp_server::Entity::find_by_id(id).filter(mcp_server::Column::OwnerId.is_null()).one(db).await?)
}

/// One of a member's own servers.
pub async fn find_owned(db: &Db, owner: Uuid, id: Uuid) -> StorageResult<Option<McpServerRecord>> {
    Ok(mcp_server::Entity::find_by_id(id).filter(mcp_server::Column::OwnerId.eq(owner)).one(db).await?)
}

/// Any server, whoever owns it.
pub async fn find(db: &Db, id: Uuid) -> StorageResult<Option<McpServerRecord>> {
    Ok(mcp_server::Entity::find_by_id(id).one(db).await?)
}

/// Stores a new server.
pub async fn insert(db: &Db, record: McpServerRecord) -> StorageResult<McpServerRecord> {
    let row: mcp_server::ActiveModel = record.into();
    Ok(mcp_server::Entity::insert(row).exec_with_returning(db).await?)
}

/// Saves every column of an existing server.
pub async fn update(db: &Db, record: McpServerRecord) -> StorageResult<McpServerRecord> {
    let row: mcp_server::ActiveModel = record.into();
    Ok(row.reset_all().update(db).await?)
}

/// Deletes a server row.
pub async fn delete(db: &Db, id: Uuid) -> StorageResult<()> {
    mcp_server::Entity::delete_by_id(id).exec(db).await?;
    Ok(())
}
