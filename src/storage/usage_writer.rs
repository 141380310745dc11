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

/// Hands usage rows to the writer task.
#[derive(Clone)]
pub struct UsageWriter {
    tx: mpsc::UnboundedSender<usage::ActiveModel>,
}

impl UsageWriter {
    /// Starts the writer task on the current runtime.
    pub fn start(db: Db) -> UsageWriter {
        let (tx, mut rx) = mpsc::unbounded_channel::<usage::ActiveModel>();
        tokio::spawn(async move {
            while let Some(first) = rx.recv().await {
                let mut batch = vec![first];
                while batch.len() < BATCH {
                    match rx.try_recv() {
                        Ok(row) => batch.push(row),
                        Err(_) => break,
                    }
                }
                let n = batch.len();
                crate::metrics::dequeued(QUEUE, n);
                if let Err(e) = usage::Entity::insert_many(batch).exec(&db).await {
                    tracing::error!(rows = n, error = %e, "usage rows could not be written");
                }
            }
        });
        UsageWriter { tx }
    }

    /// Queues a row (stamped now); written within moments.
    pub fn write(&self, row: &UsageRow<'_>) {
        if self.tx.send(usage_model(row)).is_err() {
            tracing::error!("the usage writer has stopped; a usage row was dropped");
            return;
        }
        crate::metrics::queued(QUEUE);
    }
}
