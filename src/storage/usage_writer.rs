//! Usage rows of API calls, written in batches by one task: a call's response never waits for
//! a commit (with `synchronous=FULL` on SQLite each commit is an fsync), and under load one
//! transaction carries many rows instead of each taking a pool connection of its own.
//!
//! The task gathers for [`GATHER`] after the first row before it writes. Without the wait, the
//! commit of a call that just ended ran at the very moment the same client's next call
//! arrived, on the same core, and sat in that call's time to first token (BENCHMARKS,
//! "Performance work", step 27). A shutdown waits for what is queued ([`UsageWriter::flush`]).
//!
//! A batch that cannot be written is tried again ([`super::retry`]): its rows are the spending
//! that quotas and the admin console count, so a moment's database trouble must not lose them.
//! A row whose user was deleted since the call would make the whole batch fail on its foreign
//! key; it is kept without its user, as deleting a user does to the rows already written.

use std::collections::HashSet;
use std::time::Duration;

use sea_orm::{ActiveValue, ColumnTrait, EntityTrait, QueryFilter, QuerySelect, SqlErr};
use tokio::sync::{mpsc, oneshot};
use uuid::Uuid;

use super::Db;
use super::entities::{usage, user};
use super::repos::messages::{UsageRow, usage_model};
use super::retry::Backoff;

/// The queue's name in the metrics.
const QUEUE: &str = "usage_writer";

/// The write's name in the metrics of failed writes.
const QUEUE_WRITE: &str = "usage";

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

/// Writes `batch` in one commit, tried again after a failure; the quota holds it carries go
/// when the rows are written or given up.
async fn write_batch(db: &Db, batch: Vec<Queued>) {
    let n = batch.len();
    crate::metrics::dequeued(QUEUE, n);
    let (mut rows, kept): (Vec<_>, Vec<_>) = batch.into_iter().unzip();
    let mut backoff = Backoff::default();
    loop {
        let Err(e) = insert_in_one_commit(db, &rows).await else { break };
        crate::metrics::write_failed(QUEUE_WRITE);
        let attempt = backoff.attempt();
        if matches!(e.sql_err(), Some(SqlErr::ForeignKeyConstraintViolation(_))) {
            // A user deleted since their call: tried again at once without them.
            match without_deleted_users(db, &mut rows).await {
                Ok(()) if backoff.next_at_once() => continue,
                Ok(()) => {}
                Err(lookup) => tracing::warn!(error = %lookup, "usage rows: could not look up their users"),
            }
        }
        tracing::warn!(rows = n, attempt, error = %e, "usage rows could not be written");
        if !super::retry::may_pass_again(&e) || !backoff.wait_for_next().await {
            tracing::error!(rows = n, attempts = attempt, "usage rows given up and lost");
            break;
        }
    }
    drop(kept);
}

/// Clears the user of every row whose user no longer exists, as `ON DELETE SET NULL` did to
/// their rows already written: the spending still counts in the instance's totals.
async fn without_deleted_users(db: &Db, rows: &mut [usage::ActiveModel]) -> Result<(), sea_orm::DbErr> {
    let named: HashSet<Uuid> = rows.iter().filter_map(row_user).collect();
    let existing: HashSet<Uuid> = user::Entity::find()
        .select_only()
        .column(user::Column::Id)
        .filter(user::Column::Id.is_in(named))
        .into_tuple::<Uuid>()
        .all(db)
        .await?
        .into_iter()
        .collect();
    for row in rows.iter_mut() {
        if row_user(row).is_some_and(|id| !existing.contains(&id)) {
            row.user_id = ActiveValue::Set(None);
        }
    }
    Ok(())
}

fn row_user(row: &usage::ActiveModel) -> Option<Uuid> {
    match &row.user_id {
        ActiveValue::Set(id) | ActiveValue::Unchanged(id) => *id,
        ActiveValue::NotSet => None,
    }
}

/// One transaction of `INSERT`s of 64, 32, ... 1 rows: every statement's text is one of seven
/// however many rows gathered, so the connections' statement caches stay small (one `INSERT`
/// of all the rows made a new statement for every batch size, a few MB under load).
async fn insert_in_one_commit(db: &Db, rows: &[usage::ActiveModel]) -> Result<(), sea_orm::DbErr> {
    let txn = super::begin_write(db).await?;
    let mut rest = rows;
    while !rest.is_empty() {
        let (chunk, left) = rest.split_at(chunk_len(rest.len()));
        usage::Entity::insert_many(chunk.to_vec()).exec(&txn).await?;
        rest = left;
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
