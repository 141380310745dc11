//! Queries over `api_tokens` (stored as hashes only).

use chrono::{DateTime, Utc};
use sea_orm::sea_query::Expr;
use sea_orm::{
    ActiveModelTrait, ColumnTrait, EntityTrait, JoinType, QueryFilter, QueryOrder, QuerySelect, RelationDef,
    Set,
};
use uuid::Uuid;

use crate::model::accounts::TokenRecord;
use crate::model::accounts::User;
use crate::storage::changes::{self, Kept};
use crate::storage::entities::{api_token, user};
use crate::storage::{Db, StorageResult};

/// A user's tokens, newest first.
pub async fn list_for_user(db: &Db, user: Uuid) -> StorageResult<Vec<TokenRecord>> {
    Ok(api_token::Entity::find()
        .filter(api_token::Column::UserId.eq(user))
        .order_by_desc(api_token::Column::CreatedAt)
        .all(db)
        .await?
        .into_iter()
        .map(Into::into)
        .collect())
}

/// Stores a new token's hash and description.
pub async fn insert(db: &Db, record: TokenRecord) -> StorageResult<TokenRecord> {
    let row: api_token::ActiveModel = record.into();
    Ok(api_token::Entity::insert(row).exec_with_returning(db).await?.into())
}

/// One of a user's tokens.
pub async fn find_owned(db: &Db, user: Uuid, id: Uuid) -> StorageResult<Option<TokenRecord>> {
    Ok(api_token::Entity::find_by_id(id)
        .filter(api_token::Column::UserId.eq(user))
        .one(db)
        .await?
        .map(Into::into))
}

/// Marks a token revoked.
pub async fn revoke(db: &Db, id: Uuid, at: DateTime<Utc>) -> StorageResult<()> {
    let row = api_token::ActiveModel { id: Set(id), revoked_at: Set(Some(at)), ..Default::default() };
    row.update(db).await?;
    changes::changed(Kept::Accounts);
    Ok(())
}

/// A token found by its hash, with its user, in one query (this runs before every API call).
pub async fn find_with_user(db: &Db, hash: &str) -> StorageResult<Option<(TokenRecord, User)>> {
    let owner: RelationDef = api_token::Entity::belongs_to(user::Entity)
        .from(api_token::Column::UserId)
        .to(user::Column::Id)
        .into();
    let found = api_token::Entity::find()
        .filter(api_token::Column::TokenHash.eq(hash))
        .join(JoinType::InnerJoin, owner)
        .select_also(user::Entity)
        .one(db)
        .await?;
    match found {
        Some((token, Some(row))) => Ok(Some((token.into(), crate::storage::repos::users::to_domain(row)?))),
        _ => Ok(None),
    }
}

/// Records a use of a token.
pub async fn touch(db: &Db, id: Uuid, at: DateTime<Utc>) -> StorageResult<()> {
    api_token::Entity::update_many()
        .col_expr(api_token::Column::LastUsedAt, Expr::value(at))
        .filter(api_token::Column::Id.eq(id))
        .exec(db)
        .await?;
    Ok(())
}

/// Revokes a user's live tokens of this scope; how many.
pub async fn revoke_scope(db: &Db, user: Uuid, scope: &str, at: DateTime<Utc>) -> StorageResult<u64> {
    let done = api_token::Entity::update_many()
        .col_expr(api_token::Column::RevokedAt, Expr::value(at))
        .filter(api_token::Column::UserId.eq(user))
        .filter(api_token::Column::Scope.eq(scope))
        .filter(api_token::Column::RevokedAt.is_null())
        .exec(db)
        .await?;
    let done = done.rows_affected;
    changes::changed(Kept::Accounts);
    Ok(done)
}

/// Revokes every live token of a user (their account was deactivated); how many.
pub async fn revoke_all(db: &Db, user: Uuid, at: DateTime<Utc>) -> StorageResult<u64> {
    let done = api_token::Entity::update_many()
        .col_expr(api_token::Column::RevokedAt, Expr::value(at))
        .filter(api_token::Column::UserId.eq(user))
        .filter(api_token::Column::RevokedAt.is_null())
        .exec(db)
        .await?;
    let done = done.rows_affected;
    changes::changed(Kept::Accounts);
    Ok(done)
}
