//! Announcements that access may have changed (a share revoked, a group changed, someone
//! deactivated), so that live streams of people who lost access end at once.

use uuid::Uuid;

use crate::domain::DomainError;
use crate::domain::authz::Actor;
use crate::domain::sessions::access::{ShareRole, workspace_as};
use crate::storage::Db;

/// Tells live streams that access to a workspace may have changed: a revoked share names the
/// workspace; a change to groups or accounts, which can touch any workspace, names none
/// (`Uuid::nil()`). Streams of people who lost access end; the rest go on. With several
/// instances the bus carries each announcement to the others' streams too.
#[derive(Clone)]
pub struct AccessChanges(tokio::sync::broadcast::Sender<Uuid>, Option<crate::bus::SharedBus>);

impl Default for AccessChanges {
    fn default() -> Self {
        AccessChanges(tokio::sync::broadcast::channel(256).0, None)
    }
}

impl AccessChanges {
    /// Announcements that reach every instance on `bus` (alone: as [`Default`]).
    pub fn linked(bus: crate::bus::SharedBus) -> AccessChanges {
        let mut changes = AccessChanges::default();
        if !bus.is_shared() {
            return changes;
        }
        let local = changes.0.clone();
        crate::bus::listen(&bus, crate::bus::Topic::Access, move |heard| {
            let workspace = match heard {
                crate::bus::Heard::Frame(f) => Uuid::from_slice(&f.body).ok(),
                // Missed some (or Redis was away): any workspace may have changed.
                crate::bus::Heard::Gap => Some(Uuid::nil()),
            };
            if let Some(id) = workspace {
                let _ = local.send(id);
            }
            std::future::ready(())
        });
        changes.1 = Some(bus);
        changes
    }

    /// Announces a change to one workspace (or, with `Uuid::nil()`, to any).
    pub fn announce(&self, workspace_id: Uuid) {
        // Nobody listening is fine: no stream is open.
        let _ = self.0.send(workspace_id);
        if let Some(bus) = &self.1 {
            bus.publish(crate::bus::Topic::Access, bytes::Bytes::copy_from_slice(workspace_id.as_bytes()));
        }
    }

    /// Resolves when the actor can no longer view the workspace; never for its owner.
    pub async fn lost(&self, db: &Db, actor: &Actor, workspace_id: Uuid) {
        let mut changes = self.0.subscribe();
        loop {
            match changes.recv().await {
                Ok(id) if id == workspace_id || id.is_nil() => {}
                Ok(_) => continue,
                // Missed some announcements: check anyway.
                Err(tokio::sync::broadcast::error::RecvError::Lagged(_)) => {}
                Err(tokio::sync::broadcast::error::RecvError::Closed) => return std::future::pending().await,
            }
            if matches!(
                workspace_as(db, actor, workspace_id, ShareRole::Viewer).await,
                Err(DomainError::NotFound)
            ) {
                return;
            }
        }
    }
}
