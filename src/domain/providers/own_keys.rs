//! Members' own provider keys (their labels and providers, never their values) as last listed:
//! every call reads them before it asks a provider, so they are kept in memory while the vault
//! has not been written by this process since; past [`AGE`] (how long a key added or removed on
//! another instance takes to count here, plus the one call that finds the list aged) the list
//! is read again beside the call. A listed key that is gone is refused when its value is
//! revealed.

use std::sync::Arc;
use std::time::Duration;

use uuid::Uuid;

use crate::domain::fresh::FreshCopies;
use crate::storage::Db;
use crate::vault::Vault;
use crate::vault::store::{SecretKind, SecretMeta, StoreError};

/// How long a list is used when this process has not written the vault since.
const AGE: Duration = Duration::from_secs(2);
/// Members whose lists are kept at most (beyond: all are dropped and read again).
const MEMBERS: usize = 10_000;

/// The lists of the members who called lately.
pub(super) struct OwnKeys(Arc<FreshCopies<Uuid, Vec<SecretMeta>>>);

impl Default for OwnKeys {
    fn default() -> Self {
        OwnKeys(Arc::new(FreshCopies::new(AGE, MEMBERS)))
    }
}

impl OwnKeys {
    /// The member's own provider keys, newest first.
    pub(super) async fn of(&self, db: &Db, member: Uuid) -> Result<Vec<SecretMeta>, StoreError> {
        let generation = crate::vault::store::generation();
        let read = || {
            let db = db.clone();
            async move { Vault::list_secrets(&db, member, SecretKind::ProviderKey).await }
        };
        self.0.get_or_refresh(member, generation, read).await
    }
}
