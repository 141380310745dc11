//! Export and import: reading workspaces, sessions and every branch of their trees into the
//! archive document, and writing a checked document back in one transaction.

use std::collections::HashMap;

use chrono::Utc;
use sea_orm::{ActiveModelTrait, ColumnTrait, ConnectionTrait, EntityTrait, QueryFilter, QueryOrder, Set};
use uuid::Uuid;

use crate::model::transfer::{
    ARCHIVE_FORMAT, Archive, ArchivedFile, ArchivedMessage, ArchivedSession, ArchivedTemplate,
    ArchivedToolCall, ArchivedUsage, ArchivedWorkspace,
};
use crate::storage::entities::{
    attachment, chat_session, message, prompt_template, run, tool_call, user, workspace,
};
use crate::storage::{Db, StorageError, StorageResult};

/// What an export holds.
#[derive(Debug, Clone, Copy)]
pub enum ExportScope {
    /// One session (in its workspace, with the workspace's settings).
    Session(Uuid),
    /// One workspace and all its sessions.
    Workspace(Uuid),
    /// Every workspace this person owns, and their prompt templates.
    Owner(Uuid),
}

/// Rows inserted at a time: well under every database's limit on bound values.
const INSERT_CHUNK: usize = 200;

fn archive_id(id: Uuid) -> String {
    id.to_string()
}

/// The document for `scope`, written by `source`; none when the session is gone.
pub async fn read(db: &Db, scope: ExportScope, source: &str) -> StorageResult<Option<Archive>> {
    let (workspaces, only_session, templates_of) = match scope {
        ExportScope::Session(id) => {
            let Some(s) = chat_session::Entity::find_by_id(id).one(db).await? else { return Ok(None) };
            let w = workspace::Entity::find_by_id(s.workspace_id).all(db).await?;
            (w, Some(id), None)
        }
        ExportScope::Workspace(id) => (workspace::Entity::find_by_id(id).all(db).await?, None, None),
        ExportScope::Owner(owner) => (
            workspace::Entity::find()
                .filter(workspace::Column::OwnerId.eq(owner))
                .order_by_asc(workspace::Column::CreatedAt)
                .all(db)
                .await?,
            None,
            Some(owner),
        ),
    };
    let mut emails: HashMap<Uuid, Option<String>> = HashMap::new();
    let mut archived = Vec::with_capacity(workspaces.len());
    for w in workspaces {
        let mut query = chat_session::Entity::find().filter(chat_session::Column::WorkspaceId.eq(w.id));
        if let Some(id) = only_session {
            query = query.filter(chat_session::Column::Id.eq(id));
        }
        let sessions = query.order_by_asc(chat_session::Column::CreatedAt).all(db).await?;
        let mut out = Vec::with_capacity(sessions.len());
        for s in sessions {
            out.push(read_session(db, s, &mut emails).await?);
        }
        archived.push(ArchivedWorkspace {
            name: w.name,
            system_prompt: w.system_prompt,
            default_model: w.default_model,
            approval_mode: Some(w.approval_mode),
            infer_titles: Some(w.infer_titles),
            compact_at_percent: w.compact_at_percent.and_then(|p| u8::try_from(p).ok()),
            sessions: out,
        });
    }
    let prompt_templates = match templates_of {
        Some(owner) => prompt_template::Entity::find()
            .filter(prompt_template::Column::OwnerId.eq(owner))
            .order_by_asc(prompt_template::Column::Name)
            .all(db)
            .await?
            .into_iter()
            .map(|t| ArchivedTemplate { name: t.name, body: t.body })
            .collect(),
        None => Vec::new(),
    };
    Ok(Some(Archive {
        format: ARCHIVE_FORMAT,
        source: source.to_string(),
        exported_at: Some(Utc::now()),
        workspaces: archived,
        prompt_templates,
    }))
}

async fn read_session(
    db: &Db,
    s: chat_session::Model,
    emails: &mut HashMap<Uuid, Option<String>>,
) -> StorageResult<ArchivedSession> {
    let messages = message::Entity::find()
        .filter(message::Column::SessionId.eq(s.id))
        .order_by_asc(message::Column::CreatedAt)
        .order_by_asc(message::Column::Id)
        .all(db)
        .await?;
    let mut files: HashMap<Uuid, Vec<ArchivedFile>> = HashMap::new();
    for a in attachment::Entity::find()
        .filter(attachment::Column::SessionId.eq(s.id))
        .order_by_asc(attachment::Column::Position)
        .all(db)
        .await?
    {
        files.entry(a.message_id).or_default().push(ArchivedFile {
            hash: a.hash,
            thumb: a.thumb_hash,
            name: a.file_name,
            size: a.size,
            mime: a.mime,
            width: a.width,
            height: a.height,
        });
    }
    let mut calls: HashMap<Uuid, Vec<ArchivedToolCall>> = HashMap::new();
    for c in tool_call::Entity::find()
        .filter(tool_call::Column::SessionId.eq(s.id))
        .order_by_asc(tool_call::Column::Position)
        .all(db)
        .await?
    {
        let decided_by = match c.decided_by {
            Some(id) => email_of(db, id, emails).await?,
            None => None,
        };
        calls.entry(c.message_id).or_default().push(ArchivedToolCall {
            call_id: c.call_id,
            tool: c.tool_name,
            arguments: c.arguments,
            risk: c.risk,
            status: c.status,
            decision: c.decision,
            decided_by,
            decided_at: c.decided_at,
            explanation: c.explanation,
            diff: c.diff,
            result_message: c.result_message_id.map(archive_id),
        });
    }
    let messages = messages
        .into_iter()
        .map(|m| {
            let usage = (m.tokens_in.is_some() || m.tokens_out.is_some()).then(|| ArchivedUsage {
                input: m.tokens_in.unwrap_or(0),
                output: m.tokens_out.unwrap_or(0),
                cached: m.tokens_cached.unwrap_or(0),
                cost_micros: m.cost_micros,
            });
            ArchivedMessage {
                id: archive_id(m.id),
                parent: m.parent_id.map(archive_id),
                chosen_child: m.chosen_child_id.map(archive_id),
                role: m.role,
                kind: m.kind,
                parts: m.parts,
                model: m.model,
                // A reply being written is exported as what it is once the process ends.
                status: if m.status == "streaming" { "interrupted".into() } else { m.status },
                error: m.error,
                usage,
                created_at: Some(m.created_at),
                files: files.remove(&m.id).unwrap_or_default(),
                tool_calls: calls.remove(&m.id).unwrap_or_default(),
            }
        })
        .collect();
    Ok(ArchivedSession {
        title: s.title,
        title_user_set: s.title_user_set,
        system_prompt: s.system_prompt,
        model: s.model,
        params: Some(s.params),
        approval_mode: s.approval_mode,
        archived: s.archived,
        created_at: Some(s.created_at),
        active_root: s.active_root_id.map(archive_id),
        messages,
    })
}

async fn email_of(
    db: &Db,
    id: Uuid,
    emails: &mut HashMap<Uuid, Option<String>>,
) -> StorageResult<Option<String>> {
    if let Some(known) = emails.get(&id) {
        return Ok(known.clone());
    }
    let email = user::Entity::find_by_id(id).one(db).await?.map(|u| u.email);
    emails.insert(id, email.clone());
    Ok(email)
}

/// Where an import goes.
#[derive(Debug, Clone, Copy)]
pub struct ImportTarget {
    /// Who owns what is made.
    pub owner: Uuid,
    /// Every session goes into this workspace of the owner's; none: each archived workspace
    /// becomes a new one.
    pub workspace: Option<Uuid>,
}

/// What an import made.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct ImportCounts {
    /// Workspaces made.
    pub workspaces: usize,
    /// Sessions made.
    pub sessions: usize,
    /// Messages made.
    pub messages: usize,
    /// Files attached.
    pub files: usize,
    /// Prompt templates made.
    pub templates: usize,
}

fn uuid_of(id: &str) -> StorageResult<Uuid> {
    Uuid::parse_str(id).map_err(|_| StorageError::Corrupt(format!("archive id {id:?} was not remapped")))
}

/// A file already in the blob store that an import refers to: hash, size, verified type.
pub type BlobFacts = (String, i64, String);

/// Writes a checked document whose ids are already fresh UUIDs, in one transaction: all of it
/// or nothing. `blobs` are the files its attachments name (already in the store); `progress`
/// is told after each session.
pub async fn write(
    db: &Db,
    target: ImportTarget,
    archive: &Archive,
    blobs: &[BlobFacts],
    progress: &(dyn Fn(usize) + Send + Sync),
) -> StorageResult<ImportCounts> {
    let txn = crate::storage::begin_write(db).await?;
    let now = Utc::now();
    let mut counts = ImportCounts::default();
    for (hash, size, mime) in blobs {
        super::files::ensure_blob(&txn, hash, *size, mime).await?;
    }
    for w in &archive.workspaces {
        let workspace_id = match target.workspace {
            Some(id) => id,
            None => {
                let id = Uuid::now_v7();
                workspace::ActiveModel {
                    id: Set(id),
                    owner_id: Set(target.owner),
                    name: Set(w.name.clone()),
                    system_prompt: Set(w.system_prompt.clone()),
                    default_model: Set(w.default_model.clone()),
                    approval_mode: Set(w.approval_mode.clone().unwrap_or_else(|| "suggest".into())),
                    infer_titles: Set(w.infer_titles.unwrap_or(true)),
                    compact_at_percent: Set(w.compact_at_percent.map(i16::from)),
                    settings: Set(serde_json::json!({})),
                    key_secret_id: Set(None),
                    created_at: Set(now),
                    updated_at: Set(now),
                }
                .insert(&txn)
                .await?;
                counts.workspaces += 1;
                id
            }
        };
        for s in &w.sessions {
            write_session(&txn, target.owner, workspace_id, s, &mut counts).await?;
            counts.sessions += 1;
            progress(counts.sessions);
        }
    }
    for t in &archive.prompt_templates {
        prompt_template::ActiveModel {
            id: Set(Uuid::now_v7()),
            owner_id: Set(target.owner),
            name: Set(t.name.clone()),
            body: Set(t.body.clone()),
            group_id: Set(None),
            created_at: Set(now),
            updated_at: Set(now),
        }
        .insert(&txn)
        .await?;
        counts.templates += 1;
    }
    txn.commit().await?;
    Ok(counts)
}

async fn write_session<C: ConnectionTrait>(
    txn: &C,
    owner: Uuid,
    workspace_id: Uuid,
    s: &ArchivedSession,
    counts: &mut ImportCounts,
) -> StorageResult<()> {
    let now = Utc::now();
    let session_id = Uuid::now_v7();
    chat_session::ActiveModel {
        id: Set(session_id),
        workspace_id: Set(workspace_id),
        owner_id: Set(owner),
        title: Set(s.title.clone()),
        title_user_set: Set(s.title_user_set),
        system_prompt: Set(s.system_prompt.clone()),
        model: Set(s.model.clone()),
        params: Set(s.params.clone().unwrap_or_else(|| serde_json::json!({}))),
        approval_mode: Set(s.approval_mode.clone()),
        exposed_roots: Set(serde_json::json!([])),
        active_root_id: Set(None),
        archived: Set(s.archived),
        env_note: Set(None),
        created_at: Set(s.created_at.unwrap_or(now)),
        updated_at: Set(now),
    }
    .insert(txn)
    .await?;
    // Parents first, chosen children after: a chosen child must exist before it is named.
    let mut rows = Vec::with_capacity(s.messages.len());
    let mut attachments = Vec::new();
    for m in &s.messages {
        let id = uuid_of(&m.id)?;
        let at = m.created_at.unwrap_or(now);
        let usage = m.usage.unwrap_or_default();
        rows.push(message::ActiveModel {
            id: Set(id),
            session_id: Set(session_id),
            parent_id: Set(m.parent.as_deref().map(uuid_of).transpose()?),
            chosen_child_id: Set(None),
            role: Set(m.role.clone()),
            kind: Set(m.kind.clone()),
            parts: Set(m.parts.clone()),
            model: Set(m.model.clone()),
            provider: Set(m.model.as_deref().and_then(|r| r.split_once('/')).map(|(p, _)| p.to_string())),
            tokens_in: Set(m.usage.map(|_| usage.input)),
            tokens_out: Set(m.usage.map(|_| usage.output)),
            tokens_cached: Set(m.usage.map(|_| usage.cached)),
            cost_micros: Set(usage.cost_micros),
            status: Set(m.status.clone()),
            client_id: Set(None),
            error: Set(m.error.clone()),
            usage_estimated: Set(false),
            author_id: Set((m.role == "user").then_some(owner)),
            token_count: Set(imported_tokens(&m.parts)),
            created_at: Set(at),
            // The search feeder reads by `updated_at`: an import is new to this instance.
            updated_at: Set(now),
        });
        for (position, f) in m.files.iter().enumerate() {
            attachments.push(attachment::ActiveModel {
                id: Set(Uuid::now_v7()),
                message_id: Set(id),
                session_id: Set(session_id),
                user_id: Set(owner),
                hash: Set(f.hash.clone()),
                thumb_hash: Set(f.thumb.clone()),
                file_name: Set(f.name.clone()),
                size: Set(f.size),
                mime: Set(f.mime.clone()),
                width: Set(f.width),
                height: Set(f.height),
                position: Set(i32::try_from(position).unwrap_or(i32::MAX)),
                created_at: Set(at),
            });
        }
    }
    counts.messages += rows.len();
    counts.files += attachments.len();
    insert_chunks::<message::Entity, _>(txn, rows).await?;
    for m in &s.messages {
        if let Some(child) = &m.chosen_child {
            message::Entity::update_many()
                .col_expr(message::Column::ChosenChildId, sea_orm::sea_query::Expr::value(uuid_of(child)?))
                .filter(message::Column::Id.eq(uuid_of(&m.id)?))
                .exec(txn)
                .await?;
        }
    }
    insert_chunks::<attachment::Entity, _>(txn, attachments).await?;
    write_calls(txn, owner, session_id, s).await?;
    if let Some(root) = &s.active_root {
        chat_session::Entity::update_many()
            .col_expr(chat_session::Column::ActiveRootId, sea_orm::sea_query::Expr::value(uuid_of(root)?))
            .filter(chat_session::Column::Id.eq(session_id))
            .exec(txn)
            .await?;
    }
    Ok(())
}

/// Tool calls hang off a run: one ended run per imported session holds them, so nothing of an
/// import ever looks live (a call that was waiting is recorded as cancelled by the checker).
async fn write_calls<C: ConnectionTrait>(
    txn: &C,
    owner: Uuid,
    session_id: Uuid,
    s: &ArchivedSession,
) -> StorageResult<()> {
    if s.messages.iter().all(|m| m.tool_calls.is_empty()) {
        return Ok(());
    }
    let now = Utc::now();
    let run_id = Uuid::now_v7();
    run::ActiveModel {
        id: Set(run_id),
        session_id: Set(session_id),
        owner_id: Set(owner),
        leaf_message_id: Set(None),
        assistant_message_id: Set(None),
        status: Set("imported".into()),
        iterations: Set(0),
        error: Set(None),
        created_at: Set(now),
        updated_at: Set(now),
        finished_at: Set(Some(now)),
        instance_id: Set(None),
    }
    .insert(txn)
    .await?;
    let mut rows = Vec::new();
    for m in &s.messages {
        for (position, c) in m.tool_calls.iter().enumerate() {
            rows.push(tool_call::ActiveModel {
                id: Set(Uuid::now_v7()),
                run_id: Set(run_id),
                session_id: Set(session_id),
                owner_id: Set(owner),
                message_id: Set(uuid_of(&m.id)?),
                call_id: Set(c.call_id.clone()),
                position: Set(i32::try_from(position).unwrap_or(i32::MAX)),
                tool_name: Set(c.tool.clone()),
                arguments: Set(c.arguments.clone()),
                args_hash: Set(String::new()),
                tool_digest: Set(String::new()),
                tool_description: Set(None),
                risk: Set(c.risk.clone()),
                status: Set(c.status.clone()),
                decision: Set(c.decision.clone()),
                // People are not carried between instances; the decision and its time are.
                decided_by: Set(None),
                decided_at: Set(c.decided_at),
                explanation: Set(c.explanation.clone()),
                diff: Set(c.diff.clone()),
                result_message_id: Set(c.result_message.as_deref().map(uuid_of).transpose()?),
                created_at: Set(m.created_at.unwrap_or(now)),
                updated_at: Set(now),
            });
        }
    }
    insert_chunks::<tool_call::Entity, _>(txn, rows).await
}

async fn insert_chunks<E, C>(txn: &C, rows: Vec<E::ActiveModel>) -> StorageResult<()>
where
    E: EntityTrait,
    C: ConnectionTrait,
    E::ActiveModel: ActiveModelTrait<Entity = E> + Send,
{
    let mut rows = rows.into_iter().peekable();
    while rows.peek().is_some() {
        let chunk: Vec<E::ActiveModel> = rows.by_ref().take(INSERT_CHUNK).collect();
        E::insert_many(chunk).exec_without_returning(txn).await?;
    }
    Ok(())
}

/// An imported message's size in tokens (none for parts this version cannot read).
fn imported_tokens(parts: &serde_json::Value) -> Option<i64> {
    let parts: Vec<crate::providers::types::Part> = serde_json::from_value(parts.clone()).ok()?;
    Some(super::messages::to_i64(crate::providers::tokens::count_parts(&parts)))
}
