//! The tree without its content: what a long session's page walks, cached per session.

use chrono::Utc;
use sea_orm::{ColumnTrait, EntityTrait, QueryFilter, QueryOrder};
use uuid::Uuid;

use crate::model::messages::{Message, MessageKind, MessageStatus, Role};
use crate::model::sessions::ChatSession;
use crate::storage::entities::{chat_session, message};
use crate::storage::repos::workspaces::session_to_domain;
use crate::storage::{Db, StorageError, StorageResult};

/// Every message of a session without its content, oldest first: ids, links, role, size and
/// usage, enough to walk the tree, count siblings and sum the path's tokens and the session's
/// usage at a fraction of the cost of [`super::session_messages`] on a long session. Status
/// reads complete, kind reads text and `created_at` only keeps the order (timestamps are the
/// costliest column to decode).
pub async fn session_skeleton(db: &Db, session_id: Uuid) -> StorageResult<Vec<Message>> {
    use sea_orm::QuerySelect;
    let rows: Vec<SkeletonRow> = message::Entity::find()
        .select_only()
        .columns(SKELETON_COLUMNS)
        .filter(message::Column::SessionId.eq(session_id))
        .order_by_asc(message::Column::CreatedAt)
        .order_by_asc(message::Column::Id)
        .into_tuple()
        .all(db)
        .await?;
    rows.into_iter().enumerate().map(|(i, row)| skeleton_message(session_id, i, row)).collect()
}

/// A skeleton row, read by position into a tuple (by name, a `FromQueryResult` struct, it took
/// twice as long): id, parent, chosen child, role, size; tokens in, out and cached, cost,
/// estimated.
type SkeletonRow = (
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

const SKELETON_COLUMNS: [message::Column; 10] = [
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
];

/// The `i`-th message of the skeleton (its place stands in for its creation time).
fn skeleton_message(session_id: Uuid, i: usize, row: SkeletonRow) -> StorageResult<Message> {
    let (id, parent_id, chosen_child_id, role, tokens, tin, tout, cached, cost, estimated) = row;
    let role = Role::parse(&role).ok_or_else(|| StorageError::Corrupt(format!("message role {role:?}")))?;
    let epoch = chrono::DateTime::<Utc>::UNIX_EPOCH;
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
}

/// The columns a skeleton leaves out, in the order [`session_skeleton_with`] reads them after the
/// skeleton's.
const WHOLE_COLUMNS: [message::Column; 8] = [
    message::Column::Kind,
    message::Column::Parts,
    message::Column::Model,
    message::Column::Status,
    message::Column::Error,
    message::Column::ClientId,
    message::Column::AuthorId,
    message::Column::CreatedAt,
];

/// The session, its skeleton and one message of it whole (`whole`), in one statement: what a
/// finished message's page reads, right after the answer's end moved the session's version (a
/// kept skeleton is stale then). The other rows carry NULL in the columns a skeleton leaves out;
/// the session's columns come on `whole`'s row only (a join on it), so `None` when the session
/// does not hold that message. The skeleton is kept as of the version read with it.
pub async fn session_skeleton_with(
    db: &Db,
    session_id: Uuid,
    whole: Uuid,
) -> StorageResult<Option<(ChatSession, std::sync::Arc<Vec<Message>>, Message)>> {
    use sea_orm::sea_query::{Alias, Expr, ExprTrait, JoinType};
    use sea_orm::{ConnectionTrait, FromQueryResult, Iterable, QuerySelect, QueryTrait};
    let mut select = message::Entity::find().select_only().columns(SKELETON_COLUMNS);
    for column in WHOLE_COLUMNS {
        // Named with their table: the session has a `model` and a `created_at` too.
        select = select.expr(Expr::case(message::Column::Id.eq(whole), Expr::col((message::Entity, column))));
    }
    let mut select = select
        .filter(message::Column::SessionId.eq(session_id))
        .order_by_asc(message::Column::CreatedAt)
        .order_by_asc(message::Column::Id);
    let query = QueryTrait::query(&mut select);
    query.join(
        JoinType::LeftJoin,
        chat_session::Entity,
        Expr::col((chat_session::Entity, chat_session::Column::Id))
            .equals((message::Entity, message::Column::SessionId))
            .and(Expr::col((message::Entity, message::Column::Id)).eq(whole)),
    );
    for column in chat_session::Column::iter() {
        let name = format!("{SESSION_PREFIX}{}", sea_orm::sea_query::Iden::unquoted(&column));
        query.expr_as(Expr::col((chat_session::Entity, column)), Alias::new(name));
    }
    let rows = db.query_all_raw(select.build(db.get_database_backend())).await?;
    let mut skeleton = Vec::with_capacity(rows.len());
    let mut found = None;
    for (i, row) in rows.iter().enumerate() {
        let message = skeleton_message(session_id, i, row.try_get_many_by_index::<SkeletonRow>()?)?;
        if message.id == whole {
            let session = chat_session::Model::from_query_result(row, SESSION_PREFIX)?;
            found = Some((session_to_domain(session), whole_message(&message, row)?));
        }
        skeleton.push(message);
    }
    let Some((session, message)) = found else { return Ok(None) };
    let skeleton = std::sync::Arc::new(skeleton);
    keep(session_id, session.updated_at, &skeleton);
    Ok(Some((session, skeleton, message)))
}

/// What the session's columns are called in [`session_skeleton_with`]'s rows (`session__id`, not
/// a name a message's column has, such as `session_id`).
const SESSION_PREFIX: &str = "session__";

/// The message of a skeleton row read with [`WHOLE_COLUMNS`] after the skeleton's.
fn whole_message(skeleton: &Message, row: &sea_orm::QueryResult) -> StorageResult<Message> {
    let at = SKELETON_COLUMNS.len();
    let text = |i: usize| row.try_get_by_index::<Option<String>>(at + i);
    let required = |i: usize, what: &str| {
        text(i)?.ok_or_else(|| StorageError::Corrupt(format!("message {} has no {what}", skeleton.id)))
    };
    let kind = required(0, "kind")?;
    let status = required(3, "status")?;
    let parts = row.try_get_by_index::<Option<serde_json::Value>>(at + 1)?.unwrap_or_default();
    let created_at = row.try_get_by_index::<Option<chrono::DateTime<Utc>>>(at + 7)?;
    Ok(Message {
        kind: MessageKind::parse(&kind)
            .ok_or_else(|| StorageError::Corrupt(format!("message kind {kind:?}")))?,
        parts: serde_json::from_value(parts)
            .map_err(|e| StorageError::Corrupt(format!("parts of message {}: {e}", skeleton.id)))?,
        model: text(2)?,
        status: MessageStatus::parse(&status)
            .ok_or_else(|| StorageError::Corrupt(format!("message status {status:?}")))?,
        error: text(4)?,
        client_id: text(5)?,
        author_id: row.try_get_by_index::<Option<Uuid>>(at + 6)?,
        created_at: created_at
            .ok_or_else(|| StorageError::Corrupt(format!("message {} has no time", skeleton.id)))?,
        ..skeleton.clone()
    })
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

/// The cached skeleton of the session as of `version`, if it is kept.
fn cached(session_id: Uuid, version: chrono::DateTime<Utc>) -> Option<std::sync::Arc<Vec<Message>>> {
    skeletons()
        .get(&session_id)
        .filter(|(cached, _)| *cached == version)
        .map(|(_, skeleton)| skeleton.clone())
}

/// Keeps a long session's skeleton as of `version` (a short one is read afresh).
fn keep(session_id: Uuid, version: chrono::DateTime<Utc>, skeleton: &std::sync::Arc<Vec<Message>>) {
    if skeleton.len() < SKELETON_CACHE_MIN {
        return;
    }
    let mut cache = skeletons();
    if cache.len() >= SKELETON_CACHE_SESSIONS && !cache.contains_key(&session_id) {
        let evict = cache.iter().min_by_key(|(_, (v, _))| *v).map(|(id, _)| *id);
        if let Some(id) = evict {
            cache.remove(&id);
        }
    }
    cache.insert(session_id, (version, skeleton.clone()));
}

/// [`session_skeleton`] for the session as of `version` (its `updated_at`), from the cache when
/// the tree has not changed since.
pub async fn session_skeleton_at(
    db: &Db,
    session_id: Uuid,
    version: chrono::DateTime<Utc>,
) -> StorageResult<std::sync::Arc<Vec<Message>>> {
    if let Some(skeleton) = cached(session_id, version) {
        return Ok(skeleton);
    }
    let fresh = std::sync::Arc::new(session_skeleton(db, session_id).await?);
    keep(session_id, version, &fresh);
    Ok(fresh)
}
