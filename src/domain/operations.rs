//! What operators read about the running instance: whether it is ready, and the present state
//! behind `/metrics`.

use crate::events::RunRegistry;
use crate::limits::MemberSlots;
use crate::metrics::Present;
use crate::storage::{self, Db, repos::messages as repo};

use super::DomainResult;

/// The instance as operators see it, built once in the app state (`state.operations`) over the
/// database, the run registry and the members' event streams.
#[derive(Clone)]
pub struct Operations {
    db: Db,
    runs: RunRegistry,
    streams: MemberSlots,
}

impl Operations {
    /// The probes over these.
    pub fn new(db: Db, runs: RunRegistry, streams: MemberSlots) -> Operations {
        Operations { db, runs, streams }
    }

    /// Whether the database answers and no migration is pending; why not, otherwise.
    pub async fn ready(&self) -> Result<(), String> {
        storage::readiness(&self.db).await.map_err(|e| e.to_string())
    }

    /// Runs by state (from the database, so every instance agrees), this instance's live
    /// replies and open event streams, and the database pool's use.
    pub async fn present(&self) -> DomainResult<Present> {
        // The pool first: just after the count below, its connection is still on its way back
        // (sqlx returns it on a task of its own), and the scrape would see itself as busy.
        let pool = storage::pool_use(&self.db);
        Ok(Present {
            runs_by_state: repo::count_unfinished_runs(&self.db).await?,
            runs_live: self.runs.len(),
            sse_connections: self.streams.total(),
            pool,
        })
    }
}
