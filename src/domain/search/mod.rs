//! Chat search: a feeder task reads messages that changed since its cursor (in the order they
//! changed), turns them into index documents and hands them to the one indexer task, which
//! commits about every second and reports how far it got; that point is stored as the
//! watermark, so start-up re-reads whatever a crash left out. Searches are the acting user's
//! alone (a term the server builds), and every hit is checked against the database before it
//! is shown, so a deleted message or session never appears, even before the index forgets it.
//!
//! Each instance keeps its own index, fed from the database (`feeder.rs`): its watermark is its
//! own, and a deletion writes a tombstone that every instance's feeder applies to its index.

mod feeder;

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
use crate::index::{IndexId, IndexOp, Indexer, SearchIndex, SearchQuery};
use crate::storage::Db;
use crate::storage::repos::search as repo;

/// How often the feeder closes idle SQLite connections beyond what its poll uses.
const TRIM_POOL_EVERY: Duration = Duration::from_secs(5);

pub use feeder::{Cursors, TOMBSTONE_DAYS, reindex};

/// The search service: the index, its indexer and the feeder.
pub struct SearchService {
    db: Db,
    index: SearchIndex,
    indexer: Indexer,
    /// Wakes the feeder (tests, and right after a run ends) without waiting for its tick.
    nudge: Arc<tokio::sync::Notify>,
    /// Passes of the feeder that read everything there was (for [`SearchService::settle`]).
    caught_up: Arc<AtomicU64>,
    /// Watermark and tombstone writes started and not finished yet.
    writes_pending: Arc<AtomicUsize>,
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

impl SearchService {
    /// Opens (or creates) the index in `dir`, starts the indexer and the feeder, which begins
    /// just before the index's stored watermark (or at the start, for a new or rebuilt index).
    pub async fn start(db: Db, dir: &Path, interval: Duration) -> Result<Arc<SearchService>, String> {
        let (index, recreated) = SearchIndex::open(dir).map_err(|e| e.to_string())?;
        if recreated {
            tracing::warn!("the search index was (re)created: every message is indexed again");
        }
        // Read with the index open: its writer lock keeps other processes out of `dir`.
        let id = IndexId::of_dir(dir).map_err(|e| e.to_string())?;
        Self::start_with(db, index, id, recreated, interval).await
    }

    /// [`Self::start`] over an already opened index, whose rows in `index_state` are named
    /// after `id`.
    pub async fn start_with(
        db: Db,
        index: SearchIndex,
        id: IndexId,
        from_scratch: bool,
        interval: Duration,
    ) -> Result<Arc<SearchService>, String> {
        let cursors = Cursors::of(id);
        let watermark_db = db.clone();
        let writes_pending = Arc::new(AtomicUsize::new(0));
        let pending = writes_pending.clone();
        let watermark = cursors.messages.clone();
        let indexer = Indexer::spawn(index.clone(), interval, move |seq| {
            let (db, pending, name) = (watermark_db.clone(), pending.clone(), watermark.clone());
            let at =
                DateTime::<Utc>::from_timestamp_micros(i64::try_from(seq).unwrap_or(0)).unwrap_or_default();
            pending.fetch_add(1, Ordering::SeqCst);
            tokio::spawn(async move {
                feeder::store(&db, &name, at).await;
                pending.fetch_sub(1, Ordering::SeqCst);
            });
        });
        let (start, tombstones_from) =
            feeder::starting_points(&db, &cursors, from_scratch).await.map_err(|e| e.to_string())?;
        let nudge = Arc::new(tokio::sync::Notify::new());
        let caught_up = Arc::new(AtomicU64::new(0));
        let service = Arc::new(SearchService {
            db,
            index,
            indexer,
            nudge: nudge.clone(),
            caught_up: caught_up.clone(),
            writes_pending,
        });
        let weak = Arc::downgrade(&service);
        tokio::spawn(async move {
            let mut cursor = (start, Uuid::nil());
            let mut tombstones = feeder::Tombstones::new(cursors.tombstones, tombstones_from);
            let mut trimmed = std::time::Instant::now();
            loop {
                let Some(service) = weak.upgrade() else { break };
                // This loop is what runs while the server idles: it also closes the SQLite
                // connections a start or a burst opened beyond what its poll uses (BENCHMARKS,
                // "Performance work", step 23). Before the pass, not after: sqlx hands the
                // pass's last connection back on a spawned task, so just after it the pool
                // would not look idle.
                if trimmed.elapsed() >= TRIM_POOL_EVERY {
                    trimmed = std::time::Instant::now();
                    crate::storage::trim_idle_sqlite(&service.db).await;
                }
                match feeder::read_pass(&service.db, cursor, &tombstones).await {
                    Ok(((docs, last, _), first_tombstones)) => {
                        for (seq, doc) in docs {
                            service.indexer.send(seq, IndexOp::Upsert(doc));
                        }
                        if let Some(last) = last {
                            cursor = last;
                        }
                        // A full batch: more is waiting, read on at once.
                        let Some(first_tombstones) = first_tombstones else { continue };
                        // After the messages: a deletion that raced with this read is undone
                        // here.
                        if let Err(e) =
                            tombstones.apply(first_tombstones, &service.db, &service.indexer).await
                        {
                            tracing::warn!(error = %e, "the search feeder could not read tombstones");
                        }
                    }
                    Err(e) => tracing::warn!(error = %e, "the search feeder could not read"),
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

    /// Waits for the tombstones already being written, for a feeder pass that began after that
    /// and read everything, then for its commit and the watermark it writes; gives up after 30
    /// seconds.
    pub async fn settle(&self) {
        let deadline = std::time::Instant::now() + Duration::from_secs(30);
        self.writes_settled(deadline).await;
        // A pass running now may have read before the latest writes; the one after it began
        // after this call.
        let seen = self.caught_up.load(Ordering::SeqCst);
        while self.caught_up.load(Ordering::SeqCst) < seen + 2 && std::time::Instant::now() < deadline {
            self.nudge();
            tokio::time::sleep(Duration::from_millis(5)).await;
        }
        self.indexer.flush().await;
        self.writes_settled(deadline).await;
    }

    async fn writes_settled(&self, deadline: std::time::Instant) {
        while self.writes_pending.load(Ordering::SeqCst) > 0 && std::time::Instant::now() < deadline {
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

    /// Drops a deleted session's messages from the index, and writes a tombstone so that every
    /// other instance's index drops them too.
    pub fn forget_session(&self, session_id: Uuid) {
        self.indexer.send(0, IndexOp::DeleteSession(session_id));
        self.tombstone(Some(session_id), None);
    }

    /// Drops a deleted user's messages from the index, and writes a tombstone so that every
    /// other instance's index drops them too.
    pub fn forget_user(&self, user_id: Uuid) {
        self.indexer.send(0, IndexOp::DeleteUser(user_id));
        self.tombstone(None, Some(user_id));
    }

    /// Writes a tombstone in the background (the callers are past their deletion already).
    fn tombstone(&self, session: Option<Uuid>, user: Option<Uuid>) {
        let (db, pending) = (self.db.clone(), self.writes_pending.clone());
        pending.fetch_add(1, Ordering::SeqCst);
        tokio::spawn(async move {
            feeder::write_tombstone(&db, session, user).await;
            pending.fetch_sub(1, Ordering::SeqCst);
        });
    }

    /// The index itself, for tests that look past the database check.
    #[cfg(any(test, feature = "test-support"))]
    pub fn index_for_tests(&self) -> &SearchIndex {
        &self.index
    }
}
