//! Storage quota reservations: bytes promised to uploads still being processed count against
//! the member's quota with the bytes already stored, so parallel uploads cannot overspend it
//! together (SECURITY.md 54).

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
}

/// Bytes reserved for one upload; given back when released or dropped.
#[derive(Debug)]
pub struct Reservation {
    reservations: Reservations,
    member: Uuid,
    bytes: u64,
    released: bool,
}

fn over_quota(quota: u64) -> DomainError {
    DomainError::Invalid(format!(
        "Your files would take more than {}, your storage limit: remove some first.",
        readable_size(i64::try_from(quota).unwrap_or(i64::MAX))
    ))
}

impl Reservations {
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
        let used = u64::try_from(repo::user_bytes(db, member).await?).unwrap_or(0);
        let mut held = self.held.lock().unwrap_or_else(|p| p.into_inner());
        let pending = held.get(&member).copied().unwrap_or(0);
        if used.saturating_add(pending).saturating_add(bytes) > quota {
            return Err(over_quota(quota));
        }
        *held.entry(member).or_insert(0) += bytes;
        Ok(Reservation { reservations: self.clone(), member, bytes, released: false })
    }
}

impl Reservation {
    /// Gives the reservation back once the upload's row is stored (its bytes count from there).
    pub async fn release(mut self) {
        let order = self.reservations.order.clone();
        let _order = order.lock().await;
        self.give_back();
    }

    fn give_back(&mut self) {
        if self.released {
            return;
        }
        self.released = true;
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
