//! The indexer task: the only code path that writes the index while the server runs. It takes
//! changes from a channel, batches them and commits about once per interval.

use std::sync::Arc;
use std::time::Duration;

use tokio::sync::{mpsc, oneshot};
use tokio::time::{Instant, MissedTickBehavior};

use super::{IndexOp, SearchIndex};

/// Commit at once, without waiting for the interval, when this many changes are waiting.
const MAX_BATCH: usize = 10_000;

/// Close the writer once nothing has been written for this long (its memory and threads are
/// not needed by a quiet server); the next change opens it again.
const RELEASE_WRITER_AFTER: Duration = Duration::from_secs(30);

/// The queue's name in the metrics.
const QUEUE: &str = "search_indexer";

enum Msg {
    Op(u64, IndexOp),
    Flush(oneshot::Sender<()>),
}

/// The sending side of the indexer task; cheap to clone.
#[derive(Clone, Debug)]
pub struct Indexer {
    tx: mpsc::UnboundedSender<Msg>,
}

impl Indexer {
    /// Starts the task (on the current Tokio runtime). It commits what it has about every
    /// `interval`, and at once when 10,000 changes are waiting or on [`Indexer::flush`].
    ///
    /// After each successful commit it calls `on_commit` with the highest sequence number
    /// committed so far, so the caller can persist a watermark: everything sent up to then is in
    /// the index. `on_commit` runs on the task and must be quick (spawn any I/O). A failed
    /// commit is retried at the next tick, before anything newer, and the watermark waits for
    /// it. The task ends when every `Indexer` clone is dropped, after committing what is left.
    pub fn spawn(
        index: SearchIndex,
        interval: Duration,
        on_commit: impl Fn(u64) + Send + Sync + 'static,
    ) -> Indexer {
        Self::spawn_releasing_after(index, interval, RELEASE_WRITER_AFTER, on_commit)
    }

    /// [`Indexer::spawn`], closing the index's writer once nothing was committed for
    /// `release_after` (checked on the interval).
    fn spawn_releasing_after(
        index: SearchIndex,
        interval: Duration,
        release_after: Duration,
        on_commit: impl Fn(u64) + Send + Sync + 'static,
    ) -> Indexer {
        let (tx, rx) = mpsc::unbounded_channel();
        tokio::spawn(run(Task::new(index, Arc::new(on_commit)), interval, release_after, rx));
        Indexer { tx }
    }

    /// Queues a change; never blocks. If the task is gone (the runtime is shutting down) the
    /// change is dropped and logged: the watermark did not pass it, so start-up re-sends it.
    pub fn send(&self, seq: u64, op: IndexOp) {
        if self.tx.send(Msg::Op(seq, op)).is_err() {
            tracing::warn!(seq, "search indexer has stopped; change left for start-up indexing");
            return;
        }
        crate::metrics::queued(QUEUE);
    }

    /// Waits until everything sent before it has been committed (or its commit has failed and
    /// was logged); returns at once if the task is gone.
    pub async fn flush(&self) {
        let (tx, rx) = oneshot::channel();
        if self.tx.send(Msg::Flush(tx)).is_ok() {
            // An error only means the task ended, which also ends the wait.
            let _ = rx.await;
        }
    }
}

struct Task {
    index: SearchIndex,
    on_commit: Arc<dyn Fn(u64) + Send + Sync>,
    pending: Vec<IndexOp>,
    /// Highest sequence number in `pending`.
    pending_seq: Option<u64>,
    /// Highest sequence number committed.
    committed: Option<u64>,
    /// The last commit failed: wait for the next tick (or a flush) before trying again.
    failing: bool,
    /// A batch was lost (its commit panicked): the watermark must not move past it.
    lost: bool,
    waiters: Vec<oneshot::Sender<()>>,
    /// When the last commit was made, while the writer it used may still be open.
    committed_at: Option<Instant>,
}

impl Task {
    fn new(index: SearchIndex, on_commit: Arc<dyn Fn(u64) + Send + Sync>) -> Task {
        Task {
            index,
            on_commit,
            pending: Vec::new(),
            pending_seq: None,
            committed: None,
            failing: false,
            lost: false,
            waiters: Vec::new(),
            committed_at: None,
        }
    }

    /// Takes one message; `true` if it asks for a commit now.
    fn take(&mut self, msg: Msg) -> bool {
        match msg {
            Msg::Op(seq, op) => {
                crate::metrics::dequeued(QUEUE, 1);
                self.pending.push(op);
                self.pending_seq = Some(self.pending_seq.map_or(seq, |s| s.max(seq)));
                false
            }
            Msg::Flush(w) => {
                self.waiters.push(w);
                true
            }
        }
    }

    async fn commit(&mut self) {
        if !self.pending.is_empty() {
            self.commit_pending().await;
        }
        for w in self.waiters.drain(..) {
            // The waiter may have given up; nothing to do then.
            let _ = w.send(());
        }
    }

    /// Closes the writer if nothing was committed for `after`.
    async fn release_if_quiet(&mut self, after: Duration) {
        if self.committed_at.is_none_or(|at| at.elapsed() < after) {
            return;
        }
        self.committed_at = None;
        let index = self.index.clone();
        // It waits for the writer's merges to end.
        match tokio::task::spawn_blocking(move || index.release_writer()).await {
            Ok(Ok(_)) => {}
            Ok(Err(e)) => tracing::warn!(error = %e, "closing the quiet search index writer failed"),
            Err(e) => tracing::warn!(error = %e, "closing the quiet search index writer panicked"),
        }
    }

    async fn commit_pending(&mut self) {
        let ops = std::mem::take(&mut self.pending);
        let count = ops.len();
        let index = self.index.clone();
        // Commits write and fsync files: keep them off the async workers.
        let done = tokio::task::spawn_blocking(move || {
            let result = index.apply_ops(&ops);
            (ops, result)
        })
        .await;
        match done {
            Ok((_, Ok(()))) => {
                self.failing = false;
                self.committed_at = Some(Instant::now());
                if let Some(seq) = self.pending_seq.take() {
                    let committed = self.committed.map_or(seq, |c| c.max(seq));
                    self.committed = Some(committed);
                    if !self.lost {
                        (self.on_commit)(committed);
                    }
                }
            }
            Ok((ops, Err(e))) => {
                tracing::error!(error = %e, ops = count, "search index commit failed; will retry");
                // Nothing newer was taken while the commit ran, so order is kept.
                self.pending = ops;
                self.failing = true;
            }
            Err(e) => {
                tracing::error!(
                    error = %e,
                    ops = count,
                    "search index commit panicked; the watermark stays put until restart"
                );
                self.pending_seq = None;
                self.lost = true;
            }
        }
    }
}

async fn run(
    mut task: Task,
    interval: Duration,
    release_after: Duration,
    mut rx: mpsc::UnboundedReceiver<Msg>,
) {
    // Tokio panics on a zero period.
    let interval = interval.max(Duration::from_millis(1));
    // Not `interval()`: its first tick is immediate, which would commit a burst early.
    let mut ticker = tokio::time::interval_at(tokio::time::Instant::now() + interval, interval);
    ticker.set_missed_tick_behavior(MissedTickBehavior::Delay);
    loop {
        tokio::select! {
            msg = rx.recv() => {
                let Some(msg) = msg else { break };
                let mut now = task.take(msg);
                // Take what is already queued without waiting, so a burst becomes one batch.
                while task.pending.len() < MAX_BATCH {
                    match rx.try_recv() {
                        Ok(msg) => now |= task.take(msg),
                        Err(_) => break,
                    }
                }
                if now || (!task.failing && task.pending.len() >= MAX_BATCH) {
                    task.commit().await;
                }
            }
            _ = ticker.tick() => {
                if task.pending.is_empty() {
                    task.release_if_quiet(release_after).await;
                } else {
                    task.commit().await;
                }
            }
        }
    }
    // Every sender is gone: commit what is left.
    task.commit().await;
}

#[cfg(test)]
mod tests {
    use std::sync::Mutex;

    use chrono::Utc;
    use uuid::Uuid;

    use super::*;
    use crate::index::{IndexDoc, SearchQuery};

    fn doc(user: Uuid, text: &str) -> IndexDoc {
        IndexDoc {
            message_id: Uuid::now_v7(),
            user_id: user,
            workspace_id: Uuid::nil(),
            session_id: Uuid::nil(),
            role: "user".into(),
            created_at: Utc::now(),
            has_attachment: false,
            text: text.into(),
            session_title: String::new(),
        }
    }

    fn recorder() -> (Arc<Mutex<Vec<u64>>>, impl Fn(u64) + Send + Sync + 'static) {
        let seen = Arc::new(Mutex::new(Vec::new()));
        let s = seen.clone();
        (seen, move |seq| s.lock().unwrap().push(seq))
    }

    fn hits(index: &SearchIndex, user: Uuid, q: &str) -> usize {
        index.search(user, &SearchQuery::parse(q, None).unwrap(), 0, 10).unwrap().total
    }

    #[tokio::test]
    async fn flush_makes_ops_visible_and_reports_the_last_seq() {
        let index = SearchIndex::open_in_ram().unwrap();
        let (seen, on_commit) = recorder();
        // A long interval: only the flush can commit.
        let indexer = Indexer::spawn(index.clone(), Duration::from_secs(3600), on_commit);
        let user = Uuid::new_v4();
        let d = doc(user, "the quick brown fox");
        indexer.send(1, IndexOp::Upsert(d.clone()));
        indexer.send(2, IndexOp::Upsert(doc(user, "lazy dog")));
        indexer.send(3, IndexOp::DeleteMessage(d.message_id));
        indexer.flush().await;
        assert_eq!(hits(&index, user, "fox"), 0);
        assert_eq!(hits(&index, user, "dog"), 1);
        assert_eq!(*seen.lock().unwrap(), [3]);
        // A flush with nothing pending returns and commits nothing.
        indexer.flush().await;
        assert_eq!(*seen.lock().unwrap(), [3]);
    }

    #[tokio::test]
    async fn commits_on_the_interval_across_several_batches() {
        let index = SearchIndex::open_in_ram().unwrap();
        let (seen, on_commit) = recorder();
        let indexer = Indexer::spawn(index.clone(), Duration::from_millis(20), on_commit);
        let user = Uuid::new_v4();
        let mut seq = 0;
        for _wave in 0..3 {
            for _ in 0..50 {
                seq += 1;
                indexer.send(seq, IndexOp::Upsert(doc(user, "wave")));
            }
            // Without a flush: the interval commits.
            let deadline = tokio::time::Instant::now() + Duration::from_secs(20);
            while seen.lock().unwrap().last() != Some(&seq) {
                assert!(tokio::time::Instant::now() < deadline, "no commit on the interval");
                tokio::time::sleep(Duration::from_millis(10)).await;
            }
        }
        assert_eq!(hits(&index, user, "wave"), 150);
        let seen = seen.lock().unwrap().clone();
        assert!(seen.len() >= 3, "{seen:?}");
        assert!(seen.windows(2).all(|w| w[0] < w[1]), "{seen:?}");
        assert_eq!(seen.last(), Some(&150));
    }

    #[tokio::test]
    async fn a_full_batch_commits_without_waiting() {
        let index = SearchIndex::open_in_ram().unwrap();
        let (seen, on_commit) = recorder();
        let indexer = Indexer::spawn(index.clone(), Duration::from_secs(3600), on_commit);
        let user = Uuid::new_v4();
        let total = MAX_BATCH as u64 + 500;
        for seq in 1..=total {
            indexer.send(seq, IndexOp::Upsert(doc(user, "bulk")));
        }
        let deadline = tokio::time::Instant::now() + Duration::from_secs(120);
        while seen.lock().unwrap().is_empty() {
            assert!(tokio::time::Instant::now() < deadline, "no commit for a full batch");
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
        assert_eq!(*seen.lock().unwrap(), [MAX_BATCH as u64]);
        assert_eq!(index.num_docs(), MAX_BATCH as u64);
        indexer.flush().await;
        assert_eq!(*seen.lock().unwrap(), [MAX_BATCH as u64, total]);
        assert_eq!(index.num_docs(), total);
    }

    #[tokio::test]
    async fn dropping_every_sender_commits_what_is_left() {
        let index = SearchIndex::open_in_ram().unwrap();
        let (seen, on_commit) = recorder();
        let indexer = Indexer::spawn(index.clone(), Duration::from_secs(3600), on_commit);
        indexer.send(7, IndexOp::Upsert(doc(Uuid::new_v4(), "last words")));
        drop(indexer);
        let deadline = tokio::time::Instant::now() + Duration::from_secs(20);
        while seen.lock().unwrap().is_empty() {
            assert!(tokio::time::Instant::now() < deadline);
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
        assert_eq!(*seen.lock().unwrap(), [7]);
        assert_eq!(index.num_docs(), 1);
    }

    #[tokio::test]
    async fn a_quiet_index_closes_its_writer_and_the_next_change_opens_it_again() {
        let index = SearchIndex::open_in_ram().unwrap();
        let (seen, on_commit) = recorder();
        let indexer = Indexer::spawn_releasing_after(
            index.clone(),
            Duration::from_millis(10),
            Duration::from_millis(200),
            on_commit,
        );
        let user = Uuid::new_v4();
        assert!(!index.has_writer(), "no writer before the first change");
        indexer.send(1, IndexOp::Upsert(doc(user, "first")));
        indexer.flush().await;
        assert!(index.has_writer());
        let deadline = tokio::time::Instant::now() + Duration::from_secs(20);
        while index.has_writer() {
            assert!(tokio::time::Instant::now() < deadline, "the quiet writer was not closed");
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
        indexer.send(2, IndexOp::Upsert(doc(user, "first again")));
        indexer.flush().await;
        assert_eq!(hits(&index, user, "first"), 2);
        assert_eq!(*seen.lock().unwrap(), [1, 2]);
    }

    #[test]
    fn sending_after_the_task_ended_does_not_panic() {
        let index = SearchIndex::open_in_ram().unwrap();
        let rt = tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap();
        let indexer = rt.block_on(async { Indexer::spawn(index.clone(), Duration::from_millis(10), |_| {}) });
        // Shutting the runtime down ends the task, as at process exit.
        drop(rt);
        indexer.send(1, IndexOp::DeleteUser(Uuid::new_v4()));
        let rt = tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap();
        rt.block_on(indexer.flush());
        assert_eq!(index.num_docs(), 0);
    }
}
