//! Usage rows of API calls, written in batches by one task: a call's response never waits for
//! a commit (with `synchronous=FULL` on SQLite each commit is an fsync), and under load one
//! transaction carries many rows instead of each taking a pool connection of its own.

use sea_orm::EntityTrait;
use tokio::sync::mpsc;

use super::Db;
use super::entities::usage;
use super::repos::messages::{UsageRow, usage_model};

/// The queue's name in the metrics.
const QUEUE: &str = "usage_writer";

/// Rows per transaction at most.
const BATCH: usize = 500;

/// A row, and what is kept alive until it is written (a quota hold: the row's spending counts
/// from then on, so the hold must not go before it).
type Queued = (usage::ActiveModel, Option<Box<dyn Send>>);

/// Hands usage rows to the writer task.
#[derive(Clone)]
pub struct UsageWriter {
    tx: mpsc::UnboundedSender<Queued>,
}

impl UsageWriter {
    /// Starts the writer task on the current runtime.
    pub fn start(db: Db) -> UsageWriter {
        let (tx, mut rx) = mpsc::unbounded_channel::<Queued>();
        tokio::spawn(async move {
            while let Some((first, kept)) = rx.recv().await {
                let mut batch = vec![first];
                let mut kept = vec![kept];
                while batch.len() < BATCH {
                    match rx.try_recv() {
                        Ok((row, keep)) => {
                            batch.push(row);
                            kept.push(keep);
                        }
                        Err(_) => break,
                    }
                }
                let n = batch.len();
                crate::metrics::dequeued(QUEUE, n);
                let written = usage::Entity::insert_many(batch).exec(&db).await;
                drop(kept);
                if let Err(e) = written {
                    tracing::error!(rows = n, error = %e, "usage rows could not be written");
                }
            }
        });
        UsageWriter { tx }
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
        if self.tx.send(queued).is_err() {
            tracing::error!("the usage writer has stopped; a usage row was dropped");
            return;
        }
        crate::metrics::queued(QUEUE);
    }
}
