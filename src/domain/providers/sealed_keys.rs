//! Stored provider keys as last read, still sealed: every call with a member's own key or a
//! shared key needs its secret's row and its owner's data key row, so they are kept in memory
//! while the vault has not been written since (on this instance, or on another that said so),
//! and for [`AGE`] at most. Only ciphertext is kept: the value is decrypted for each call, as
//! before, and each decryption still writes its audit row.
//!
//! Why: the two reads (and the audit row, now written beside the call in `key_pool.rs`) put a
//! call with a stored key behind SQLite's threads before it went out; at 100 concurrent streams
//! its first token's p99 was about three times a configured key's (BENCHMARKS.md,
//! "Performance work", step 11).

use std::sync::Arc;
use std::time::Duration;

use uuid::Uuid;

use crate::domain::fresh::FreshCopies;
use crate::storage::Db;
use crate::vault::Vault;
use crate::vault::store::{Sealed, StoreError};

/// How long a sealed key is used without reading it again. Every write to the vault on this
/// instance or an announcing one drops it at once; the age bounds what a lost note leaves.
const AGE: Duration = Duration::from_secs(10);
/// Keys kept at most (beyond: all are dropped and read again).
const MOST: usize = 10_000;

/// The sealed keys of the calls made lately, by owner and secret id.
pub(crate) struct SealedKeys(FreshCopies<(Uuid, Uuid), Arc<Sealed>>);

impl Default for SealedKeys {
    fn default() -> Self {
        SealedKeys(FreshCopies::new(AGE, MOST))
    }
}

impl SealedKeys {
    /// The sealed key `id` of `owner`.
    pub(crate) async fn of(&self, db: &Db, owner: Uuid, id: Uuid) -> Result<Arc<Sealed>, StoreError> {
        let generation = crate::vault::store::generation();
        self.0
            .get_or_read((owner, id), generation, async || Vault::sealed(db, owner, id).await.map(Arc::new))
            .await
    }
}
