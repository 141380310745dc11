//! What the providers registries of several instances tell each other over the bus.

use bytes::Bytes;
use uuid::Uuid;

use crate::bus::{SharedBus, Topic};

/// What the registries of several instances tell each other.
#[derive(Debug, serde::Serialize, serde::Deserialize)]
#[serde(tag = "providers", rename_all = "snake_case")]
pub(super) enum Note {
    /// The admin-managed providers, keys or overrides changed: read them again.
    Reload,
    /// A member's overrides for the models of their key `key` changed: read them again.
    KeyOverrides { key: Uuid },
    /// This shared key was rate-limited: rest it for `ms`.
    KeyRest { key: Uuid, ms: u64 },
}

pub(super) fn announce(bus: &SharedBus, note: &Note) {
    if let Ok(body) = serde_json::to_vec(note) {
        bus.publish(Topic::Caches, Bytes::from(body));
    }
}
