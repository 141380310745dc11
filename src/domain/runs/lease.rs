//! Several instances on one database: each holds a lease (a row it renews every third of
//! `bus.lease_secs`), and every run records the instance executing it. When an instance's lease
//! lapses (it died, or paused that long), the first other instance to notice claims it: its
//! running replies are marked interrupted with the text they saved, and their watchers on every
//! instance see them end. An instance that finds its own lease gone stops its runs (another
//! instance already ended them) and takes a fresh lease. Decisions and Continue need no owner:
//! the instance that acts on them runs what follows.

use std::time::Duration;

use chrono::Utc;

use super::RunEngine;
use crate::domain::DomainResult;
use crate::storage::repos::instances::{self as repo, RunsOf};

/// What the watchers of a reply whose instance died read.
const TAKEN_OVER: &str =
    "The server writing this reply stopped. The text so far is kept; Continue picks it up.";

impl RunEngine {
    /// This instance joins the others: it takes its lease, then ends as interrupted the runs no
    /// live instance holds (left by a crash of this or an older instance). Returns how many.
    pub(super) async fn join_instances(&self) -> DomainResult<u64> {
        let me = crate::storage::instance_id();
        repo::register(&self.db, me, env!("CARGO_PKG_VERSION"), Utc::now()).await?;
        let ended = repo::interrupt_runs(&self.db, RunsOf::Unheld).await?;
        Ok(ended.len() as u64)
    }

    /// Renews this instance's lease and takes over lapsed ones, every third of the lease, for as
    /// long as the process runs (alone on the database, there is no lease to keep).
    pub fn keep_lease(&self) {
        let Some(lease) = self.lease else { return };
        let engine = self.clone();
        tokio::spawn(async move {
            let mut tick = tokio::time::interval(lease / 3);
            tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
            loop {
                tick.tick().await;
                if let Err(e) = engine.lease_step(lease).await {
                    tracing::warn!(error = %e, "renewing this instance's lease failed; trying again");
                }
            }
        });
    }

    /// One renewal and one look for lapsed instances.
    pub(super) async fn lease_step(&self, lease: Duration) -> DomainResult<()> {
        let me = crate::storage::instance_id();
        let now = Utc::now();
        if !repo::renew(&self.db, me, now).await? {
            let stopped = self.registry.stop_local();
            tracing::error!(
                stopped,
                "this instance's lease lapsed (a pause longer than bus.lease_secs?) and another \
                 instance ended its replies as interrupted; its own runs stop, and it takes a new lease"
            );
            repo::register(&self.db, me, env!("CARGO_PKG_VERSION"), now).await?;
        }
        let before = now - chrono::Duration::from_std(lease).unwrap_or(chrono::Duration::seconds(6));
        for lapsed in repo::lapsed(&self.db, before).await? {
            if lapsed == me || !repo::claim(&self.db, lapsed, before).await? {
                continue;
            }
            let ended = repo::interrupt_runs(&self.db, RunsOf::Instance(lapsed)).await?;
            tracing::warn!(
                instance = %lapsed,
                interrupted = ended.len(),
                "an instance's lease lapsed: its replies are marked interrupted"
            );
            for (session, run) in ended {
                self.registry.ended_elsewhere(session, run, TAKEN_OVER);
            }
        }
        Ok(())
    }

    /// At shutdown with other instances: this instance's runs still marked running are marked
    /// interrupted, and its lease is given up.
    pub(super) async fn leave_instances(&self) -> DomainResult<u64> {
        let me = crate::storage::instance_id();
        let ended = repo::interrupt_runs(&self.db, RunsOf::Instance(me)).await?;
        repo::remove(&self.db, me).await?;
        Ok(ended.len() as u64)
    }
}
