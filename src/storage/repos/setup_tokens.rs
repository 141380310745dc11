//! Queries over `setup_tokens`.

use chrono::Utc;
use sea_orm::{ActiveModelTrait, ColumnTrait, ConnectionTrait, EntityTrait, QueryFilter, Set};
use uuid::Uuid;

use crate::storage::entities::setup_token;
use crate::storage::{Db, StorageResult};

/// Replaces any unused token with a new one (only the latest printed link works).
pub async fn replace(db: &Db, id_hash: &str) -> StorageResult<()> {
    setup_token::Entity::delete_many().filter(setup_token::Column::UsedAt.is_null()).exec(db).await?;
    setup_token::ActiveModel {
        id: Set(id_hash.to_string()),
        created_at: Set(Utc::now()),
        used_at: Set(None),
        used_by: Set(None),
    }
    .insert(db)
    .await?;
    Ok(())
}

/// Whether an unused token with this hash exists.
pub async fn is_open(db: &Db, id_hash: &str) -> StorageResult<bool> {
    Ok(setup_token::Entity::find_by_id(id_hash.to_string())
        .filter(setup_token::Column::UsedAt.is_null())
        .one(db)
        .await?
        .is_some())
}

/// Marks the token used by `user_id`; true only for the one caller that got it first.
pub async fn redeem<C: ConnectionTrait>(conn: &C, id_hash: &str, user_id: Uuid) -> StorageResult<bool> {
    let res = setup_token::Entity::update_many()
        .col_expr(setup_token::Column::UsedAt, sea_orm::sea_query::Expr::value(Utc::now()))
        .col_expr(setup_token::Column::UsedBy, sea_orm::sea_query::Expr::value(user_id))
        .filter(setup_token::Column::Id.eq(id_hash))
        .filter(setup_token::Column::UsedAt.is_null())
        .exec(conn)
        .await?;
    Ok(res.rows_affected == 1)
}
