//! Queries over `model_overrides`.

use chrono::Utc;
use sea_orm::{ActiveModelTrait, ColumnTrait, EntityTrait, QueryFilter, Set};

use crate::model::providers::ModelOverride;
use crate::storage::entities::model_override;
use crate::storage::entities::stated_columns;
use crate::storage::{Db, StorageResult};

/// Every override.
pub async fn all(db: &Db) -> StorageResult<Vec<ModelOverride>> {
    Ok(model_override::Entity::find().all(db).await?.into_iter().map(Into::into).collect())
}

/// Writes one model's override (replacing the old one); a row of only `NULL`s is deleted.
pub async fn put(db: &Db, row: ModelOverride) -> StorageResult<()> {
    let empty = row.stated.is_empty();
    // The old row goes and the new one comes in one transaction.
    let tx = crate::storage::begin_write(db).await?;
    model_override::Entity::delete_many()
        .filter(model_override::Column::Provider.eq(row.provider.clone()))
        .filter(model_override::Column::Model.eq(row.model.clone()))
        .exec(&tx)
        .await?;
    if empty {
        tx.commit().await?;
        return Ok(());
    }
    let mut active = model_override::ActiveModel {
        provider: Set(row.provider),
        model: Set(row.model),
        updated_at: Set(Utc::now()),
        ..Default::default()
    };
    stated_columns!(set active, row.stated);
    active.insert(&tx).await?;
    tx.commit().await?;
    Ok(())
}
