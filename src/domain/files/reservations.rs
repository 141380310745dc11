//! Storage quota reservations: bytes promised to uploads still being processed count against
//! the member's quota with the bytes already stored, so parallel uploads cannot overspend it
//! together (SECURITY.md 54). With several instances the reservations are held in Redis, and
//! each check-and-reserve (and each give-back) holds a per-member lock there, so uploads to
//! different instances cannot overspend it together either.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use uuid::Uuid;

use crate::domain::{DomainError, DomainResult};
use crate::storage::Db;
use crate::storage::repos::files as repo;

use super::readable_size;

/// Bytes reserved per member. Cheap to clone; clones share the reservations.
#[derive(Debug, Clone, Default)]
pub struct Reservations {
    /// Held while a check reads the stored bytes and reserves, and while a finished upload gives
    /// its reservation back (after its row is stored), so no check sees neither.
    order: Arc<tokio::sync::Mutex<()>>,
    held: Arc<Mutex<HashMap<Uuid, u64>>>,
    shared: Option<Shared>,
}

/// The counters the instances share (none alone).
#[derive(Clone)]
struct Shared(crate::bus::limits::SharedCounters);

impl std::fmt::Debug for Shared {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Shared")
    }
}

/// How long a reservation may stay in Redis if its instance dies before giving it back.
const SHARED_HOLD: std::time::Duration = std::time::Duration::from_secs(3600);
/// How long a check waits for another instance's check of the same member.
const LOCK_WAIT: std::time::Duration = std::time::Duration::from_secs(10);

/// Bytes reserved for one upload; given back when released or dropped.
#[derive(Debug)]
pub struct Reservation {
    reservations: Reservations,
    member: Uuid,
    bytes: u64,
    released: bool,
    /// Held in Redis rather than in this process.
    shared: bool,
}

fn over_quota(quota: u64) -> DomainError {
    DomainError::Invalid(format!(
        "Your files would take more than {}, your storage limit: remove some first.",
        readable_size(i64::try_from(quota).unwrap_or(i64::MAX))
    ))
}

impl Shared {
    fn held_key(&self, member: Uuid) -> String {
        self.0.key(&format!("quota-held:{member}"))
    }

    async fn lock(
        &self,
        member: Uuid,
    ) -> Result<crate::bus::limits::SharedLock, crate::bus::limits::CounterError> {
        self.0.lock(&self.0.key(&format!("quota-lock:{member}")), LOCK_WAIT, LOCK_WAIT).await
    }

    /// Reserves in Redis: the inner result refuses what does not fit; the outer says Redis failed.
    async fn reserve(
        &self,
        db: &Db,
        member: Uuid,
        bytes: u64,
        quota: u64,
    ) -> Result<DomainResult<()>, crate::bus::limits::CounterError> {
        let lock = self.lock(member).await?;
        let outcome = async {
            let used = match repo::user_bytes(db, member).await {
                Ok(n) => u64::try_from(n).unwrap_or(0),
                Err(e) => return Ok(Err(e.into())),
            };
            let (pending, _) = self.0.total(&self.held_key(member)).await?;
            if used.saturating_add(pending).saturating_add(bytes) > quota {
                return Ok(Err(over_quota(quota)));
            }
            self.0.add(&self.held_key(member), bytes, SHARED_HOLD).await?;
            Ok(Ok(()))
        }
        .await;
        self.0.unlock(lock).await;
        outcome
    }

    async fn give_back(&self, member: Uuid, bytes: u64) {
        let lock = self.lock(member).await;
        if let Err(e) = self.0.sub(&self.held_key(member), bytes).await {
            tracing::warn!(error = %e, "an upload's reservation was not given back in Redis; it expires within the hour");
        }
        if let Ok(lock) = lock {
            self.0.unlock(lock).await;
        }
    }
}

impl Reservations {
    /// Reservations every instance shares through `counters`.
    pub fn shared(counters: crate::bus::limits::SharedCounters) -> Reservations {
        Reservations { shared: Some(Shared(counters)), ..Default::default() }
    }

    fn pending(&self, member: Uuid) -> u64 {
        self.held.lock().unwrap_or_else(|p| p.into_inner()).get(&member).copied().unwrap_or(0)
    }

    /// Whether `bytes` more would fit in the member's quota now (nothing is reserved): for
    /// refusing an upload from its declared length, before its body is read.
    pub async fn check(&self, db: &Db, member: Uuid, bytes: u64, quota: u64) -> DomainResult<()> {
        let used = u64::try_from(repo::user_bytes(db, member).await?).unwrap_or(0);
        if used.saturating_add(self.pending(member)).saturating_add(bytes) > quota {
            return Err(over_quota(quota));
        }
        Ok(())
    }

    /// Reserves `bytes` for the member if they fit with what is stored and reserved already.
    pub async fn reserve(&self, db: &Db, member: Uuid, bytes: u64, quota: u64) -> DomainResult<Reservation> {
        let _order = self.order.lock().await;
        if let Some(shared) = &self.shared {
            match shared.reserve(db, member, bytes, quota).await {
                Ok(fits) => {
                    fits?;
                    return Ok(Reservation {
                        reservations: self.clone(),
                        member,
                        bytes,
                        released: false,
                        shared: true,
                    });
                }
                Err(e) => {
                    tracing::warn!(error = %e, "upload reservations are held in this instance until Redis is back")
                }
            }
        }
        let used = u64::try_from(repo::user_bytes(db, member).await?).unwrap_or(0);
        let mut held = self.held.lock().unwrap_or_else(|p| p.into_inner());
        let pending = held.get(&member).copied().unwrap_or(0);
        if used.saturating_add(pending).saturating_add(bytes) > quota {
            return Err(over_quota(quota));
        }
        *held.entry(member).or_insert(0) += bytes;
        Ok(Reservation { reservations: self.clone(), member, bytes, released: false, shared: false })
    }
}

impl Reservation {
    /// Gives the reservation back once the upload's row is stored (its bytes count from there).
    pub async fn release(mut self) {
        let order = self.reservations.order.clone();
        let _order = order.lock().await;
        if self.shared
            && !self.released
            && let Some(shared) = &self.reservations.shared
        {
            self.released = true;
            shared.give_back(self.member, self.bytes).await;
            return;
        }
        self.give_back();
    }

    fn give_back(&mut self) {
        if self.released {
            return;
        }
        self.released = true;
        if self.shared {
            if let Some(shared) = self.reservations.shared.clone() {
                let (member, bytes) = (self.member, self.bytes);
                tokio::spawn(async move { shared.give_back(member, bytes).await });
            }
            return;
        }
        let mut held = self.reservations.held.lock().unwrap_or_else(|p| p.into_inner());
        if let Some(pending) = held.get_mut(&self.member) {
            *pending = pending.saturating_sub(self.bytes);
            if *pending == 0 {
                held.remove(&self.member);
            }
        }
    }
}

impl Drop for Reservation {
    /// A failed upload stored nothing: its reservation simply goes.
    fn drop(&mut self) {
        self.give_back();
    }
}
