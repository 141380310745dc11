//! Queries over `model_aliases`: a user's names for models or fallback chains.

use chrono::Utc;
use sea_orm::{ActiveModelTrait, ColumnTrait, EntityTrait, PaginatorTrait, QueryFilter, QueryOrder, Set};
use uuid::Uuid;

use crate::storage::changes::{self, Kept};
use crate::storage::entities::model_alias;
use crate::storage::{Db, StorageResult};

/// A user's aliases as `(alias, target)`, by name.
pub async fn list(db: &Db, user: Uuid) -> StorageResult<Vec<(String, String)>> {
    Ok(model_alias::Entity::find()
        .filter(model_alias::Column::UserId.eq(user))
        .order_by_asc(model_alias::Column::Alias)
        .all(db)
        .await?
        .into_iter()
        .map(|m| (m.alias, m.target))
        .collect())
}

/// The target of one alias.
pub async fn target(db: &Db, user: Uuid, alias: &str) -> StorageResult<Option<String>> {
    Ok(model_alias::Entity::find_by_id((user, alias.to_string())).one(db).await?.map(|m| m.target))
}

/// How many aliases a user keeps.
pub async fn count(db: &Db, user: Uuid) -> StorageResult<u64> {
    Ok(model_alias::Entity::find().filter(model_alias::Column::UserId.eq(user)).count(db).await?)
}

/// Sets an alias's target, creating it when new (its creation time is kept on a change).
pub async fn put(db: &Db, user: Uuid, alias: &str, target: &str) -> StorageResult<()> {
    let existing = model_alias::Entity::find_by_id((user, alias.to_string())).one(db).await?;
    let row = model_alias::ActiveModel {
        user_id: Set(user),
        alias: Set(alias.to_string()),
        target: Set(target.to_string()),
        created_at: Set(existing.as_ref().map_or_else(Utc::now, |e| e.created_at)),
    };
    if existing.is_some() {
        row.update(db).await?;
    } else {
        row.insert(db).await?;
    }
    changes::changed(Kept::Aliases);
    Ok(())
}

/// Deletes one alias; whether it existed.
pub async fn delete(db: &Db, user: Uuid, alias: &str) -> StorageResult<bool> {
    let done = model_alias::Entity::delete_many()
        .filter(model_alias::Column::UserId.eq(user))
        .filter(model_alias::Column::Alias.eq(alias))
        .exec(db)
        .await?;
    let done = done.rows_affected > 0;
    changes::changed(Kept::Aliases);
    Ok(done)
}
