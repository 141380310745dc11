//! The providers registry with several instances: an admin's change reloads the registry on
//! every instance, a key that one instance saw rate-limited (429) rests on all of them, and the
//! per-member request and token limits are counted in Redis, once for all.

use std::sync::Arc;
use std::time::{Duration, Instant};

use super::Providers;
use super::key_pool::{KeyHealth, RateLimits};
use super::notes::{Note, announce};
use crate::bus::limits::SharedCounters;
use crate::bus::{Heard, SharedBus, Topic};

impl Providers {
    /// Shares limits, cooldowns and reloads with the other instances.
    pub fn with_instances(mut self, counters: SharedCounters, bus: SharedBus) -> Providers {
        self.limits = RateLimits::shared(counters);
        self.health = Arc::new(KeyHealth::announcing(bus.clone()));
        self.bus = Some(bus);
        self
    }

    /// Tells the other instances that the registry changed.
    pub(super) fn announce_reload(&self) {
        if let Some(bus) = &self.bus {
            announce(bus, &Note::Reload);
        }
    }
}

/// Applies what the other instances announce, for as long as the process runs.
pub fn listen(providers: Arc<Providers>) {
    let Some(bus) = providers.bus.clone() else { return };
    crate::bus::listen(&bus, Topic::Caches, move |heard| {
        let providers = providers.clone();
        async move {
            match heard {
                // Missed some: whatever they said, reading everything again covers it.
                Heard::Gap => reload(&providers).await,
                Heard::Frame(frame) => match serde_json::from_slice::<Note>(&frame.body) {
                    Ok(Note::Reload) => reload(&providers).await,
                    Ok(Note::KeyOverrides { key }) => {
                        if let Err(e) = providers.load_key_overrides(key).await {
                            tracing::warn!(error = %e, "reading a member's overrides another instance changed failed");
                        }
                    }
                    Ok(Note::KeyRest { key, ms }) => {
                        let until = Instant::now() + Duration::from_millis(ms.min(86_400_000));
                        providers.health.rest_here(key, until);
                    }
                    // Another subsystem's cache note.
                    Err(_) => {}
                },
            }
        }
    });
}

async fn reload(providers: &Providers) {
    if let Err(e) = providers.reload_here().await {
        tracing::warn!(error = %e, "reloading the providers another instance changed failed");
    }
}
