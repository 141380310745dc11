//! What operators read about the running instance: the present state behind `/metrics`.

use crate::events::RunRegistry;
use crate::limits::MemberSlots;
use crate::metrics::Present;
use crate::storage::{self, Db, repos::messages as repo};

use super::DomainResult;

/// Runs by state (from the database, so every instance agrees), this instance's live replies and
/// open event streams, and the database pool's use.
pub async fn present(db: &Db, runs: &RunRegistry, streams: &MemberSlots) -> DomainResult<Present> {
    Ok(Present {
        runs_by_state: repo::count_unfinished_runs(db).await?,
        runs_live: runs.len(),
        sse_connections: streams.total(),
        pool: storage::pool_use(db),
    })
}
