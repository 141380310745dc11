//! Queries over `messages`, `runs` and `usage`: the tree and the runs that grow it.
//!
//! Callers pass a session they already checked belongs to the actor; every statement here is
//! additionally pinned to that session id.

use chrono::Utc;
use sea_orm::sea_query::Expr;
use sea_orm::{ColumnTrait, ConnectionTrait, EntityTrait, QueryFilter, QueryOrder, QuerySelect, Set};
use uuid::Uuid;

use crate::model::messages::{Message, MessageKind, MessageStatus, MessageUsage, Role};
use crate::providers::tokens::count_parts;
use crate::providers::types::Part;
use crate::storage::entities::{attachment, chat_session, message, run, usage};
use crate::storage::script::Script;
use crate::storage::{Db, StorageError, StorageResult};

mod boundaries;
mod copies;
mod run_records;
mod skeleton;
mod turns;
pub use boundaries::*;
pub use copies::*;
pub use run_records::*;
pub use skeleton::*;
pub use turns::*;

pub(crate) fn to_i64(n: u64) -> i64 {
    i64::try_from(n).unwrap_or(i64::MAX)
}

fn to_u64(n: Option<i64>) -> u64 {
    n.and_then(|n| u64::try_from(n).ok()).unwrap_or(0)
}

/// A message's usage from its columns: none unless a token count was recorded.
fn usage_of(
    tokens_in: Option<i64>,
    tokens_out: Option<i64>,
    cached: Option<i64>,
    cost_micros: Option<i64>,
    estimated: bool,
) -> Option<MessageUsage> {
    (tokens_in.is_some() || tokens_out.is_some()).then(|| MessageUsage {
        input: to_u64(tokens_in),
        output: to_u64(tokens_out),
        cached: to_u64(cached),
        cost_micros,
        estimated,
    })
}

fn to_domain(m: message::Model) -> StorageResult<Message> {
    let role =
        Role::parse(&m.role).ok_or_else(|| StorageError::Corrupt(format!("message role {:?}", m.role)))?;
    let status = MessageStatus::parse(&m.status)
        .ok_or_else(|| StorageError::Corrupt(format!("message status {:?}", m.status)))?;
    let kind = MessageKind::parse(&m.kind)
        .ok_or_else(|| StorageError::Corrupt(format!("message kind {:?}", m.kind)))?;
    let parts: Vec<Part> = serde_json::from_value(m.parts)
        .map_err(|e| StorageError::Corrupt(format!("parts of message {}: {e}", m.id)))?;
    let usage = usage_of(m.tokens_in, m.tokens_out, m.tokens_cached, m.cost_micros, m.usage_estimated);
    Ok(Message {
        id: m.id,
        session_id: m.session_id,
        parent_id: m.parent_id,
        chosen_child_id: m.chosen_child_id,
        role,
        kind,
        parts,
        model: m.model,
        status,
        error: m.error,
        usage,
        tokens: m.token_count.and_then(|n| u64::try_from(n).ok()),
        client_id: m.client_id,
        author_id: m.author_id,
        created_at: m.created_at,
    })
}

pub(crate) fn parts_json(parts: &[Part]) -> serde_json::Value {
    serde_json::to_value(parts).unwrap_or_else(|_| serde_json::json!([]))
}

/// The select of every message of a session, oldest first.
fn all_of_session(session_id: Uuid) -> sea_orm::Select<message::Entity> {
    message::Entity::find()
        .filter(message::Column::SessionId.eq(session_id))
        .order_by_asc(message::Column::CreatedAt)
        .order_by_asc(message::Column::Id)
}

/// Every message of a session, oldest first, and in the same statement whether any message of
/// it has a file attached (false for a session without messages).
pub async fn session_messages_and_files(db: &Db, session_id: Uuid) -> StorageResult<(Vec<Message>, bool)> {
    use sea_orm::sea_query::{Query, SimpleExpr};
    use sea_orm::{FromQueryResult, QueryTrait};
    let has_files: SimpleExpr = Expr::case(
        Expr::exists(
            Query::select()
                .expr(Expr::val(1))
                .from(attachment::Entity)
                .and_where(attachment::Column::SessionId.eq(session_id))
                .to_owned(),
        ),
        1,
    )
    .finally(0)
    .into();
    let statement =
        all_of_session(session_id).expr_as(has_files, "has_files").build(db.get_database_backend());
    let rows = db.query_all_raw(statement).await?;
    let has_files = match rows.first() {
        Some(row) => row.try_get::<i32>("", "has_files")? != 0,
        None => false,
    };
    let messages = rows
        .iter()
        .map(|row| message::Model::from_query_result(row, "").map_err(StorageError::from).and_then(to_domain))
        .collect::<StorageResult<Vec<_>>>()?;
    Ok((messages, has_files))
}

/// Every message of a session, oldest first.
pub async fn session_messages(db: &Db, session_id: Uuid) -> StorageResult<Vec<Message>> {
    all_of_session(session_id).all(db).await?.into_iter().map(to_domain).collect()
}

/// These messages of a session, whole, in the order of `ids`.
pub async fn messages_by_ids(db: &Db, session_id: Uuid, ids: &[Uuid]) -> StorageResult<Vec<Message>> {
    let mut found = std::collections::HashMap::with_capacity(ids.len());
    for chunk in ids.chunks(500) {
        for m in message::Entity::find()
            .filter(message::Column::SessionId.eq(session_id))
            .filter(message::Column::Id.is_in(chunk.iter().copied()))
            .all(db)
            .await?
        {
            found.insert(m.id, m);
        }
    }
    ids.iter().filter_map(|id| found.remove(id)).map(to_domain).collect()
}

/// One message of a session.
pub async fn find_message(db: &Db, session_id: Uuid, id: Uuid) -> StorageResult<Option<Message>> {
    message::Entity::find_by_id(id)
        .filter(message::Column::SessionId.eq(session_id))
        .one(db)
        .await?
        .map(to_domain)
        .transpose()
}

/// Whether the session holds this message (its id only is read).
pub async fn holds_message(db: &Db, session_id: Uuid, id: Uuid) -> StorageResult<bool> {
    let found: Option<Uuid> = message::Entity::find_by_id(id)
        .filter(message::Column::SessionId.eq(session_id))
        .select_only()
        .column(message::Column::Id)
        .into_tuple()
        .one(db)
        .await?;
    Ok(found.is_some())
}

/// The user message a composer submit with this client id created, if any.
pub async fn find_by_client_id(db: &Db, session_id: Uuid, client_id: &str) -> StorageResult<Option<Message>> {
    message::Entity::find()
        .filter(message::Column::SessionId.eq(session_id))
        .filter(message::Column::ClientId.eq(client_id))
        .one(db)
        .await?
        .map(to_domain)
        .transpose()
}

/// A new message to insert.
pub struct NewMessage<'a> {
    /// Id chosen by the caller.
    pub id: Uuid,
    /// Parent (none for a root).
    pub parent_id: Option<Uuid>,
    /// Speaker.
    pub role: Role,
    /// Content.
    pub parts: &'a [Part],
    /// `provider/model` for assistant messages.
    pub model: Option<&'a str>,
    /// Initial status.
    pub status: MessageStatus,
    /// The composer's id, for user messages.
    pub client_id: Option<&'a str>,
    /// Who wrote it: the person who asked, or who started the run that answers.
    pub author_id: Option<Uuid>,
}

pub(crate) async fn insert_message<C: ConnectionTrait>(
    db: &C,
    session_id: Uuid,
    m: &NewMessage<'_>,
    at: chrono::DateTime<Utc>,
) -> StorageResult<()> {
    insert_kind(db, session_id, m, kind_of(m), at).await
}

fn kind_of(m: &NewMessage<'_>) -> MessageKind {
    if m.role == Role::Tool { MessageKind::ToolResult } else { MessageKind::Text }
}

async fn insert_kind<C: ConnectionTrait>(
    db: &C,
    session_id: Uuid,
    m: &NewMessage<'_>,
    kind: MessageKind,
    at: chrono::DateTime<Utc>,
) -> StorageResult<()> {
    let mut script = Script::new(db);
    insert_kind_into(&mut script, session_id, m, kind, at);
    script.run(db).await
}

/// [`insert_kind`] as a statement of a script.
fn insert_kind_into(
    script: &mut Script,
    session_id: Uuid,
    m: &NewMessage<'_>,
    kind: MessageKind,
    at: chrono::DateTime<Utc>,
) {
    script.push(message::Entity::insert(message_row(session_id, m, kind, at)));
}

/// The row of a new message, not chosen below yet.
fn message_row(
    session_id: Uuid,
    m: &NewMessage<'_>,
    kind: MessageKind,
    at: chrono::DateTime<Utc>,
) -> message::ActiveModel {
    message::ActiveModel {
        id: Set(m.id),
        session_id: Set(session_id),
        parent_id: Set(m.parent_id),
        chosen_child_id: Set(None),
        role: Set(m.role.as_str().into()),
        kind: Set(kind.as_str().into()),
        parts: Set(parts_json(m.parts)),
        model: Set(m.model.map(str::to_string)),
        provider: Set(m.model.and_then(|r| r.split_once('/')).map(|(p, _)| p.to_string())),
        tokens_in: Set(None),
        tokens_out: Set(None),
        tokens_cached: Set(None),
        cost_micros: Set(None),
        status: Set(m.status.as_str().into()),
        client_id: Set(m.client_id.map(str::to_string)),
        error: Set(None),
        usage_estimated: Set(false),
        author_id: Set(m.author_id),
        // Counted once, when written whole; an answer is counted when it ends.
        token_count: Set((m.status != MessageStatus::Streaming).then(|| to_i64(count_parts(m.parts)))),
        created_at: Set(at),
        updated_at: Set(at),
    }
}

/// Makes `child` the chosen child of `parent`, or the session's active root when `parent` is none.
pub(crate) async fn choose<C: ConnectionTrait>(
    db: &C,
    session_id: Uuid,
    parent: Option<Uuid>,
    child: Uuid,
) -> StorageResult<()> {
    let mut script = Script::new(db);
    choose_into(&mut script, session_id, parent, child);
    script.run(db).await
}

/// [`choose`] as a statement of a script.
pub(crate) fn choose_into(script: &mut Script, session_id: Uuid, parent: Option<Uuid>, child: Uuid) {
    match parent {
        Some(parent) => script.push(
            message::Entity::update_many()
                .col_expr(message::Column::ChosenChildId, Expr::value(child))
                .filter(message::Column::Id.eq(parent))
                .filter(message::Column::SessionId.eq(session_id)),
        ),
        None => script.push(
            chat_session::Entity::update_many()
                .col_expr(chat_session::Column::ActiveRootId, Expr::value(child))
                .filter(chat_session::Column::Id.eq(session_id)),
        ),
    };
}

/// Ids of a message's children, oldest first.
pub async fn children_of(db: &Db, session_id: Uuid, parent: Uuid) -> StorageResult<Vec<Uuid>> {
    Ok(message::Entity::find()
        .filter(message::Column::SessionId.eq(session_id))
        .filter(message::Column::ParentId.eq(parent))
        .order_by_asc(message::Column::CreatedAt)
        .all(db)
        .await?
        .into_iter()
        .map(|m| m.id)
        .collect())
}

/// The children of several messages of a session as (parent, child) pairs, each parent's
/// oldest first.
pub async fn children_of_many(
    db: &Db,
    session_id: Uuid,
    parents: &[Uuid],
) -> StorageResult<Vec<(Uuid, Uuid)>> {
    let mut out = Vec::new();
    for chunk in parents.chunks(500) {
        let rows: Vec<(Uuid, Option<Uuid>)> = message::Entity::find()
            .select_only()
            .column(message::Column::Id)
            .column(message::Column::ParentId)
            .filter(message::Column::SessionId.eq(session_id))
            .filter(message::Column::ParentId.is_in(chunk.iter().copied()))
            .order_by_asc(message::Column::CreatedAt)
            .into_tuple()
            .all(db)
            .await?;
        out.extend(rows.into_iter().filter_map(|(id, parent)| parent.map(|p| (p, id))));
    }
    Ok(out)
}

/// Inserts a finished message under its parent without choosing it (a side branch).
pub async fn insert_detached(db: &Db, session_id: Uuid, m: &NewMessage<'_>) -> StorageResult<()> {
    insert_message(db, session_id, m, Utc::now()).await
}

/// Inserts a finished message and makes it its parent's chosen child. One transaction.
pub async fn insert_chosen(db: &Db, session_id: Uuid, m: &NewMessage<'_>) -> StorageResult<()> {
    let txn = crate::storage::begin_write(db).await?;
    insert_message(&txn, session_id, m, Utc::now()).await?;
    choose(&txn, session_id, m.parent_id, m.id).await?;
    txn.commit().await?;
    Ok(())
}

/// Makes `path` (root first) the session's active path: the root becomes the active root and
/// every message on it chooses the next one. One transaction.
pub async fn select_path(db: &Db, session_id: Uuid, path: &[Uuid]) -> StorageResult<()> {
    select(db, session_id, path, false).await
}

/// Like [`select_path`], and the path ends at its last message: that message chooses itself,
/// which the tree reads as "nothing below is on the path" until a new child is chosen.
pub async fn select_path_ending(db: &Db, session_id: Uuid, path: &[Uuid]) -> StorageResult<()> {
    select(db, session_id, path, true).await
}

async fn select(db: &Db, session_id: Uuid, path: &[Uuid], end_here: bool) -> StorageResult<()> {
    let Some(root) = path.first() else { return Ok(()) };
    let txn = crate::storage::begin_write(db).await?;
    choose(&txn, session_id, None, *root).await?;
    for pair in path.windows(2) {
        choose(&txn, session_id, Some(pair[0]), pair[1]).await?;
    }
    if let (true, Some(last)) = (end_here, path.last()) {
        choose(&txn, session_id, Some(*last), *last).await?;
    }
    touch_session(&txn, session_id, None).await?;
    txn.commit().await?;
    Ok(())
}

/// Deletes these messages of the session (a whole branch), then points `parent` (or the
/// session, for a root) at `next_choice`. Links are cut first so that no cascade has to recurse
/// down a long chain (SQLite caps trigger depth). One transaction.
pub async fn delete_branch(
    db: &Db,
    session_id: Uuid,
    ids: &[Uuid],
    parent: Option<Uuid>,
    next_choice: Option<Uuid>,
) -> StorageResult<u64> {
    let txn = crate::storage::begin_write(db).await?;
    let mut deleted = 0;
    for chunk in ids.chunks(500) {
        message::Entity::update_many()
            .col_expr(message::Column::ParentId, Expr::value(Option::<Uuid>::None))
            .col_expr(message::Column::ChosenChildId, Expr::value(Option::<Uuid>::None))
            .filter(message::Column::SessionId.eq(session_id))
            .filter(message::Column::Id.is_in(chunk.iter().copied()))
            .exec(&txn)
            .await?;
    }
    for chunk in ids.chunks(500) {
        deleted += message::Entity::delete_many()
            .filter(message::Column::SessionId.eq(session_id))
            .filter(message::Column::Id.is_in(chunk.iter().copied()))
            .exec(&txn)
            .await?
            .rows_affected;
    }
    match (parent, next_choice) {
        (_, Some(child)) => choose(&txn, session_id, parent, child).await?,
        (None, None) => {
            chat_session::Entity::update_many()
                .col_expr(chat_session::Column::ActiveRootId, Expr::value(Option::<Uuid>::None))
                .filter(chat_session::Column::Id.eq(session_id))
                .exec(&txn)
                .await?;
        }
        // The parent's choice was cleared with the links.
        (Some(_), None) => {}
    }
    touch_session(&txn, session_id, None).await?;
    txn.commit().await?;
    Ok(deleted)
}

/// Cuts every link between the session's messages, so deleting the session (or its
/// workspace) cascades one level deep instead of down each chain.
pub async fn unlink_session_messages<C: ConnectionTrait>(db: &C, session_id: Uuid) -> StorageResult<()> {
    message::Entity::update_many()
        .col_expr(message::Column::ParentId, Expr::value(Option::<Uuid>::None))
        .col_expr(message::Column::ChosenChildId, Expr::value(Option::<Uuid>::None))
        .filter(message::Column::SessionId.eq(session_id))
        .exec(db)
        .await?;
    Ok(())
}
