//! Runs of other instances, mirrored: every event a run publishes also crosses the bus, and
//! every other instance folds it into a mirror entry of its own registry, with the same
//! snapshot and the same broadcast, so a page on any instance subscribes exactly as it would
//! on the executing one (snapshot first, then every later event, in order, once). Stop goes the
//! other way: a mirror forwards it to the executing instance.
//!
//! A mirror that misses an event (a sequence gap, Redis lost a while, an instance that started
//! mid-run) asks the executing instance for its snapshot and drops its watchers (their streams
//! end and the pages reload from the database, then subscribe again to the fresh mirror).

use std::sync::Arc;

use bytes::Bytes;
use tokio::sync::broadcast;
use uuid::Uuid;

use super::RunEvent;
use super::registry::{LiveRun, RunRegistry};
use super::snapshot::{Envelope, RunSnapshot};
use super::wire::Wire;
use crate::bus::{Heard, SharedBus, Topic};

impl RunRegistry {
    /// The same registry, linked to the other instances through `bus` (a bus that is not shared
    /// leaves it as it was: one instance, nothing to mirror).
    pub fn with_bus(mut self, bus: SharedBus) -> Self {
        if !bus.is_shared() {
            return self;
        }
        self.bus = Some(bus.clone());
        let registry = self.clone();
        crate::bus::listen(&bus, Topic::Runs, move |heard| {
            match heard {
                // Mirrors may have gaps: drop them and ask for every live run again.
                Heard::Gap => registry.resynchronise(),
                Heard::Frame(frame) => match serde_json::from_slice::<Wire>(&frame.body) {
                    Ok(wire) => registry.receive(wire, frame.from),
                    Err(e) => tracing::warn!(error = %e, "an unreadable run message on the bus"),
                },
            }
            std::future::ready(())
        });
        self.announce(Wire::Hello);
        self
    }

    /// Publishes `wire` to the other instances, if there are any.
    pub(super) fn announce(&self, wire: Wire) {
        let Some(bus) = &self.bus else { return };
        match serde_json::to_vec(&wire) {
            Ok(body) => bus.publish(Topic::Runs, Bytes::from(body)),
            Err(e) => tracing::error!(error = %e, "cannot encode a run message for the bus"),
        }
    }

    /// After another instance's lease lapsed and this one ended its runs as interrupted: the
    /// mirrors of those runs end, here and on every instance, with `note` as their error.
    pub fn ended_elsewhere(&self, session: Uuid, run: Uuid, note: &str) {
        let wire = Wire::Ended { session, run, note: Some(note.to_string()) };
        self.announce(wire.clone());
        self.receive(wire, Uuid::nil());
    }

    /// A message from instance `from`.
    fn receive(&self, wire: Wire, from: Uuid) {
        match wire {
            Wire::Begin { session, run, message, owner } => {
                let snapshot = RunSnapshot { run_id: run, message_id: message, ..Default::default() };
                self.mirror(session, owner, snapshot, from);
            }
            Wire::Snapshot { session, owner, snapshot } => self.mirror(session, owner, snapshot, from),
            Wire::Event { session, envelope } => self.mirror_event(session, envelope),
            Wire::Ended { session, run, note } => {
                let mut inner = self.lock();
                let mirrored =
                    inner.runs.get(&session).is_some_and(|r| r.snapshot.run_id == run && r.remote.is_some());
                if mirrored
                    && let Some(gone) = inner.runs.remove(&session)
                    && let Some(note) = note
                {
                    let seq = gone.snapshot.seq + 1;
                    let _ = gone.sender.send(Arc::new(Envelope {
                        seq,
                        run_id: run,
                        event: RunEvent::Error(note),
                    }));
                }
            }
            Wire::Cancel { session } => {
                let inner = self.lock();
                if inner.runs.get(&session).is_some_and(|r| r.remote.is_none()) {
                    drop(inner);
                    self.cancel(session);
                }
            }
            Wire::CancelOwned { owner } => {
                self.cancel_owned_here(owner);
            }
            Wire::Resync { session } => self.send_snapshot(session),
            Wire::Hello => {
                let local: Vec<Uuid> =
                    self.lock().runs.iter().filter(|(_, r)| r.remote.is_none()).map(|(s, _)| *s).collect();
                for session in local {
                    self.send_snapshot(session);
                }
            }
        }
    }

    fn send_snapshot(&self, session: Uuid) {
        let inner = self.lock();
        if let Some(run) = inner.runs.get(&session).filter(|r| r.remote.is_none()) {
            // Under the lock: the snapshot precedes every later event on the bus.
            self.announce(Wire::Snapshot { session, owner: run.owner, snapshot: run.snapshot.clone() });
        }
    }

    /// Starts or refreshes the mirror of another instance's run from a snapshot.
    fn mirror(&self, session: Uuid, owner: Option<Uuid>, snapshot: RunSnapshot, from: Uuid) {
        let mut inner = self.lock();
        inner.awaiting_snapshot.remove(&session);
        match inner.runs.get(&session) {
            // A run of ours holds the session (the other one lost a race for it): ours stands.
            Some(r) if r.remote.is_none() => return,
            // Already as far or further along this run.
            Some(r) if r.snapshot.run_id == snapshot.run_id && r.snapshot.seq >= snapshot.seq => return,
            _ => {}
        }
        let (sender, _) = broadcast::channel(self.capacity());
        // Replacing an entry drops its sender: its watchers' streams end and they reload.
        inner.runs.insert(session, LiveRun::mirrored(owner, snapshot, sender, from));
    }

    fn mirror_event(&self, session: Uuid, envelope: Envelope) {
        let mut inner = self.lock();
        let Some(run) = inner.runs.get_mut(&session) else {
            // Begun before this instance listened: ask for the whole of it, once.
            if !envelope.event.is_terminal() && inner.ask_snapshot(session) {
                drop(inner);
                self.announce(Wire::Resync { session });
            }
            return;
        };
        if run.remote.is_none() || run.snapshot.run_id != envelope.run_id {
            return;
        }
        if envelope.seq <= run.snapshot.seq {
            return;
        }
        if envelope.seq != run.snapshot.seq + 1 {
            // A gap: what watchers have is incomplete. End their streams (they reload) and ask
            // for the run as it stands.
            inner.runs.remove(&session);
            if !envelope.event.is_terminal() && inner.ask_snapshot(session) {
                drop(inner);
                self.announce(Wire::Resync { session });
            }
            return;
        }
        run.snapshot.seq = envelope.seq;
        run.snapshot.apply(&envelope.event);
        let terminal = envelope.event.is_terminal();
        let _ = run.sender.send(Arc::new(envelope));
        if terminal {
            inner.runs.remove(&session);
        }
    }

    /// After the bus was away: every mirror may have missed events. Drop them all (their
    /// watchers reload) and ask every instance for its live runs.
    fn resynchronise(&self) {
        let mut inner = self.lock();
        inner.runs.retain(|_, r| r.remote.is_none());
        inner.awaiting_snapshot.clear();
        drop(inner);
        self.announce(Wire::Hello);
    }
}

/// How long a snapshot asked for may take before it is asked for again (the request or the
/// answer may have been lost while Redis was away).
const SNAPSHOT_PATIENCE: std::time::Duration = std::time::Duration::from_millis(500);

impl super::registry::Inner {
    /// Whether to ask for `session`'s snapshot now: not asked yet, or asked too long ago.
    fn ask_snapshot(&mut self, session: Uuid) -> bool {
        let now = std::time::Instant::now();
        match self.awaiting_snapshot.get(&session) {
            Some(at) if now.duration_since(*at) < SNAPSHOT_PATIENCE => false,
            _ => {
                self.awaiting_snapshot.insert(session, now);
                true
            }
        }
    }
}
