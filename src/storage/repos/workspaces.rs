//! Queries over `workspaces` and the `sessions` in them, always filtered by owner.

use chrono::Utc;
use sea_orm::sea_query::Expr;
use sea_orm::{
    ActiveModelTrait, ColumnTrait, EntityTrait, PaginatorTrait, QueryFilter, QueryOrder, QuerySelect, Set,
};
use uuid::Uuid;

use crate::model::sessions::{ChatSession, Workspace};
use crate::storage::changes::{self, Kept};
use crate::storage::entities::{chat_session, workspace};
use crate::storage::{Db, StorageResult};

pub(in crate::storage) fn workspace_to_domain(m: workspace::Model) -> Workspace {
    Workspace {
        id: m.id,
        owner_id: m.owner_id,
        name: m.name,
        system_prompt: m.system_prompt,
        default_model: m.default_model,
        approval_mode: m.approval_mode,
        infer_titles: m.infer_titles,
        compact_at_percent: m.compact_at_percent.and_then(|p| u8::try_from(p).ok()),
        key_secret_id: m.key_secret_id,
    }
}

pub(in crate::storage) fn session_to_domain(m: chat_session::Model) -> ChatSession {
    ChatSession {
        id: m.id,
        workspace_id: m.workspace_id,
        owner_id: m.owner_id,
        title: m.title,
        title_user_set: m.title_user_set,
        system_prompt: m.system_prompt,
        model: m.model,
        params: m.params,
        approval_mode: m.approval_mode,
        exposed_roots: serde_json::from_value(m.exposed_roots).unwrap_or_default(),
        active_root_id: m.active_root_id,
        archived: m.archived,
        env_note: m.env_note,
        updated_at: m.updated_at,
    }
}

/// Inserts a workspace with default settings.
pub async fn insert_workspace(db: &Db, owner_id: Uuid, name: &str) -> StorageResult<Workspace> {
    let now = Utc::now();
    let row = workspace::ActiveModel {
        id: Set(Uuid::now_v7()),
        owner_id: Set(owner_id),
        name: Set(name.to_string()),
        system_prompt: Set(None),
        default_model: Set(None),
        approval_mode: Set("suggest".into()),
        infer_titles: Set(true),
        compact_at_percent: Set(None),
        settings: Set(serde_json::json!({})),
        key_secret_id: Set(None),
        created_at: Set(now),
        updated_at: Set(now),
    }
    .insert(db)
    .await?;
    Ok(workspace_to_domain(row))
}

/// The owner's workspace with this id.
pub async fn find_workspace(db: &Db, owner_id: Uuid, id: Uuid) -> StorageResult<Option<Workspace>> {
    Ok(workspace::Entity::find_by_id(id)
        .filter(workspace::Column::OwnerId.eq(owner_id))
        .one(db)
        .await?
        .map(workspace_to_domain))
}

/// Inserts an empty session.
pub async fn insert_session(
    db: &Db,
    owner_id: Uuid,
    workspace_id: Uuid,
    title: &str,
) -> StorageResult<ChatSession> {
    let now = Utc::now();
    let row = chat_session::ActiveModel {
        id: Set(Uuid::now_v7()),
        workspace_id: Set(workspace_id),
        owner_id: Set(owner_id),
        title: Set(title.to_string()),
        title_user_set: Set(false),
        system_prompt: Set(None),
        model: Set(None),
        params: Set(serde_json::json!({})),
        approval_mode: Set(None),
        exposed_roots: Set(serde_json::json!([])),
        active_root_id: Set(None),
        archived: Set(false),
        env_note: Set(None),
        created_at: Set(now),
        updated_at: Set(now),
    }
    .insert(db)
    .await?;
    Ok(session_to_domain(row))
}

/// The owner's session with this id.
pub async fn find_session(db: &Db, owner_id: Uuid, id: Uuid) -> StorageResult<Option<ChatSession>> {
    Ok(chat_session::Entity::find_by_id(id)
        .filter(chat_session::Column::OwnerId.eq(owner_id))
        .one(db)
        .await?
        .map(session_to_domain))
}

/// The workspace with this id, whoever owns it (the domain checks the actor's role).
pub async fn find_workspace_by_id(db: &Db, id: Uuid) -> StorageResult<Option<Workspace>> {
    Ok(workspace::Entity::find_by_id(id).one(db).await?.map(workspace_to_domain))
}

/// The session with this id, whoever owns it (the domain checks the actor's role).
pub async fn find_session_by_id(db: &Db, id: Uuid) -> StorageResult<Option<ChatSession>> {
    Ok(chat_session::Entity::find_by_id(id).one(db).await?.map(session_to_domain))
}

/// The owner's workspaces, oldest first.
pub async fn list_workspaces(db: &Db, owner_id: Uuid) -> StorageResult<Vec<Workspace>> {
    Ok(workspace::Entity::find()
        .filter(workspace::Column::OwnerId.eq(owner_id))
        .order_by_asc(workspace::Column::CreatedAt)
        .all(db)
        .await?
        .into_iter()
        .map(workspace_to_domain)
        .collect())
}

/// The owner's sessions, most recently updated first.
pub async fn recent_sessions(db: &Db, owner_id: Uuid, limit: u64) -> StorageResult<Vec<ChatSession>> {
    Ok(chat_session::Entity::find()
        .filter(chat_session::Column::OwnerId.eq(owner_id))
        .filter(chat_session::Column::Archived.eq(false))
        .order_by_desc(chat_session::Column::UpdatedAt)
        .limit(limit)
        .all(db)
        .await?
        .into_iter()
        .map(session_to_domain)
        .collect())
}

/// The owner's session holding a message with this composer client id.
pub async fn session_with_client_id(db: &Db, owner_id: Uuid, client_id: &str) -> StorageResult<Option<Uuid>> {
    use crate::storage::entities::message;
    let Some(m) = message::Entity::find().filter(message::Column::ClientId.eq(client_id)).one(db).await?
    else {
        return Ok(None);
    };
    // The person who wrote it (in a workspace shared with them the session is the owner's).
    if m.author_id == Some(owner_id) {
        return Ok(Some(m.session_id));
    }
    Ok(find_session(db, owner_id, m.session_id).await?.map(|s| s.id))
}

/// Deletes the owner's session; messages and runs go with it (links between messages are cut
/// first, so the cascade stays one level deep).
pub async fn delete_session(db: &Db, owner_id: Uuid, id: Uuid) -> StorageResult<()> {
    let txn = crate::storage::begin_write(db).await?;
    super::messages::unlink_session_messages(&txn, id).await?;
    chat_session::Entity::delete_many()
        .filter(chat_session::Column::Id.eq(id))
        .filter(chat_session::Column::OwnerId.eq(owner_id))
        .exec(&txn)
        .await?;
    txn.commit().await?;
    Ok(())
}

/// A workspace's editable settings.
pub struct WorkspaceSettings<'a> {
    /// Display name.
    pub name: &'a str,
    /// Default system prompt template.
    pub system_prompt: Option<&'a str>,
    /// Default `provider/model`.
    pub default_model: Option<&'a str>,
    /// Default approval mode.
    pub approval_mode: &'a str,
    /// Whether titles are proposed by the model.
    pub infer_titles: bool,
    /// Automatic compression threshold (percent of the window; none: default, 0: never).
    pub compact_at_percent: Option<u8>,
}

/// Updates the owner's workspace.
pub async fn update_workspace(
    db: &Db,
    owner_id: Uuid,
    id: Uuid,
    s: &WorkspaceSettings<'_>,
) -> StorageResult<bool> {
    let res = workspace::Entity::update_many()
        .col_expr(workspace::Column::Name, Expr::value(s.name))
        .col_expr(workspace::Column::SystemPrompt, Expr::value(s.system_prompt.map(str::to_string)))
        .col_expr(workspace::Column::DefaultModel, Expr::value(s.default_model.map(str::to_string)))
        .col_expr(workspace::Column::ApprovalMode, Expr::value(s.approval_mode))
        .col_expr(workspace::Column::InferTitles, Expr::value(s.infer_titles))
        .col_expr(workspace::Column::CompactAtPercent, Expr::value(s.compact_at_percent.map(i16::from)))
        .col_expr(workspace::Column::UpdatedAt, Expr::value(Utc::now()))
        .filter(workspace::Column::Id.eq(id))
        .filter(workspace::Column::OwnerId.eq(owner_id))
        .exec(db)
        .await?;
    changes::changed(Kept::Workspaces);
    Ok(res.rows_affected > 0)
}

/// Ids of the sessions in the owner's workspace.
pub async fn workspace_session_ids<C: sea_orm::ConnectionTrait>(
    db: &C,
    owner_id: Uuid,
    id: Uuid,
) -> StorageResult<Vec<Uuid>> {
    Ok(chat_session::Entity::find()
        .select_only()
        .column(chat_session::Column::Id)
        .filter(chat_session::Column::WorkspaceId.eq(id))
        .filter(chat_session::Column::OwnerId.eq(owner_id))
        .into_tuple()
        .all(db)
        .await?)
}

/// Deletes the owner's workspace with its sessions and their messages.
pub async fn delete_workspace(db: &Db, owner_id: Uuid, id: Uuid) -> StorageResult<()> {
    let txn = crate::storage::begin_write(db).await?;
    let sessions = workspace_session_ids(&txn, owner_id, id).await?;
    for session in sessions {
        super::messages::unlink_session_messages(&txn, session).await?;
    }
    super::memories::forget_scope(&txn, owner_id, &id.to_string()).await?;
    workspace::Entity::delete_many()
        .filter(workspace::Column::Id.eq(id))
        .filter(workspace::Column::OwnerId.eq(owner_id))
        .exec(&txn)
        .await?;
    txn.commit().await?;
    changes::changed(Kept::Workspaces);
    // A server attached to it is attached to none now.
    changes::changed(Kept::McpServers);
    Ok(())
}

/// How many sessions and messages a workspace holds.
pub async fn workspace_counts(db: &Db, owner_id: Uuid, id: Uuid) -> StorageResult<(u64, u64)> {
    use crate::storage::entities::message;
    let sessions = workspace_session_ids(db, owner_id, id).await?;
    let mut messages = 0;
    for chunk in sessions.chunks(500) {
        messages += message::Entity::find()
            .filter(message::Column::SessionId.is_in(chunk.iter().copied()))
            .count(db)
            .await?;
    }
    Ok((sessions.len() as u64, messages))
}

/// One page of a workspace's sessions, most recently active first; archived ones only when asked.
pub async fn workspace_sessions(
    db: &Db,
    owner_id: Uuid,
    workspace_id: Uuid,
    archived: bool,
    offset: u64,
    limit: u64,
) -> StorageResult<Vec<ChatSession>> {
    Ok(chat_session::Entity::find()
        .filter(chat_session::Column::OwnerId.eq(owner_id))
        .filter(chat_session::Column::WorkspaceId.eq(workspace_id))
        .filter(chat_session::Column::Archived.eq(archived))
        .order_by_desc(chat_session::Column::UpdatedAt)
        .order_by_desc(chat_session::Column::Id)
        .offset(offset)
        .limit(limit)
        .all(db)
        .await?
        .into_iter()
        .map(session_to_domain)
        .collect())
}

/// Renames the owner's session; a name the user gave is never replaced by a proposed one.
pub async fn rename_session(
    db: &Db,
    owner_id: Uuid,
    id: Uuid,
    title: &str,
    by_user: bool,
) -> StorageResult<bool> {
    let mut update = chat_session::Entity::update_many()
        .col_expr(chat_session::Column::Title, Expr::value(title))
        .filter(chat_session::Column::Id.eq(id))
        .filter(chat_session::Column::OwnerId.eq(owner_id));
    if by_user {
        update = update.col_expr(chat_session::Column::TitleUserSet, Expr::value(true));
    } else {
        update = update.filter(chat_session::Column::TitleUserSet.eq(false));
    }
    Ok(update.exec(db).await?.rows_affected > 0)
}

/// Archives or restores the owner's session.
pub async fn set_archived(db: &Db, owner_id: Uuid, id: Uuid, archived: bool) -> StorageResult<()> {
    chat_session::Entity::update_many()
        .col_expr(chat_session::Column::Archived, Expr::value(archived))
        .filter(chat_session::Column::Id.eq(id))
        .filter(chat_session::Column::OwnerId.eq(owner_id))
        .exec(db)
        .await?;
    Ok(())
}

/// A session's editable settings.
pub struct SessionSettings<'a> {
    /// System prompt template (none: the workspace's).
    pub system_prompt: Option<&'a str>,
    /// `provider/model` (none: the workspace's default).
    pub model: Option<&'a str>,
    /// Generation parameters.
    pub params: serde_json::Value,
    /// Folders exposed to the agent, relative to the workspace folder.
    pub exposed_roots: &'a [String],
    /// Approval mode (none: the workspace's).
    pub approval_mode: Option<&'a str>,
    /// A note for the model when the folders changed (none: leave the pending note as it is).
    pub env_note: Option<&'a str>,
}

/// Updates the owner's session settings.
pub async fn update_session(db: &Db, owner_id: Uuid, id: Uuid, s: &SessionSettings<'_>) -> StorageResult<()> {
    chat_session::Entity::update_many()
        .col_expr(chat_session::Column::SystemPrompt, Expr::value(s.system_prompt.map(str::to_string)))
        .col_expr(chat_session::Column::Model, Expr::value(s.model.map(str::to_string)))
        .col_expr(chat_session::Column::Params, Expr::value(s.params.clone()))
        .col_expr(chat_session::Column::ExposedRoots, Expr::value(serde_json::json!(s.exposed_roots)))
        .col_expr(chat_session::Column::ApprovalMode, Expr::value(s.approval_mode.map(str::to_string)))
        .filter(chat_session::Column::Id.eq(id))
        .filter(chat_session::Column::OwnerId.eq(owner_id))
        .exec(db)
        .await?;
    if let Some(note) = s.env_note {
        set_roots(db, owner_id, id, s.exposed_roots, Some(note)).await?;
    }
    Ok(())
}

/// Sets the owner's session's exposed folders and the note telling the model about it.
pub async fn set_roots(
    db: &Db,
    owner_id: Uuid,
    id: Uuid,
    roots: &[String],
    note: Option<&str>,
) -> StorageResult<()> {
    chat_session::Entity::update_many()
        .col_expr(chat_session::Column::ExposedRoots, Expr::value(serde_json::json!(roots)))
        .col_expr(chat_session::Column::EnvNote, Expr::value(note.map(str::to_string)))
        .filter(chat_session::Column::Id.eq(id))
        .filter(chat_session::Column::OwnerId.eq(owner_id))
        .exec(db)
        .await?;
    Ok(())
}

/// The first `limit` sessions of each of the owner's workspaces (archived or not), most recently
/// active first: one query whatever the number of workspaces (a window function, which SQLite
/// and PostgreSQL both have).
pub async fn first_sessions_per_workspace(
    db: &Db,
    owner_id: Uuid,
    archived: bool,
    limit: u64,
) -> StorageResult<Vec<ChatSession>> {
    first_sessions_where(db, "s.owner_id", &[owner_id], archived, limit).await
}

/// [`first_sessions_per_workspace`] for these workspaces, whoever owns them (the ones shared
/// with the actor, checked by the caller).
pub async fn first_sessions_in(
    db: &Db,
    workspace_ids: &[Uuid],
    archived: bool,
    limit: u64,
) -> StorageResult<Vec<ChatSession>> {
    if workspace_ids.is_empty() {
        return Ok(Vec::new());
    }
    first_sessions_where(db, "s.workspace_id", workspace_ids, archived, limit).await
}

async fn first_sessions_where(
    db: &Db,
    column: &str,
    ids: &[Uuid],
    archived: bool,
    limit: u64,
) -> StorageResult<Vec<ChatSession>> {
    use sea_orm::{DbBackend, Statement, Value};
    let backend = db.get_database_backend();
    let placeholder = |i: usize| match backend {
        DbBackend::Postgres => format!("${i}"),
        _ => "?".to_string(),
    };
    let list = (1..=ids.len()).map(placeholder).collect::<Vec<_>>().join(", ");
    let (archived_p, limit_p) = (placeholder(ids.len() + 1), placeholder(ids.len() + 2));
    let sql = format!(
        "SELECT * FROM (SELECT s.*, ROW_NUMBER() OVER (PARTITION BY s.workspace_id \
         ORDER BY s.updated_at DESC, s.id DESC) AS sidebar_rank FROM sessions s \
         WHERE {column} IN ({list}) AND s.archived = {archived_p}) ranked \
         WHERE sidebar_rank <= {limit_p} ORDER BY updated_at DESC, id DESC"
    );
    let limit = i64::try_from(limit).unwrap_or(i64::MAX);
    let mut values: Vec<Value> = ids.iter().map(|id| (*id).into()).collect();
    values.push(archived.into());
    values.push(limit.into());
    let stmt = Statement::from_sql_and_values(backend, sql, values);
    Ok(chat_session::Entity::find()
        .from_raw_sql(stmt)
        .all(db)
        .await?
        .into_iter()
        .map(session_to_domain)
        .collect())
}

/// Attaches a key of the owner's vault to their workspace (or none); `false` when the workspace
/// is not theirs.
pub async fn set_workspace_key(db: &Db, owner_id: Uuid, id: Uuid, key: Option<Uuid>) -> StorageResult<bool> {
    let res = workspace::Entity::update_many()
        .col_expr(workspace::Column::KeySecretId, sea_orm::sea_query::Expr::value(key))
        .filter(workspace::Column::Id.eq(id))
        .filter(workspace::Column::OwnerId.eq(owner_id))
        .exec(db)
        .await?;
    changes::changed(Kept::Workspaces);
    Ok(res.rows_affected == 1)
}
