//! The admin console's services: people (list, status, role, deletion with their data) and
//! admin-managed providers with encrypted shared keys. Every call needs an [`Admin`] proof and
//! writes an audit row; none of them returns a key's value.

mod managed_providers;
pub mod model_overrides;
mod people;
pub mod quota_holds;
pub mod quotas;
pub mod usage;

use std::sync::Arc;

use uuid::Uuid;

use crate::domain::DomainResult;
use crate::domain::authz::Admin;
use crate::domain::providers::Providers;
use crate::storage::Db;
use crate::storage::repos::users as users_repo;
use crate::vault::Vault;

pub use crate::model::accounts::UserRow;
pub use managed_providers::{KeyView, NewKey, ProviderForm, ProviderView};
pub use people::{DeletionSummary, USERS_PAGE};

/// The admin console's people and providers: built once in the app state, over the database,
/// the vault (shared keys) and the providers registry (reloaded after every change).
#[derive(Clone)]
pub struct AdminConsole {
    db: Db,
    vault: Vault,
    providers: Arc<Providers>,
}

impl AdminConsole {
    /// The console over these.
    pub fn new(db: Db, vault: Vault, providers: Arc<Providers>) -> AdminConsole {
        AdminConsole { db, vault, providers }
    }

    /// The audit log, newest first: one page of rows matching `filter`, plus whether there are
    /// more.
    pub async fn audit_log(
        &self,
        admin: &Admin,
        filter: &crate::domain::audit::Filter,
        page: u64,
    ) -> DomainResult<(Vec<crate::domain::audit::Entry>, bool)> {
        crate::domain::audit::list(&self.db, admin, filter, page).await
    }
}

impl AdminConsole {
    /// The emails of these users, by id, in one query (for console pages that name people).
    pub async fn user_emails(
        &self,
        admin: &Admin,
        ids: &[Uuid],
    ) -> DomainResult<std::collections::HashMap<Uuid, String>> {
        let db = &self.db;
        let _actor = admin.actor();
        Ok(users_repo::emails_of(db, ids).await?)
    }

    /// The id of the user with this email, if there is one.
    pub async fn user_by_email(&self, admin: &Admin, email: &str) -> DomainResult<Option<Uuid>> {
        let db = &self.db;
        let _actor = admin.actor();
        let Ok(email) = crate::domain::accounts::normalize_email(email) else { return Ok(None) };
        Ok(crate::domain::accounts::one_by_email(db, &email).await?.map(|u| u.id))
    }
}
