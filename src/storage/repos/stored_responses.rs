//! Queries over `stored_responses`: a member's kept Responses API answers. Every lookup is by
//! owner and id, so another member's id is simply not found.

use chrono::{DateTime, Utc};
use sea_orm::{ActiveModelTrait, ColumnTrait, EntityTrait, QueryFilter, Set};
use uuid::Uuid;

use crate::model::records::StoredResponse;
use crate::storage::entities::stored_response;
use crate::storage::{Db, StorageResult};

/// A response to keep.
pub struct NewResponse<'a> {
    /// `resp_…`.
    pub id: &'a str,
    /// Its owner.
    pub user_id: Uuid,
    /// The response it continued.
    pub previous_id: Option<&'a str>,
    /// The system prompt it was answered under.
    pub system: Option<&'a str>,
    /// This turn's messages as JSON.
    pub turn: String,
    /// The response object as JSON.
    pub body: String,
}

/// Keeps a response.
pub async fn insert(db: &Db, row: NewResponse<'_>) -> StorageResult<()> {
    stored_response::ActiveModel {
        id: Set(row.id.to_string()),
        user_id: Set(row.user_id),
        previous_id: Set(row.previous_id.map(str::to_string)),
        system: Set(row.system.map(str::to_string)),
        turn: Set(row.turn),
        body: Set(row.body),
        created_at: Set(Utc::now()),
    }
    .insert(db)
    .await?;
    Ok(())
}

/// One of `user`'s responses, kept since `since` or later.
pub async fn find(
    db: &Db,
    user: Uuid,
    id: &str,
    since: DateTime<Utc>,
) -> StorageResult<Option<StoredResponse>> {
    Ok(stored_response::Entity::find_by_id(id.to_string())
        .filter(stored_response::Column::UserId.eq(user))
        .filter(stored_response::Column::CreatedAt.gte(since))
        .one(db)
        .await?
        .map(Into::into))
}

/// Deletes every response kept before `before`; how many.
pub async fn delete_older_than(db: &Db, before: DateTime<Utc>) -> StorageResult<u64> {
    let done = stored_response::Entity::delete_many()
        .filter(stored_response::Column::CreatedAt.lt(before))
        .exec(db)
        .await?;
    Ok(done.rows_affected)
}

/// Deletes one of `user`'s responses; whether it existed.
pub async fn delete(db: &Db, user: Uuid, id: &str) -> StorageResult<bool> {
    let done = stored_response::Entity::delete_many()
        .filter(stored_response::Column::UserId.eq(user))
        .filter(stored_response::Column::Id.eq(id))
        .exec(db)
        .await?;
    Ok(done.rows_affected > 0)
}
