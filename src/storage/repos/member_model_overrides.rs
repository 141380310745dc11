//! Queries over `member_model_overrides`.

use chrono::Utc;
use sea_orm::{ActiveModelTrait, ColumnTrait, EntityTrait, PaginatorTrait, QueryFilter, QueryOrder, Set};
use uuid::Uuid;

use crate::model::providers::MemberModelOverride;
use crate::storage::entities::member_model_override as row;
use crate::storage::entities::stated_columns;
use crate::storage::{Db, StorageResult};

/// Every member's overrides (read at start).
pub async fn all(db: &Db) -> StorageResult<Vec<MemberModelOverride>> {
    Ok(row::Entity::find().all(db).await?.into_iter().map(Into::into).collect())
}

/// The overrides of one key, by model.
pub async fn of_key(db: &Db, secret_id: Uuid) -> StorageResult<Vec<MemberModelOverride>> {
    Ok(row::Entity::find()
        .filter(row::Column::SecretId.eq(secret_id))
        .order_by_asc(row::Column::Model)
        .all(db)
        .await?
        .into_iter()
        .map(Into::into)
        .collect())
}

/// How many models of `owner`'s key `secret_id` have an override.
pub async fn count_of_key(db: &Db, owner: Uuid, secret_id: Uuid) -> StorageResult<u64> {
    Ok(row::Entity::find()
        .filter(row::Column::OwnerId.eq(owner))
        .filter(row::Column::SecretId.eq(secret_id))
        .count(db)
        .await?)
}

/// Writes one model's override for the owner's key (replacing the old one); a row of only
/// `NULL`s is deleted.
pub async fn put(db: &Db, new: MemberModelOverride) -> StorageResult<()> {
    let empty = new.stated.is_empty();
    // The old row goes and the new one comes in one transaction.
    let tx = crate::storage::begin_write(db).await?;
    row::Entity::delete_many()
        .filter(row::Column::OwnerId.eq(new.owner_id))
        .filter(row::Column::SecretId.eq(new.secret_id))
        .filter(row::Column::Model.eq(new.model.clone()))
        .exec(&tx)
        .await?;
    if empty {
        tx.commit().await?;
        return Ok(());
    }
    let mut active = row::ActiveModel {
        secret_id: Set(new.secret_id),
        model: Set(new.model),
        owner_id: Set(new.owner_id),
        updated_at: Set(Utc::now()),
        ..Default::default()
    };
    stated_columns!(set active, new.stated);
    active.insert(&tx).await?;
    tx.commit().await?;
    Ok(())
}
