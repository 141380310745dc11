//! Feeding one index from the database. Several Arbor instances may share a database, each with
//! its own index (its own directory); an index keeps its own rows in `index_state`, named after
//! its [`IndexId`]: `messages:<id>`, how far its messages are committed, and `tombstones:<id>`,
//! which tombstones it has applied. A deletion writes a tombstone, so every instance's feeder
//! drops the documents of a deleted session or user from its own index.

use std::collections::HashMap;
use std::path::Path;
use std::time::{Duration, Instant};

use chrono::{DateTime, Utc};
use uuid::Uuid;

use crate::domain::DomainResult;
use crate::index::{IndexDoc, IndexId, IndexOp, Indexer, SearchIndex};
use crate::model::search::ChangedMessage;
use crate::providers::types::Part;
use crate::storage::Db;
use crate::storage::repos::search as repo;

/// The watermark's row name before each index had its own: the starting point, once, of an
/// index that has no row of its own yet (an install upgraded from a single instance).
const LEGACY_WATERMARK: &str = "messages";
/// Messages read per feeder step.
pub(super) const BATCH: u64 = 2000;
/// Start-up re-reads this much before the watermark, and every pass re-reads this much of the
/// tombstones before the last one applied (clocks of several writers differ a little, and a
/// row may become visible after a later one).
const MARGIN_SECS: i64 = 5;
/// Text indexed per message, bytes.
const MAX_TEXT: usize = 100 * 1024;
/// Tombstones read per query.
const TOMBSTONE_BATCH: u64 = 1000;
/// Tombstones are kept this long: an instance stopped for longer keeps the documents of what
/// was deleted meanwhile (hits are checked against the database, so none ever shows).
pub const TOMBSTONE_DAYS: i64 = 7;
/// How often a feeder prunes old tombstones.
const PRUNE_EVERY: Duration = Duration::from_secs(3600);

fn margin() -> chrono::Duration {
    chrono::Duration::seconds(MARGIN_SECS)
}

/// The rows of `index_state` that belong to one index.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Cursors {
    /// How far the index's messages are committed.
    pub messages: String,
    /// The newest tombstone the index has applied.
    pub tombstones: String,
}

impl Cursors {
    /// The rows of the index `id`.
    pub fn of(id: IndexId) -> Cursors {
        Cursors { messages: format!("messages:{id}"), tombstones: format!("tombstones:{id}") }
    }
}

/// What a message contributes to the index: its text (tool results too), none for notes.
fn searchable_text(m: &ChangedMessage) -> Option<String> {
    if m.role == "system" || m.status == "streaming" {
        return None;
    }
    let parts: Vec<Part> = serde_json::from_value(m.parts.clone()).ok()?;
    let mut text = String::new();
    for p in parts {
        match p {
            Part::Text { text: t } => text.push_str(&t),
            Part::ToolResult { content, .. } => text.push_str(&content),
            Part::ToolCall { name, arguments, .. } => text.push_str(&format!("{name} {arguments}")),
            _ => {}
        }
        text.push('\n');
        if text.len() > MAX_TEXT {
            break;
        }
    }
    let text = text.trim();
    (!text.is_empty()).then(|| text.to_string())
}

fn micros(t: DateTime<Utc>) -> u64 {
    u64::try_from(t.timestamp_micros()).unwrap_or(0)
}

/// Stores `at` under `name`, logging a failure (the next commit stores it again).
pub(super) async fn store(db: &Db, name: &str, at: DateTime<Utc>) {
    if let Err(e) = repo::store_watermark(db, name, at).await {
        tracing::warn!(error = %e, name, "could not store the search watermark");
    }
}

/// Where a feeder starts: the messages just before the index's watermark (or the legacy shared
/// one, for an index without its own yet), and the tombstones after the last it applied. A new
/// or rebuilt index reads every message, and only the tombstones written from now on: what was
/// deleted before is not in the database to be read.
pub(super) async fn starting_points(
    db: &Db,
    cursors: &Cursors,
    from_scratch: bool,
) -> DomainResult<(DateTime<Utc>, DateTime<Utc>)> {
    if from_scratch {
        return Ok((DateTime::<Utc>::UNIX_EPOCH, Utc::now()));
    }
    let watermark = match repo::load_watermark(db, &cursors.messages).await? {
        Some(w) => Some(w),
        None => repo::load_watermark(db, LEGACY_WATERMARK).await?,
    };
    let messages = watermark.map_or(DateTime::<Utc>::UNIX_EPOCH, |w| w - margin());
    let tombstones =
        repo::load_watermark(db, &cursors.tombstones).await?.unwrap_or(DateTime::<Utc>::UNIX_EPOCH);
    Ok((messages, tombstones))
}

/// A step of the feeder: the documents made (with their sequence numbers), the
/// `(updated_at, id)` of the last row read, and how many rows were read.
pub(super) type Step = (Vec<(u64, IndexDoc)>, Option<(DateTime<Utc>, Uuid)>, u64);

/// Messages changed after `(at, id)`, in change order, with the documents they make (and how
/// many rows were read).
pub(super) async fn changed_after(db: &Db, at: DateTime<Utc>, id: Uuid) -> DomainResult<Step> {
    Ok(step_of(repo::changed_after(db, at, id, BATCH).await?))
}

/// One pass of the live feeder, read on one connection: the step of the messages changed after
/// `cursor` and, when those did not fill their batch, the first tombstones after `tombstones`'
/// cursor (for [`Tombstones::apply`]).
pub(super) async fn read_pass(
    db: &Db,
    cursor: (DateTime<Utc>, Uuid),
    tombstones: &Tombstones,
) -> DomainResult<(Step, Option<Vec<repo::Tombstone>>)> {
    let pass = repo::read_pass(db, cursor, BATCH, tombstones.from(), TOMBSTONE_BATCH).await?;
    Ok((step_of(pass.changed), pass.tombstones))
}

/// The documents a batch of changed messages makes.
fn step_of(changed: repo::Changed) -> Step {
    let repo::Changed { messages: rows, sessions, with_files } = changed;
    let last = rows.last().map(|m| (m.updated_at, m.id));
    let read = rows.len() as u64;
    let mut docs = Vec::new();
    for m in rows {
        let (Some(text), Some(s)) = (searchable_text(&m), sessions.get(&m.session_id)) else { continue };
        docs.push((
            micros(m.updated_at),
            IndexDoc {
                message_id: m.id,
                user_id: s.owner_id,
                workspace_id: s.workspace_id,
                session_id: s.id,
                role: m.role.clone(),
                created_at: m.created_at,
                has_attachment: with_files.contains(&m.id),
                text,
                session_title: s.title.clone(),
            },
        ));
    }
    (docs, last, read)
}

/// The feeder's tombstone cursor: the newest tombstone applied, and those applied within the
/// margin before it (each pass re-reads the margin, and skips these).
pub(super) struct Tombstones {
    name: String,
    at: DateTime<Utc>,
    applied: HashMap<Uuid, DateTime<Utc>>,
    pruned: Option<Instant>,
}

impl Tombstones {
    /// A cursor stored under `name`, after `at`.
    pub(super) fn new(name: String, at: DateTime<Utc>) -> Tombstones {
        Tombstones { name, at, applied: HashMap::new(), pruned: None }
    }

    /// Where the next read starts: the margin before the newest tombstone applied.
    pub(super) fn from(&self) -> (DateTime<Utc>, Uuid) {
        (self.at - margin(), Uuid::nil())
    }

    /// Sends the index the deletions of every tombstone not applied yet, starting with `first`
    /// (the first batch after [`Tombstones::from`]) and reading on while batches come full;
    /// once they are committed, stores how far it got. Prunes old tombstones about once an
    /// hour.
    pub(super) async fn apply(
        &mut self,
        first: Vec<repo::Tombstone>,
        db: &Db,
        indexer: &Indexer,
    ) -> DomainResult<()> {
        let mut rows = first;
        let mut sent = false;
        loop {
            let full = rows.len() as u64 >= TOMBSTONE_BATCH;
            for t in &rows {
                if self.applied.insert(t.id, t.created_at).is_none() {
                    if let Some(session) = t.session_id {
                        indexer.send(0, IndexOp::DeleteSession(session));
                    }
                    if let Some(user) = t.user_id {
                        indexer.send(0, IndexOp::DeleteUser(user));
                    }
                    sent = true;
                }
                self.at = self.at.max(t.created_at);
            }
            match rows.last() {
                Some(last) if full => {
                    rows = repo::tombstones_after(db, last.created_at, last.id, TOMBSTONE_BATCH).await?
                }
                _ => break,
            }
        }
        if sent {
            indexer.flush().await;
            store(db, &self.name, self.at).await;
        }
        let horizon = self.at - margin();
        self.applied.retain(|_, at| *at >= horizon);
        if self.pruned.is_none_or(|t| t.elapsed() >= PRUNE_EVERY) {
            self.pruned = Some(Instant::now());
            let before = Utc::now() - chrono::Duration::days(TOMBSTONE_DAYS);
            let pruned = repo::prune_tombstones(db, before).await?;
            if pruned > 0 {
                tracing::debug!(pruned, "old search tombstones pruned");
            }
        }
        Ok(())
    }
}

/// Writes a tombstone for a deleted session or user, logging a failure.
pub(super) async fn write_tombstone(db: &Db, session: Option<Uuid>, user: Option<Uuid>) {
    if let Err(e) = repo::add_tombstone(db, session, user).await {
        tracing::warn!(error = %e, "could not write a search tombstone; other instances keep the documents");
    }
}

/// Rebuilds the index in `dir` from the database, reporting (done, total) as it goes; stores
/// the index's watermark and tombstone cursor under its own names.
pub async fn reindex(db: &Db, dir: &Path, progress: impl Fn(u64, u64)) -> Result<u64, String> {
    let (index, _) = SearchIndex::open(dir).map_err(|e| e.to_string())?;
    let cursors = Cursors::of(IndexId::of_dir(dir).map_err(|e| e.to_string())?);
    index.clear().map_err(|e| e.to_string())?;
    // What is deleted from now on has not been read yet: its tombstone is applied later.
    let began = Utc::now();
    let total = repo::count_messages(db).await.map_err(|e| e.to_string())?;
    let mut cursor = (DateTime::<Utc>::UNIX_EPOCH, Uuid::nil());
    let (mut done, mut last_seen) = (0u64, None);
    let mut pending: Vec<IndexOp> = Vec::new();
    // Large commits are what make indexing fast (see the search benchmark).
    let flush = |ops: Vec<IndexOp>| {
        let index = index.clone();
        async move {
            tokio::task::spawn_blocking(move || index.apply(ops))
                .await
                .map_err(|e| e.to_string())?
                .map_err(|e| e.to_string())
        }
    };
    loop {
        let (docs, last, read) = changed_after(db, cursor.0, cursor.1).await.map_err(|e| e.to_string())?;
        let Some(last) = last else { break };
        pending.extend(docs.into_iter().map(|(_, d)| IndexOp::Upsert(d)));
        if pending.len() >= crate::index::REINDEX_BATCH {
            flush(std::mem::take(&mut pending)).await?;
        }
        done = (done + read).min(total);
        progress(done, total);
        cursor = last;
        last_seen = Some(last.0);
    }
    flush(pending).await?;
    store(db, &cursors.messages, last_seen.unwrap_or_else(Utc::now)).await;
    store(db, &cursors.tombstones, began).await;
    Ok(index.num_docs())
}
