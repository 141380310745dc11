//! Queries over `session_files`, always by session (the caller has checked it is the actor's).

use chrono::{DateTime, Utc};
use sea_orm::sea_query::OnConflict;
use sea_orm::{ColumnTrait, EntityTrait, QueryFilter, QueryOrder, Set};
use uuid::Uuid;

use crate::storage::entities::session_file;
use crate::storage::{Db, StorageResult};

/// The session's pinned and dropped files: (path, state, when chosen), by path.
pub async fn list(db: &Db, session_id: Uuid) -> StorageResult<Vec<(String, String, DateTime<Utc>)>> {
    Ok(session_file::Entity::find()
        .filter(session_file::Column::SessionId.eq(session_id))
        .order_by_asc(session_file::Column::Path)
        .all(db)
        .await?
        .into_iter()
        .map(|f| (f.path, f.state, f.updated_at))
        .collect())
}

/// Records `state` for the file (one statement), or forgets the choice when `state` is none.
pub async fn set(db: &Db, session_id: Uuid, path: &str, state: Option<&str>) -> StorageResult<()> {
    let Some(state) = state else {
        session_file::Entity::delete_many()
            .filter(session_file::Column::SessionId.eq(session_id))
            .filter(session_file::Column::Path.eq(path))
            .exec(db)
            .await?;
        return Ok(());
    };
    let row = session_file::ActiveModel {
        session_id: Set(session_id),
        path: Set(path.to_string()),
        state: Set(state.to_string()),
        updated_at: Set(Utc::now()),
    };
    session_file::Entity::insert(row)
        .on_conflict(
            OnConflict::columns([session_file::Column::SessionId, session_file::Column::Path])
                .update_columns([session_file::Column::State, session_file::Column::UpdatedAt])
                .to_owned(),
        )
        .exec(db)
        .await?;
    Ok(())
}
