//! Runs a stop left behind: after a crash (at start) and at a graceful shutdown, replies still
//! marked running are marked interrupted with the text they saved.

use super::RunEngine;
use crate::domain::DomainResult;
use crate::storage::repos::messages as repo;

impl RunEngine {
    /// Marks runs a crash left `running` as interrupted; returns how many.
    pub async fn recover(&self) -> DomainResult<u64> {
        Ok(repo::interrupt_orphans(&self.db).await?)
    }

    /// At shutdown, before the server stops serving: every live run is asked to stop and ends
    /// itself as interrupted, with its text, its usage and its end event (so the pages watching
    /// it close their streams); runs begun meanwhile stop at once. Waits at most `within`;
    /// returns how many were live and how many had not ended by then.
    pub async fn stop_for_shutdown(&self, within: std::time::Duration) -> (usize, usize) {
        let live = self.registry.stop_all();
        self.registry.wait_idle(within).await;
        (live, self.registry.len())
    }

    /// At shutdown, once the server stopped serving (the workers' tasks are gone with it): the
    /// runs still marked running (those [`Self::stop_for_shutdown`] could not end in time) are
    /// marked interrupted with the text they saved, so nothing is left "streaming" and Continue
    /// picks them up after the restart. One instance owns the database, as at start-up's
    /// [`Self::recover`]. Returns how many.
    pub async fn interrupt_for_shutdown(&self) -> DomainResult<u64> {
        Ok(repo::interrupt_orphans(&self.db).await?)
    }
}
