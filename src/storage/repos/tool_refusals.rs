//! Queries over `tool_refusals`.

use chrono::Utc;
use sea_orm::{EntityTrait, Set};

use crate::storage::entities::tool_refusal;
use crate::storage::{Db, StorageResult};

/// Every remembered refusal's `provider/model`.
pub async fn all(db: &Db) -> StorageResult<Vec<String>> {
    Ok(tool_refusal::Entity::find().all(db).await?.into_iter().map(|r| r.reference).collect())
}

/// Remembers that `reference` refused tools (once; a second refusal changes nothing).
pub async fn remember(db: &Db, reference: &str) -> StorageResult<()> {
    let row =
        tool_refusal::ActiveModel { reference: Set(reference.to_string()), refused_at: Set(Utc::now()) };
    tool_refusal::Entity::insert(row)
        .on_conflict_do_nothing_on([tool_refusal::Column::Reference])
        .exec(db)
        .await?;
    Ok(())
}

/// Forgets every refusal (an admin asks the providers again).
pub async fn forget_all(db: &Db) -> StorageResult<()> {
    tool_refusal::Entity::delete_many().exec(db).await?;
    Ok(())
}
