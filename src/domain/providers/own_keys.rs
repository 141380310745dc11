//! Members' own provider keys (their labels and providers, never their values) as last listed:
//! every call reads them before it asks a provider, so they are kept in memory while the vault
//! has not been written by this process since, and for [`AGE`] at most (how long a key added or
//! removed on another instance takes to count here; a listed key that is gone is refused when
//! its value is revealed).

use std::collections::HashMap;
use std::sync::Mutex;
use std::time::{Duration, Instant};

use uuid::Uuid;

use crate::storage::Db;
use crate::vault::Vault;
use crate::vault::store::{SecretKind, SecretMeta, StoreError};

/// How long a list is used when this process has not written the vault since.
const AGE: Duration = Duration::from_secs(2);
/// Members whose lists are kept at most (beyond: all are dropped and read again).
const MEMBERS: usize = 10_000;

/// One member's list, with the vault's generation and the time when it was read.
struct Listed {
    generation: u64,
    read_at: Instant,
    keys: Vec<SecretMeta>,
}

/// The lists of the members who called lately.
#[derive(Default)]
pub(super) struct OwnKeys(Mutex<HashMap<Uuid, Listed>>);

impl OwnKeys {
    /// The member's own provider keys, newest first.
    pub(super) async fn of(&self, db: &Db, member: Uuid) -> Result<Vec<SecretMeta>, StoreError> {
        let generation = crate::vault::store::generation();
        {
            let lists = self.0.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
            if let Some(listed) = lists.get(&member)
                && listed.generation == generation
                && listed.read_at.elapsed() < AGE
            {
                return Ok(listed.keys.clone());
            }
        }
        let keys = Vault::list_secrets(db, member, SecretKind::ProviderKey).await?;
        let mut lists = self.0.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
        if lists.len() >= MEMBERS {
            lists.clear();
        }
        lists.insert(member, Listed { generation, read_at: Instant::now(), keys: keys.clone() });
        Ok(keys)
    }
}
