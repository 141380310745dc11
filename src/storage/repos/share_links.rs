//! Queries over `share_links` and `share_link_blobs`.

use chrono::{DateTime, Utc};
use sea_orm::{
    ActiveModelTrait, ColumnTrait, EntityTrait, PaginatorTrait, QueryFilter, QueryOrder, QuerySelect, Set,
};
use uuid::Uuid;

use crate::model::teams::{ShareLink, SnapshotMessage};
use crate::storage::entities::{share_link, share_link_blob};
use crate::storage::{Db, StorageError, StorageResult};

fn to_link(m: &share_link::Model) -> ShareLink {
    ShareLink {
        id: m.id,
        session_id: m.session_id,
        title: m.title.clone(),
        message_count: u32::try_from(m.message_count).unwrap_or(0),
        public: m.public,
        expires_at: m.expires_at,
        created_by: m.created_by,
        created_at: m.created_at,
    }
}

/// A link to insert.
pub struct NewLink<'a> {
    /// SHA-256 hex of its token.
    pub token_hash: &'a str,
    /// The session it comes from.
    pub session_id: Uuid,
    /// Who makes it.
    pub created_by: Uuid,
    /// The session's title.
    pub title: &'a str,
    /// The messages, root first.
    pub snapshot: &'a [SnapshotMessage],
    /// Open without signing in.
    pub public: bool,
    /// When it stops opening.
    pub expires_at: Option<DateTime<Utc>>,
}

/// Inserts a link and the files it shows, in one transaction.
pub async fn insert(db: &Db, l: &NewLink<'_>) -> StorageResult<ShareLink> {
    let snapshot = serde_json::to_value(l.snapshot).map_err(|e| StorageError::Corrupt(e.to_string()))?;
    let txn = crate::storage::begin_write(db).await?;
    let row = share_link::ActiveModel {
        id: Set(Uuid::now_v7()),
        token_hash: Set(l.token_hash.to_string()),
        session_id: Set(l.session_id),
        created_by: Set(l.created_by),
        title: Set(l.title.chars().take(200).collect()),
        snapshot: Set(snapshot),
        message_count: Set(i32::try_from(l.snapshot.len()).unwrap_or(i32::MAX)),
        public: Set(l.public),
        expires_at: Set(l.expires_at),
        created_at: Set(Utc::now()),
    }
    .insert(&txn)
    .await?;
    let mut seen = std::collections::HashSet::new();
    for f in l.snapshot.iter().flat_map(|m| &m.files) {
        if !seen.insert(f.hash.clone()) {
            continue;
        }
        share_link_blob::ActiveModel {
            link_id: Set(row.id),
            hash: Set(f.hash.clone()),
            thumb_hash: Set(f.thumb.clone()),
        }
        .insert(&txn)
        .await?;
    }
    txn.commit().await?;
    Ok(to_link(&row))
}

/// The link with this token hash, with its snapshot.
pub async fn find_by_token_hash(
    db: &Db,
    token_hash: &str,
) -> StorageResult<Option<(ShareLink, Vec<SnapshotMessage>)>> {
    let Some(row) =
        share_link::Entity::find().filter(share_link::Column::TokenHash.eq(token_hash)).one(db).await?
    else {
        return Ok(None);
    };
    let snapshot: Vec<SnapshotMessage> = serde_json::from_value(row.snapshot.clone())
        .map_err(|e| StorageError::Corrupt(format!("snapshot of link {}: {e}", row.id)))?;
    Ok(Some((to_link(&row), snapshot)))
}

/// Links newest first: one person's, or (with `None`) everyone's; at most `limit`.
pub async fn list(db: &Db, created_by: Option<Uuid>, limit: u64) -> StorageResult<Vec<ShareLink>> {
    let mut q = share_link::Entity::find();
    if let Some(user) = created_by {
        q = q.filter(share_link::Column::CreatedBy.eq(user));
    }
    Ok(q.order_by_desc(share_link::Column::CreatedAt)
        .limit(limit)
        .all(db)
        .await?
        .iter()
        .map(to_link)
        .collect())
}

/// How many links a person has made.
pub async fn count_by(db: &Db, created_by: Uuid) -> StorageResult<u64> {
    Ok(share_link::Entity::find().filter(share_link::Column::CreatedBy.eq(created_by)).count(db).await?)
}

/// Deletes a link (only its creator's, when `created_by` is given); true when there was one.
pub async fn delete(db: &Db, id: Uuid, created_by: Option<Uuid>) -> StorageResult<bool> {
    let mut q = share_link::Entity::delete_many().filter(share_link::Column::Id.eq(id));
    if let Some(user) = created_by {
        q = q.filter(share_link::Column::CreatedBy.eq(user));
    }
    Ok(q.exec(db).await?.rows_affected == 1)
}
