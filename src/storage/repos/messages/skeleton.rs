//! The tree without its content: what a long session's page walks, cached per session.

use chrono::Utc;
use sea_orm::{ColumnTrait, EntityTrait, QueryFilter, QueryOrder};
use uuid::Uuid;

use crate::model::messages::{Message, MessageKind, MessageStatus, Role};
use crate::storage::entities::message;
use crate::storage::{Db, StorageError, StorageResult};

/// Every message of a session without its content, oldest first: ids, links, role, size and
/// usage, enough to walk the tree, count siblings and sum the path's tokens and the session's
/// usage at a fraction of the cost of [`super::session_messages`] on a long session. Status
/// reads complete, kind reads text and `created_at` only keeps the order (timestamps are the
/// costliest column to decode).
pub async fn session_skeleton(db: &Db, session_id: Uuid) -> StorageResult<Vec<Message>> {
    use sea_orm::QuerySelect;
    // Read by position into a tuple: by name (a `FromQueryResult` struct) it took twice as long.
    // id, parent, chosen child, role, size; tokens in, out and cached, cost, estimated.
    type Row = (
        Uuid,
        Option<Uuid>,
        Option<Uuid>,
        String,
        Option<i64>,
        Option<i64>,
        Option<i64>,
        Option<i64>,
        Option<i64>,
        bool,
    );
    let rows: Vec<Row> = message::Entity::find()
        .select_only()
        .columns([
            message::Column::Id,
            message::Column::ParentId,
            message::Column::ChosenChildId,
            message::Column::Role,
            message::Column::TokenCount,
            message::Column::TokensIn,
            message::Column::TokensOut,
            message::Column::TokensCached,
            message::Column::CostMicros,
            message::Column::UsageEstimated,
        ])
        .filter(message::Column::SessionId.eq(session_id))
        .order_by_asc(message::Column::CreatedAt)
        .order_by_asc(message::Column::Id)
        .into_tuple()
        .all(db)
        .await?;
    let epoch = chrono::DateTime::<Utc>::UNIX_EPOCH;
    rows.into_iter()
        .enumerate()
        .map(|(i, (id, parent_id, chosen_child_id, role, tokens, tin, tout, cached, cost, estimated))| {
            let role =
                Role::parse(&role).ok_or_else(|| StorageError::Corrupt(format!("message role {role:?}")))?;
            Ok(Message {
                id,
                session_id,
                parent_id,
                chosen_child_id,
                role,
                kind: MessageKind::Text,
                parts: Vec::new(),
                model: None,
                status: MessageStatus::Complete,
                error: None,
                usage: super::usage_of(tin, tout, cached, cost, estimated),
                tokens: tokens.and_then(|n| u64::try_from(n).ok()),
                client_id: None,
                author_id: None,
                created_at: epoch + chrono::Duration::microseconds(i64::try_from(i).unwrap_or(i64::MAX)),
            })
        })
        .collect()
}

/// Sessions shorter than this are read afresh each time; caching them gains nothing.
const SKELETON_CACHE_MIN: usize = 200;

/// How many long sessions' skeletons are kept.
const SKELETON_CACHE_SESSIONS: usize = 64;

type SkeletonCache = std::collections::HashMap<Uuid, (chrono::DateTime<Utc>, std::sync::Arc<Vec<Message>>)>;

/// Skeletons of recently shown long sessions, keyed by the session's `updated_at`: every write
/// that changes the tree or a message's size or usage (a turn, an answer and its end, a switch,
/// a deleted branch) touches it in the same transaction, so a matching version means an
/// unchanged skeleton, on any instance.
static SKELETONS: std::sync::LazyLock<std::sync::Mutex<SkeletonCache>> =
    std::sync::LazyLock::new(|| std::sync::Mutex::new(SkeletonCache::new()));

fn skeletons() -> std::sync::MutexGuard<'static, SkeletonCache> {
    SKELETONS.lock().unwrap_or_else(std::sync::PoisonError::into_inner)
}

/// [`session_skeleton`] for the session as of `version` (its `updated_at`), from the cache when
/// the tree has not changed since.
pub async fn session_skeleton_at(
    db: &Db,
    session_id: Uuid,
    version: chrono::DateTime<Utc>,
) -> StorageResult<std::sync::Arc<Vec<Message>>> {
    if let Some((cached_version, skeleton)) = skeletons().get(&session_id)
        && *cached_version == version
    {
        return Ok(skeleton.clone());
    }
    let fresh = std::sync::Arc::new(session_skeleton(db, session_id).await?);
    if fresh.len() >= SKELETON_CACHE_MIN {
        let mut cache = skeletons();
        if cache.len() >= SKELETON_CACHE_SESSIONS && !cache.contains_key(&session_id) {
            let evict = cache.iter().min_by_key(|(_, (v, _))| *v).map(|(id, _)| *id);
            if let Some(id) = evict {
                cache.remove(&id);
            }
        }
        cache.insert(session_id, (version, fresh.clone()));
    }
    Ok(fresh)
}
