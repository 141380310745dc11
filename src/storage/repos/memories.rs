//! Queries over `memories`, always by owner.

use chrono::Utc;
use sea_orm::sea_query::OnConflict;
use sea_orm::{ColumnTrait, ConnectionTrait, EntityTrait, QueryFilter, Set};
use uuid::Uuid;

use crate::storage::entities::memory;
use crate::storage::{Db, StorageResult};

/// The owner's memory in `scope`, if any was written.
pub async fn get(db: &Db, owner_id: Uuid, scope: &str) -> StorageResult<Option<String>> {
    Ok(memory::Entity::find_by_id((owner_id, scope.to_string())).one(db).await?.map(|m| m.content))
}

/// Every memory of the owner: (scope, content).
pub async fn all(db: &Db, owner_id: Uuid) -> StorageResult<Vec<(String, String)>> {
    Ok(memory::Entity::find()
        .filter(memory::Column::OwnerId.eq(owner_id))
        .all(db)
        .await?
        .into_iter()
        .map(|m| (m.scope, m.content))
        .collect())
}

/// Writes the owner's memory in `scope` whole (one statement: two writers cannot interleave).
pub async fn put(db: &Db, owner_id: Uuid, scope: &str, content: &str) -> StorageResult<()> {
    let row = memory::ActiveModel {
        owner_id: Set(owner_id),
        scope: Set(scope.to_string()),
        content: Set(content.to_string()),
        updated_at: Set(Utc::now()),
    };
    memory::Entity::insert(row)
        .on_conflict(
            OnConflict::columns([memory::Column::OwnerId, memory::Column::Scope])
                .update_columns([memory::Column::Content, memory::Column::UpdatedAt])
                .to_owned(),
        )
        .exec(db)
        .await?;
    Ok(())
}

/// Forgets the owner's memory in `scope` (its workspace is being deleted).
pub async fn forget_scope<C: ConnectionTrait>(db: &C, owner_id: Uuid, scope: &str) -> StorageResult<()> {
    memory::Entity::delete_many()
        .filter(memory::Column::OwnerId.eq(owner_id))
        .filter(memory::Column::Scope.eq(scope))
        .exec(db)
        .await?;
    Ok(())
}
