//! Queries the search feeder and the result check run: messages in the order they changed, each
//! index's watermarks, the tombstones of deleted sessions and users, and which hits still exist
//! and whose they are.

use std::collections::{HashMap, HashSet};

use chrono::{DateTime, Utc};
use sea_orm::sea_query::OnConflict;
use sea_orm::{
    ColumnTrait, Condition, ConnectionTrait, EntityTrait, PaginatorTrait, QueryFilter, QueryOrder,
    QuerySelect, Set, TransactionTrait,
};
use uuid::Uuid;

use crate::model::search::ChangedMessage;
use crate::model::sessions::ChatSession;
use crate::storage::entities::{attachment, chat_session, index_state, message, search_tombstone};
use crate::storage::repos::workspaces::session_to_domain;
use crate::storage::{Db, StorageResult};

/// Stores how far an index has committed (or applied tombstones), under `name`.
pub async fn store_watermark(db: &Db, name: &str, at: DateTime<Utc>) -> StorageResult<()> {
    let row = index_state::ActiveModel { name: Set(name.into()), watermark: Set(at) };
    index_state::Entity::insert(row)
        .on_conflict(
            OnConflict::column(index_state::Column::Name)
                .update_column(index_state::Column::Watermark)
                .to_owned(),
        )
        .exec(db)
        .await?;
    Ok(())
}

/// The stored watermark under `name`.
pub async fn load_watermark(db: &Db, name: &str) -> StorageResult<Option<DateTime<Utc>>> {
    Ok(index_state::Entity::find_by_id(name.to_string()).one(db).await?.map(|r| r.watermark))
}

/// A batch of changed messages, with their sessions and which of them carry attachments.
#[derive(Default)]
pub struct Changed {
    /// The messages, in change order.
    pub messages: Vec<ChangedMessage>,
    /// Their sessions, by id.
    pub sessions: HashMap<Uuid, ChatSession>,
    /// The ids of those with attachments.
    pub with_files: HashSet<Uuid>,
}

/// Up to `limit` messages changed after `(at, id)`, in change order (three queries; one when
/// nothing changed).
pub async fn changed_after<C: ConnectionTrait>(
    db: &C,
    at: DateTime<Utc>,
    id: Uuid,
    limit: u64,
) -> StorageResult<Changed> {
    let messages = message::Entity::find()
        .filter(
            Condition::any()
                .add(message::Column::UpdatedAt.gt(at))
                .add(Condition::all().add(message::Column::UpdatedAt.eq(at)).add(message::Column::Id.gt(id))),
        )
        .order_by_asc(message::Column::UpdatedAt)
        .order_by_asc(message::Column::Id)
        .limit(limit)
        .all(db)
        .await?;
    // The idle server's poll: the two look-ups below would each run an empty `IN ()` query.
    if messages.is_empty() {
        return Ok(Changed::default());
    }
    let session_ids: HashSet<Uuid> = messages.iter().map(|m| m.session_id).collect();
    let sessions = chat_session::Entity::find()
        .filter(chat_session::Column::Id.is_in(session_ids))
        .all(db)
        .await?
        .into_iter()
        .map(|s| (s.id, session_to_domain(s)))
        .collect();
    let ids: Vec<Uuid> = messages.iter().map(|m| m.id).collect();
    let with_files = attachment::Entity::find()
        .select_only()
        .column(attachment::Column::MessageId)
        .filter(attachment::Column::MessageId.is_in(ids))
        .into_tuple::<Uuid>()
        .all(db)
        .await?
        .into_iter()
        .collect();
    let messages = messages
        .into_iter()
        .map(|m| ChangedMessage {
            id: m.id,
            session_id: m.session_id,
            role: m.role,
            status: m.status,
            parts: m.parts,
            created_at: m.created_at,
            updated_at: m.updated_at,
        })
        .collect();
    Ok(Changed { messages, sessions, with_files })
}

/// What one pass of the search feeder reads.
pub struct Pass {
    /// The messages changed after the message cursor.
    pub changed: Changed,
    /// The first tombstones after the tombstone cursor; `None` when the messages filled their
    /// batch (more are waiting, and the tombstones are read once they are caught up).
    pub tombstones: Option<Vec<Tombstone>>,
}

/// A feeder pass's reads, both on one connection (a read transaction): up to `limit` messages
/// changed after `message_from`, then, unless those fill their batch, the first
/// `tombstone_limit` tombstones after `tombstone_from`. Why one connection: sqlx hands a
/// connection back to the pool on a spawned task, so statements run one after another on the
/// pool each find the one before not back yet and open another, and the idle server, which
/// runs this once a second, kept two SQLite connections (BENCHMARKS, "Performance work",
/// step 24).
pub async fn read_pass(
    db: &Db,
    message_from: (DateTime<Utc>, Uuid),
    limit: u64,
    tombstone_from: (DateTime<Utc>, Uuid),
    tombstone_limit: u64,
) -> StorageResult<Pass> {
    let txn = db.begin().await?;
    let changed = changed_after(&txn, message_from.0, message_from.1, limit).await?;
    let tombstones = if (changed.messages.len() as u64) < limit {
        Some(tombstones_after(&txn, tombstone_from.0, tombstone_from.1, tombstone_limit).await?)
    } else {
        None
    };
    txn.commit().await?;
    Ok(Pass { changed, tombstones })
}

/// Of these messages, the ones that still exist, with their session ids.
pub async fn sessions_of_messages(db: &Db, ids: Vec<Uuid>) -> StorageResult<HashMap<Uuid, Uuid>> {
    Ok(message::Entity::find()
        .select_only()
        .column(message::Column::Id)
        .column(message::Column::SessionId)
        .filter(message::Column::Id.is_in(ids))
        .into_tuple::<(Uuid, Uuid)>()
        .all(db)
        .await?
        .into_iter()
        .collect())
}

/// Of these sessions, the ones `owner` owns or that lie in one of the workspaces shared with them, by id.
pub async fn visible_sessions(
    db: &Db,
    owner: Uuid,
    shared_workspaces: &[Uuid],
    ids: HashSet<Uuid>,
) -> StorageResult<HashMap<Uuid, ChatSession>> {
    use sea_orm::Condition;
    Ok(chat_session::Entity::find()
        .filter(chat_session::Column::Id.is_in(ids))
        .filter(
            Condition::any()
                .add(chat_session::Column::OwnerId.eq(owner))
                .add(chat_session::Column::WorkspaceId.is_in(shared_workspaces.iter().copied())),
        )
        .all(db)
        .await?
        .into_iter()
        .map(|s| (s.id, session_to_domain(s)))
        .collect())
}

/// How many messages there are.
pub async fn count_messages(db: &Db) -> StorageResult<u64> {
    Ok(message::Entity::find().count(db).await?)
}

/// A tombstone: every instance's index drops the documents of this session or user.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Tombstone {
    /// Its id (a v7 uuid: ties on `created_at` are ordered by it).
    pub id: Uuid,
    /// A deleted session.
    pub session_id: Option<Uuid>,
    /// A deleted user.
    pub user_id: Option<Uuid>,
    /// When it was written.
    pub created_at: DateTime<Utc>,
}

/// Writes a tombstone for a deleted session or user.
pub async fn add_tombstone(db: &Db, session_id: Option<Uuid>, user_id: Option<Uuid>) -> StorageResult<()> {
    let row = search_tombstone::ActiveModel {
        id: Set(Uuid::now_v7()),
        session_id: Set(session_id),
        user_id: Set(user_id),
        created_at: Set(Utc::now()),
    };
    search_tombstone::Entity::insert(row).exec_without_returning(db).await?;
    Ok(())
}

/// Up to `limit` tombstones written after `(at, id)`, oldest first.
pub async fn tombstones_after<C: ConnectionTrait>(
    db: &C,
    at: DateTime<Utc>,
    id: Uuid,
    limit: u64,
) -> StorageResult<Vec<Tombstone>> {
    Ok(search_tombstone::Entity::find()
        .filter(
            Condition::any().add(search_tombstone::Column::CreatedAt.gt(at)).add(
                Condition::all()
                    .add(search_tombstone::Column::CreatedAt.eq(at))
                    .add(search_tombstone::Column::Id.gt(id)),
            ),
        )
        .order_by_asc(search_tombstone::Column::CreatedAt)
        .order_by_asc(search_tombstone::Column::Id)
        .limit(limit)
        .all(db)
        .await?
        .into_iter()
        .map(|t| Tombstone {
            id: t.id,
            session_id: t.session_id,
            user_id: t.user_id,
            created_at: t.created_at,
        })
        .collect())
}

/// Deletes the tombstones written before `before`; returns how many.
pub async fn prune_tombstones(db: &Db, before: DateTime<Utc>) -> StorageResult<u64> {
    Ok(search_tombstone::Entity::delete_many()
        .filter(search_tombstone::Column::CreatedAt.lt(before))
        .exec(db)
        .await?
        .rows_affected)
}
