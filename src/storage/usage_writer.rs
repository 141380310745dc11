//! Usage rows of API calls, written in batches by one task: a call's response never waits for
//! a commit (with `synchronous=FULL` on SQLite each commit is an fsync), and under load one
//! transaction carries many rows instead of each taking a pool connection of its own.
//!
//! The task gathers for [`GATHER`] after the first row before it writes. Without the wait, the
//! commit of a call that just ended ran at the very moment the same client's next call
//! arrived, on the same core, and sat in that call's time to first token (BENCHMARKS,
//! "Performance work", step 27). A shutdown waits for what is queued ([`UsageWriter::flush`]).

use std::time::Duration;

use sea_orm::EntityTrait;
use tokio::sync::{mpsc, oneshot};

use super::Db;
use super::entities::usage;
use super::repos::messages::{UsageRow, usage_model};

/// The queue's name in the metrics.
const QUEUE: &str = "usage_writer";

/// Rows per transaction at most.
const BATCH: usize = 500;

/// How long the first row of a batch waits for others before the batch is written.
const GATHER: Duration = Duration::from_millis(100);

/// A row, and what is kept alive until it is written (a quota hold: the row's spending counts
/// from then on, so the hold must not go before it).
type Queued = (usage::ActiveModel, Option<Box<dyn Send>>);

/// What the writer task is handed. Rows go unboxed, as before there were flushes: a box would
/// be one more allocation a call, and a flush is once a process.
#[allow(clippy::large_enum_variant)]
enum Note {
    Row(Queued),
    /// Write what is queued now, then answer.
    Flush(oneshot::Sender<()>),
}

/// Hands usage rows to the writer task.
#[derive(Clone)]
pub struct UsageWriter {
    tx: mpsc::UnboundedSender<Note>,
}

impl UsageWriter {
    /// Starts the writer task on the current runtime.
    pub fn start(db: Db) -> UsageWriter {
        UsageWriter::start_gathering(db, GATHER)
    }

    fn start_gathering(db: Db, gather: Duration) -> UsageWriter {
        let (tx, mut rx) = mpsc::unbounded_channel::<Note>();
        tokio::spawn(async move {
            while let Some(note) = rx.recv().await {
                let first = match note {
                    Note::Row(row) => row,
                    Note::Flush(done) => {
                        let _ = done.send(());
                        continue;
                    }
                };
                let (batch, flushed) = gather_batch(&mut rx, first, gather).await;
                write_batch(&db, batch).await;
                for done in flushed {
                    let _ = done.send(());
                }
            }
        });
        UsageWriter { tx }
    }

    /// Waits until every row queued before this call is written (or could not be).
    pub async fn flush(&self) {
        let (done, written) = oneshot::channel();
        if self.tx.send(Note::Flush(done)).is_ok() {
            let _ = written.await;
        }
    }

    /// Queues a row (stamped now); written within moments.
    pub fn write(&self, row: &UsageRow<'_>) {
        self.queue((usage_model(row), None));
    }

    /// Queues a row and keeps `keep` alive until the row is written.
    pub fn write_keeping(&self, row: &UsageRow<'_>, keep: impl Send + 'static) {
        self.queue((usage_model(row), Some(Box::new(keep))));
    }

    fn queue(&self, queued: Queued) {
        if self.tx.send(Note::Row(queued)).is_err() {
            tracing::error!("the usage writer has stopped; a usage row was dropped");
            return;
        }
        crate::metrics::queued(QUEUE);
    }
}

/// The rows that arrive within `gather` of `first` (at most [`BATCH`]), and the flushes asked
/// for meanwhile (a flush ends the wait).
async fn gather_batch(
    rx: &mut mpsc::UnboundedReceiver<Note>,
    first: Queued,
    gather: Duration,
) -> (Vec<Queued>, Vec<oneshot::Sender<()>>) {
    let mut batch = vec![first];
    let mut flushed = Vec::new();
    let deadline = tokio::time::sleep(gather);
    tokio::pin!(deadline);
    while batch.len() < BATCH {
        tokio::select! {
            biased;
            note = rx.recv() => match note {
                Some(Note::Row(row)) => batch.push(row),
                Some(Note::Flush(done)) => {
                    flushed.push(done);
                    break;
                }
                None => break,
            },
            () = &mut deadline => break,
        }
    }
    (batch, flushed)
}

async fn write_batch(db: &Db, batch: Vec<Queued>) {
    let n = batch.len();
    crate::metrics::dequeued(QUEUE, n);
    let (rows, kept): (Vec<_>, Vec<_>) = batch.into_iter().unzip();
    let written = insert_in_one_commit(db, rows).await;
    drop(kept);
    if let Err(e) = written {
        tracing::error!(rows = n, error = %e, "usage rows could not be written");
    }
}

/// One transaction of `INSERT`s of 64, 32, ... 1 rows: every statement's text is one of seven
/// however many rows gathered, so the connections' statement caches stay small (one `INSERT`
/// of all the rows made a new statement for every batch size, a few MB under load).
async fn insert_in_one_commit(db: &Db, mut rows: Vec<usage::ActiveModel>) -> Result<(), sea_orm::DbErr> {
    use sea_orm::TransactionTrait;
    let txn = db.begin().await?;
    while !rows.is_empty() {
        let take = chunk_len(rows.len());
        let rest = rows.split_off(take);
        usage::Entity::insert_many(std::mem::replace(&mut rows, rest)).exec(&txn).await?;
    }
    txn.commit().await
}

/// The largest power of two up to 64 that is at most `left` (which is more than zero).
fn chunk_len(left: usize) -> usize {
    let most = left.min(64);
    1 << most.ilog2()
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use sea_orm::{EntityTrait, PaginatorTrait};
    use uuid::Uuid;

    use super::{UsageWriter, chunk_len};
    use crate::model::messages::MessageUsage;
    use crate::storage::entities::usage;
    use crate::storage::repos::messages::UsageRow;

    #[tokio::test]
    async fn a_flush_writes_the_gathering_rows_without_waiting_out_the_gather() {
        let mut opts = sea_orm::ConnectOptions::new("sqlite::memory:");
        opts.max_connections(1).min_connections(1).sqlx_logging(false);
        let db = sea_orm::Database::connect(opts).await.unwrap();
        crate::storage::migrate_up(&db).await.unwrap();
        // The rows name no real person: this test is about when they are written.
        sea_orm::ConnectionTrait::execute_unprepared(&db, "PRAGMA foreign_keys = OFF").await.unwrap();
        let writer = UsageWriter::start_gathering(db.clone(), Duration::from_secs(3600));
        let row = UsageRow {
            user_id: Uuid::now_v7(),
            session_id: None,
            message_id: None,
            provider: "mock",
            model: "m",
            usage: MessageUsage { output: 3, ..MessageUsage::default() },
            latency_ms: 1,
            via: "api",
        };
        for _ in 0..70 {
            writer.write(&row);
        }
        // An hour's gather would still be running: the flush must end it.
        tokio::time::timeout(Duration::from_secs(30), writer.flush()).await.expect("flushed at once");
        assert_eq!(usage::Entity::find().count(&db).await.unwrap(), 70, "64 + 4 + 2 rows, one commit");
        // A flush with nothing queued answers too.
        tokio::time::timeout(Duration::from_secs(30), writer.flush()).await.expect("nothing to flush");
    }

    #[test]
    fn rows_are_written_in_chunks_of_seven_sizes_at_most() {
        let mut sizes = std::collections::BTreeSet::new();
        for batch in 1..=super::BATCH {
            let mut left = batch;
            while left > 0 {
                let take = chunk_len(left);
                assert!(take >= 1 && take <= left);
                sizes.insert(take);
                left -= take;
            }
        }
        assert_eq!(sizes.into_iter().collect::<Vec<_>>(), [1, 2, 4, 8, 16, 32, 64]);
    }
}
