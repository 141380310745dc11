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

    /// At shutdown, once the server stopped serving (live runs had its shutdown timeout to
    /// end; the workers' tasks are gone with it): the runs still marked running are marked
    /// interrupted with the text they saved, so nothing is left "streaming" and Continue picks
    /// them up after the restart. One instance owns the database, as at start-up's
    /// [`Self::recover`]. Returns how many.
    pub async fn interrupt_for_shutdown(&self) -> DomainResult<u64> {
        Ok(repo::interrupt_orphans(&self.db).await?)
    }
}
