//! The admin-managed providers, read from the database at start and again after every change,
//! on every instance.

use std::sync::Arc;

use super::{ProviderEntry, Providers, managed_entry};
use crate::domain::DomainResult;

impl Providers {
    /// Reads the admin-managed providers and their keys again (after every change), here and
    /// on every other instance.
    pub async fn reload(&self) -> DomainResult<()> {
        self.reload_here().await?;
        self.announce_reload();
        Ok(())
    }

    /// [`Self::reload`], in this instance only.
    pub(crate) async fn reload_here(&self) -> DomainResult<()> {
        let Some(access) = &self.vault else { return Ok(()) };
        let rows = crate::storage::repos::providers::all(&access.db).await?;
        let keys = crate::storage::repos::providers::all_keys(&access.db).await?;
        let entries: Vec<ProviderEntry> = rows
            .into_iter()
            .filter_map(|row| {
                let name = row.name.clone();
                let entry = managed_entry(row, &keys);
                if entry.is_none() {
                    tracing::error!(provider = %name, "stored provider has an unknown kind; skipped");
                }
                entry
            })
            .collect();
        *self.managed.write().unwrap_or_else(|p| p.into_inner()) = Arc::new(entries);
        self.load_overrides(&access.db).await?;
        self.refresh();
        Ok(())
    }
}
