//! Chat search: a feeder task reads messages that changed since its cursor (in the order they
//! changed), turns them into index documents and hands them to the one indexer task, which
//! commits about every second and reports how far it got; that point is stored as the
//! watermark, so start-up re-reads whatever a crash left out. Searches are the acting user's
//! alone (a term the server builds), and every hit is checked against the database before it
//! is shown, so a deleted message or session never appears, even before the index forgets it.

use std::collections::HashSet;
use std::path::Path;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::time::Duration;

use chrono::{DateTime, Utc};
use serde::Serialize;
use uuid::Uuid;

use crate::domain::accounts::Actor;
use crate::domain::{DomainError, DomainResult};
use crate::index::{IndexDoc, IndexOp, Indexer, SearchIndex, SearchQuery};
use crate::providers::types::Part;
use crate::storage::Db;
use crate::storage::entities::message;
use crate::storage::repos::search as repo;

/// The watermark's row name.
const WATERMARK: &str = "messages";
/// Messages read per feeder step.
const BATCH: u64 = 2000;
/// Start-up re-reads this much before the watermark (clocks of several writers differ a little).
const MARGIN_SECS: i64 = 5;
/// Text indexed per message, bytes.
const MAX_TEXT: usize = 100 * 1024;

/// The search service: the index, its indexer and the feeder.
pub struct SearchService {
    db: Db,
    index: SearchIndex,
    indexer: Indexer,
    /// Wakes the feeder (tests, and right after a run ends) without waiting for its tick.
    nudge: Arc<tokio::sync::Notify>,
    /// Passes of the feeder that read everything there was (for [`SearchService::settle`]).
    caught_up: Arc<AtomicU64>,
    /// Watermark writes started and not finished yet.
    watermarks_pending: Arc<AtomicUsize>,
}

/// One hit as the UI shows it.
#[derive(Debug, Clone, Serialize)]
pub struct HitView {
    /// The message.
    pub message_id: Uuid,
    /// Its session.
    pub session_id: Uuid,
    /// The session's current title.
    pub session_title: String,
    /// user, assistant or tool.
    pub role: String,
    /// When, for display.
    pub date: String,
    /// A piece of the text and the matched words in it (plain text).
    pub snippet: crate::model::search::Snippet,
}

/// A page of results.
#[derive(Debug, Clone, Serialize)]
pub struct ResultsPage {
    /// Hits on this page.
    pub hits: Vec<HitView>,
    /// Matches in all (before stale ones were dropped).
    pub total: usize,
    /// 1-based page.
    pub page: usize,
    /// Whether a next page exists.
    pub more: bool,
}

/// What a message contributes to the index: its text (tool results too), none for notes.
fn searchable_text(m: &message::Model) -> Option<String> {
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

async fn store_watermark(db: &Db, at: DateTime<Utc>) {
    if let Err(e) = repo::store_watermark(db, WATERMARK, at).await {
        tracing::warn!(error = %e, "could not store the search watermark");
    }
}

async fn load_watermark(db: &Db) -> DomainResult<Option<DateTime<Utc>>> {
    Ok(repo::load_watermark(db, WATERMARK).await?)
}

/// Messages changed after `(at, id)`, in change order, with the documents they make.
/// A step of the feeder: the documents made, and the `(updated_at, id)` of the last row read.
type Step = (Vec<(u64, IndexDoc)>, Option<(DateTime<Utc>, Uuid)>, u64);

/// Messages changed after `(at, id)`, in change order, with the documents they make (and how
/// many rows were read).
async fn changed_after(db: &Db, at: DateTime<Utc>, id: Uuid) -> DomainResult<Step> {
    let repo::Changed { messages: rows, sessions, with_files } =
        repo::changed_after(db, at, id, BATCH).await?;
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
    Ok((docs, last, read))
}

impl SearchService {
    /// Opens (or creates) the index in `dir`, starts the indexer and the feeder, which begins
    /// just before the stored watermark (or at the start, for a new or rebuilt index).
    pub async fn start(db: Db, dir: &Path, interval: Duration) -> Result<Arc<SearchService>, String> {
        let (index, recreated) = SearchIndex::open(dir).map_err(|e| e.to_string())?;
        if recreated {
            tracing::warn!("the search index was (re)created: every message is indexed again");
        }
        Self::start_with(db, index, recreated, interval).await
    }

    /// [`Self::start`] over an already opened index.
    pub async fn start_with(
        db: Db,
        index: SearchIndex,
        from_scratch: bool,
        interval: Duration,
    ) -> Result<Arc<SearchService>, String> {
        let watermark_db = db.clone();
        let watermarks_pending = Arc::new(AtomicUsize::new(0));
        let pending = watermarks_pending.clone();
        let indexer = Indexer::spawn(index.clone(), interval, move |seq| {
            let (db, pending) = (watermark_db.clone(), pending.clone());
            let at =
                DateTime::<Utc>::from_timestamp_micros(i64::try_from(seq).unwrap_or(0)).unwrap_or_default();
            pending.fetch_add(1, Ordering::SeqCst);
            tokio::spawn(async move {
                store_watermark(&db, at).await;
                pending.fetch_sub(1, Ordering::SeqCst);
            });
        });
        let start = match (from_scratch, load_watermark(&db).await.map_err(|e| e.to_string())?) {
            (false, Some(w)) => w - chrono::Duration::seconds(MARGIN_SECS),
            _ => DateTime::<Utc>::UNIX_EPOCH,
        };
        let nudge = Arc::new(tokio::sync::Notify::new());
        let caught_up = Arc::new(AtomicU64::new(0));
        let service = Arc::new(SearchService {
            db,
            index,
            indexer,
            nudge: nudge.clone(),
            caught_up: caught_up.clone(),
            watermarks_pending,
        });
        let feeder = Arc::downgrade(&service);
        tokio::spawn(async move {
            let mut cursor = (start, Uuid::nil());
            loop {
                let Some(service) = feeder.upgrade() else { break };
                match changed_after(&service.db, cursor.0, cursor.1).await {
                    Ok((docs, last, read)) => {
                        let full = read >= BATCH;
                        for (seq, doc) in docs {
                            service.indexer.send(seq, IndexOp::Upsert(doc));
                        }
                        if let Some(last) = last {
                            cursor = last;
                        }
                        // A full batch: more is waiting, read on at once.
                        if full {
                            continue;
                        }
                    }
                    Err(e) => tracing::warn!(error = %e, "the search feeder could not read messages"),
                }
                caught_up.fetch_add(1, Ordering::SeqCst);
                drop(service);
                let _ = tokio::time::timeout(interval, nudge.notified()).await;
            }
        });
        Ok(service)
    }

    /// Reads new messages now rather than at the next tick.
    pub fn nudge(&self) {
        self.nudge.notify_one();
    }

    /// Waits for a feeder pass that began after the call and read everything, then for its
    /// commit and the watermark it writes; gives up after 30 seconds.
    pub async fn settle(&self) {
        let deadline = std::time::Instant::now() + Duration::from_secs(30);
        // A pass running now may have read before the latest writes; the one after it began
        // after this call.
        let seen = self.caught_up.load(Ordering::SeqCst);
        while self.caught_up.load(Ordering::SeqCst) < seen + 2 && std::time::Instant::now() < deadline {
            self.nudge();
            tokio::time::sleep(Duration::from_millis(5)).await;
        }
        self.indexer.flush().await;
        while self.watermarks_pending.load(Ordering::SeqCst) > 0 && std::time::Instant::now() < deadline {
            tokio::time::sleep(Duration::from_millis(5)).await;
        }
    }

    /// One page of the actor's messages matching `text` (optionally in one workspace).
    pub async fn search(
        &self,
        actor: &Actor,
        text: &str,
        workspace: Option<Uuid>,
        page: usize,
        per_page: usize,
    ) -> DomainResult<ResultsPage> {
        let query = SearchQuery::parse(text, workspace).map_err(DomainError::Invalid)?;
        let page = page.max(1);
        let index = self.index.clone();
        let user = actor.user_id();
        let offset = (page - 1) * per_page;
        // Workspaces shared with the actor are searched too, checked now: a revoked share is
        // out of the results at once.
        let shared = crate::domain::sessions::access::shared_workspace_ids(&self.db, user).await?;
        let scope = shared.clone();
        let results = tokio::task::spawn_blocking(move || {
            index.search_shared(user, &scope, &query, offset, per_page + 1)
        })
        .await
        .map_err(|e| DomainError::Invalid(format!("The search failed: {e}")))?
        .map_err(|e| {
            tracing::error!(error = %e, "search failed");
            DomainError::Invalid("The search could not be run; try again.".into())
        })?;
        let more = results.hits.len() > per_page;
        // Check every hit against the database: the actor's, and still there.
        let ids: Vec<Uuid> = results.hits.iter().map(|h| h.message_id).collect();
        let alive = repo::sessions_of_messages(&self.db, ids).await?;
        let session_ids: HashSet<Uuid> = alive.values().copied().collect();
        let sessions = repo::visible_sessions(&self.db, actor.user_id(), &shared, session_ids).await?;
        let mut hits = Vec::new();
        for h in results.hits.into_iter().take(per_page) {
            match alive.get(&h.message_id).and_then(|sid| sessions.get(sid)) {
                Some(s) => hits.push(HitView {
                    message_id: h.message_id,
                    session_id: s.id,
                    session_title: s.title.clone(),
                    role: h.role,
                    date: h.created_at.format("%Y-%m-%d").to_string(),
                    snippet: h.snippet,
                }),
                // Deleted since it was indexed: forget it now.
                None => self.indexer.send(0, IndexOp::DeleteMessage(h.message_id)),
            }
        }
        Ok(ResultsPage { hits, total: results.total, page, more })
    }

    /// Drops a deleted session's messages from the index.
    pub fn forget_session(&self, session_id: Uuid) {
        self.indexer.send(0, IndexOp::DeleteSession(session_id));
    }

    /// Drops a deleted user's messages from the index.
    pub fn forget_user(&self, user_id: Uuid) {
        self.indexer.send(0, IndexOp::DeleteUser(user_id));
    }
}

/// Rebuilds the index in `dir` from the database, reporting (done, total) as it goes.
pub async fn reindex(db: &Db, dir: &Path, progress: impl Fn(u64, u64)) -> Result<u64, String> {
    let (index, _) = SearchIndex::open(dir).map_err(|e| e.to_string())?;
    index.clear().map_err(|e| e.to_string())?;
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
    store_watermark(db, last_seen.unwrap_or_else(Utc::now)).await;
    Ok(index.num_docs())
}
