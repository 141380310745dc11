//! The registry of live runs, one per session at most, each with a broadcast channel.

use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::Duration;

use tokio::sync::{Notify, broadcast, watch};
use uuid::Uuid;

use super::RunEvent;
use super::snapshot::{Envelope, RunSnapshot};
use super::wire::Wire;

/// A consistent view to start streaming from: the snapshot, then everything after it.
pub struct Subscription {
    /// State up to `snapshot.seq`.
    pub snapshot: RunSnapshot,
    /// Events after the snapshot (the receiver may also hold older ones; skip `seq <= snapshot.seq`).
    pub receiver: broadcast::Receiver<Arc<Envelope>>,
    /// Whose session it is, when the run that began here said so.
    pub session: Option<SessionOf>,
}

/// Whose a live run's session is: its owner and workspace, which never change for a session,
/// so a page following the run can be authorized without reading the session again.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct SessionOf {
    /// The session's owner.
    pub owner_id: Uuid,
    /// The workspace holding it.
    pub workspace_id: Uuid,
}

pub(super) struct LiveRun {
    /// Whose run it is, when counted against a per-member limit.
    pub(super) owner: Option<Uuid>,
    pub(super) snapshot: RunSnapshot,
    pub(super) sender: broadcast::Sender<Arc<Envelope>>,
    cancel: watch::Sender<bool>,
    /// The instance executing it when that is another one (this entry mirrors it).
    pub(super) remote: Option<Uuid>,
    /// Whose session it is, when known (see [`RunPublisher::in_session_of`]).
    session: Option<SessionOf>,
}

impl LiveRun {
    /// The mirror of a run instance `from` executes.
    pub(super) fn mirrored(
        owner: Option<Uuid>,
        snapshot: RunSnapshot,
        sender: broadcast::Sender<Arc<Envelope>>,
        from: Uuid,
    ) -> LiveRun {
        // Stop reaches a mirrored run through the bus, never through this channel.
        let (cancel, _) = watch::channel(false);
        LiveRun { owner, snapshot, sender, cancel, remote: Some(from), session: None }
    }
}

#[derive(Default)]
pub(super) struct Inner {
    pub(super) runs: HashMap<Uuid, LiveRun>,
    /// Sessions whose snapshot was asked of their owner and has not come yet, and when.
    pub(super) awaiting_snapshot: HashMap<Uuid, std::time::Instant>,
}

/// Live runs keyed by session. Cheap to clone; all clones share one table.
#[derive(Clone)]
pub struct RunRegistry {
    pub(super) inner: Arc<Mutex<Inner>>,
    /// The other instances, when there are any.
    pub(super) bus: Option<crate::bus::SharedBus>,
    /// Set once the server is stopping: every run is asked to stop, new ones as they begin.
    stopping: Arc<AtomicBool>,
    /// Woken whenever a run leaves the table.
    left: Arc<Notify>,
    capacity: usize,
    /// Most live runs one member may have at once (SECURITY.md 54).
    per_owner: usize,
}

/// Why a run could not begin.
#[derive(Debug, PartialEq, Eq, thiserror::Error)]
pub enum BeginError {
    /// The session already has a live run.
    #[error("this session already has a running reply")]
    AlreadyRunning,
    /// The member has as many live runs as they may.
    #[error("too many replies at once")]
    TooMany {
        /// The limit.
        max: usize,
    },
}

/// Returned when a session already has a live run.
#[derive(Debug, PartialEq, Eq, thiserror::Error)]
#[error("this session already has a running reply")]
pub struct AlreadyRunning;

impl RunRegistry {
    /// An empty registry whose per-session channels buffer `capacity` events.
    pub fn new(capacity: usize) -> Self {
        RunRegistry {
            inner: Arc::new(Mutex::new(Inner::default())),
            bus: None,
            stopping: Arc::new(AtomicBool::new(false)),
            left: Arc::new(Notify::new()),
            capacity: capacity.max(16),
            per_owner: usize::MAX,
        }
    }

    /// Events buffered per subscriber.
    pub(super) fn capacity(&self) -> usize {
        self.capacity
    }

    /// The same registry, allowing each member at most `max` live runs at once.
    pub fn with_owner_limit(mut self, max: usize) -> Self {
        self.per_owner = max.max(1);
        self
    }

    /// Like [`RunRegistry::begin`], for a run of `owner`, who may have only so many at once.
    pub fn begin_owned(
        &self,
        owner: Uuid,
        session_id: Uuid,
        run_id: Uuid,
        message_id: Option<Uuid>,
    ) -> Result<RunPublisher, BeginError> {
        let mut inner = self.lock();
        if inner.runs.contains_key(&session_id) {
            return Err(BeginError::AlreadyRunning);
        }
        if inner.runs.values().filter(|r| r.owner == Some(owner)).count() >= self.per_owner {
            return Err(BeginError::TooMany { max: self.per_owner });
        }
        Ok(self.insert(&mut inner, Some(owner), session_id, run_id, message_id))
    }

    fn insert(
        &self,
        inner: &mut Inner,
        owner: Option<Uuid>,
        session_id: Uuid,
        run_id: Uuid,
        message_id: Option<Uuid>,
    ) -> RunPublisher {
        let (sender, _) = broadcast::channel(self.capacity);
        self.announce(Wire::Begin { session: session_id, run: run_id, message: message_id, owner });
        // A run that begins while the server stops is stopped at once (checked under the lock
        // that `stop_all` takes, so none slips between).
        let (cancel, cancelled) = watch::channel(self.is_stopping());
        let snapshot = RunSnapshot { run_id, message_id, ..Default::default() };
        inner
            .runs
            .insert(session_id, LiveRun { owner, snapshot, sender, cancel, remote: None, session: None });
        RunPublisher { registry: self.clone(), session_id, run_id, cancelled, finished: false }
    }

    pub(super) fn lock(&self) -> MutexGuard<'_, Inner> {
        // A panic while holding this lock cannot leave the map half-updated (every critical
        // section is a single insert, remove or push), so a poisoned lock is still usable.
        self.inner.lock().unwrap_or_else(|poisoned| poisoned.into_inner())
    }

    /// Registers a live run writing `message_id` for a session; only one may run per session.
    pub fn begin(
        &self,
        session_id: Uuid,
        run_id: Uuid,
        message_id: Option<Uuid>,
    ) -> Result<RunPublisher, AlreadyRunning> {
        let mut inner = self.lock();
        if inner.runs.contains_key(&session_id) {
            return Err(AlreadyRunning);
        }
        Ok(self.insert(&mut inner, None, session_id, run_id, message_id))
    }

    /// Asks a session's live run to stop (through the bus when another instance executes it);
    /// false when none is running.
    pub fn cancel(&self, session_id: Uuid) -> bool {
        let inner = self.lock();
        match inner.runs.get(&session_id) {
            Some(run) if run.remote.is_some() => {
                self.announce(Wire::Cancel { session: session_id });
                true
            }
            Some(run) => {
                run.cancel.send_replace(true);
                true
            }
            None => false,
        }
    }

    /// Asks every live run of `owner` to stop (their account was deactivated); returns how many.
    pub fn cancel_owned(&self, owner: Uuid) -> usize {
        self.announce(Wire::CancelOwned { owner });
        self.cancel_owned_here(owner)
    }

    /// Stops the live runs of `owner` that this instance executes.
    pub(super) fn cancel_owned_here(&self, owner: Uuid) -> usize {
        let inner = self.lock();
        let mine: Vec<&LiveRun> =
            inner.runs.values().filter(|r| r.owner == Some(owner) && r.remote.is_none()).collect();
        for run in &mine {
            run.cancel.send_replace(true);
        }
        mine.len()
    }

    /// At shutdown: asks every live run to stop, and every run begun from now on; returns how
    /// many were live. Their tasks end them as interrupted (see [`Self::is_stopping`]).
    pub fn stop_all(&self) -> usize {
        let inner = self.lock();
        self.stopping.store(true, Ordering::SeqCst);
        let local = inner.runs.values().filter(|r| r.remote.is_none());
        local
            .inspect(|run| {
                run.cancel.send_replace(true);
            })
            .count()
    }

    /// Asks every run this instance executes to stop, without refusing new ones (its lease was
    /// lost: another instance already ended them as interrupted); returns how many.
    pub fn stop_local(&self) -> usize {
        let inner = self.lock();
        let local = inner.runs.values().filter(|r| r.remote.is_none());
        local
            .inspect(|run| {
                run.cancel.send_replace(true);
            })
            .count()
    }

    /// Whether the server is stopping (a run stopped now was not stopped by its member).
    pub fn is_stopping(&self) -> bool {
        self.stopping.load(Ordering::SeqCst)
    }

    /// Waits until no run is live, at most `within`; false when some still are.
    pub async fn wait_idle(&self, within: Duration) -> bool {
        let deadline = tokio::time::Instant::now() + within;
        loop {
            let left = self.left.notified();
            tokio::pin!(left);
            // Registered before the check, so a run leaving in between still wakes us.
            left.as_mut().enable();
            if self.is_empty() {
                return true;
            }
            if tokio::time::timeout_at(deadline, left).await.is_err() {
                return self.is_empty();
            }
        }
    }

    fn remove(&self, session_id: Uuid, run_id: Uuid) {
        let mut inner = self.lock();
        if inner.runs.get(&session_id).is_some_and(|r| r.snapshot.run_id == run_id && r.remote.is_none()) {
            inner.runs.remove(&session_id);
            self.announce(Wire::Ended { session: session_id, run: run_id, note: None });
            self.left.notify_waiters();
        }
    }

    /// Subscribes to a session's live run, if it has one.
    pub fn subscribe(&self, session_id: Uuid) -> Option<Subscription> {
        let inner = self.lock();
        let run = inner.runs.get(&session_id)?;
        Some(Subscription {
            snapshot: run.snapshot.clone(),
            receiver: run.sender.subscribe(),
            session: run.session,
        })
    }

    /// The current snapshot of a session's live run.
    pub fn snapshot(&self, session_id: Uuid) -> Option<RunSnapshot> {
        self.lock().runs.get(&session_id).map(|r| r.snapshot.clone())
    }

    /// Whether a session has a live run.
    pub fn is_active(&self, session_id: Uuid) -> bool {
        self.lock().runs.contains_key(&session_id)
    }

    /// Number of live runs this instance executes.
    pub fn len(&self) -> usize {
        self.lock().runs.values().filter(|r| r.remote.is_none()).count()
    }

    /// Whether no run of this instance is live.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    fn publish(&self, session_id: Uuid, run_id: Uuid, event: RunEvent) {
        let mut inner = self.lock();
        let terminal = event.is_terminal();
        let Some(run) = inner.runs.get_mut(&session_id) else {
            return;
        };
        if run.snapshot.run_id != run_id || run.remote.is_some() {
            return;
        }
        // Snapshot and broadcast change under one lock: a subscriber sees a snapshot at seq N and
        // then exactly the events N+1.. from its receiver.
        run.snapshot.seq += 1;
        run.snapshot.apply(&event);
        let envelope = Arc::new(Envelope { seq: run.snapshot.seq, run_id, event });
        if self.bus.is_some() {
            let wire = Wire::Event { session: session_id, envelope: (*envelope).clone() };
            self.announce(wire);
        }
        // No receivers is fine: nobody is watching, the run goes on.
        let _ = run.sender.send(envelope);
        if terminal {
            inner.runs.remove(&session_id);
            self.left.notify_waiters();
        }
    }
}

/// The only handle that can publish for a run; dropping it unfinished reports an error.
pub struct RunPublisher {
    registry: RunRegistry,
    session_id: Uuid,
    run_id: Uuid,
    cancelled: watch::Receiver<bool>,
    finished: bool,
}

impl RunPublisher {
    /// Records whose session the run is in, for the pages that follow it.
    pub fn in_session_of(self, of: SessionOf) -> RunPublisher {
        if let Some(run) = self.registry.lock().runs.get_mut(&self.session_id)
            && run.snapshot.run_id == self.run_id
        {
            run.session = Some(of);
        }
        self
    }

    /// Resolves once Stop was pressed (at once if it already was).
    pub async fn cancelled(&mut self) {
        // An error means the registry dropped the run: nothing will ever cancel it.
        if self.cancelled.wait_for(|stop| *stop).await.is_err() {
            std::future::pending::<()>().await;
        }
    }

    /// [`RunPublisher::cancelled`] as a future of its own, which does not hold the publisher:
    /// a loop that publishes can keep one pinned instead of making one in every turn.
    pub fn stop_signal(&self) -> impl std::future::Future<Output = ()> + Send + 'static {
        let mut cancelled = self.cancelled.clone();
        async move {
            if cancelled.wait_for(|stop| *stop).await.is_err() {
                std::future::pending::<()>().await;
            }
        }
    }

    /// Whether Stop was pressed.
    pub fn is_cancelled(&self) -> bool {
        *self.cancelled.borrow()
    }

    /// Removes the run without an event: it never started (its records were not written).
    pub fn abandon(mut self) {
        self.finished = true;
        self.registry.remove(self.session_id, self.run_id);
    }

    /// The run's id.
    pub fn run_id(&self) -> Uuid {
        self.run_id
    }

    /// Publishes a non-terminal event.
    pub fn publish(&self, event: RunEvent) {
        debug_assert!(!event.is_terminal(), "use finish() for terminal events");
        if !event.is_terminal() {
            self.registry.publish(self.session_id, self.run_id, event);
        }
    }

    /// Moves the run on to writing another message.
    pub fn advance(&self, message_id: Uuid) {
        self.registry.publish(self.session_id, self.run_id, RunEvent::Advance { message_id });
    }

    /// Publishes the terminal event and removes the run.
    pub fn finish(mut self, event: RunEvent) {
        let event =
            if event.is_terminal() { event } else { RunEvent::Done { message_id: None, plain: false } };
        self.finished = true;
        self.registry.publish(self.session_id, self.run_id, event);
    }
}

impl Drop for RunPublisher {
    fn drop(&mut self) {
        if !self.finished {
            self.registry.publish(
                self.session_id,
                self.run_id,
                RunEvent::Error("The reply stopped unexpectedly.".into()),
            );
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn one_run_per_session() {
        let reg = RunRegistry::new(16);
        let s = Uuid::new_v4();
        let p = reg.begin(s, Uuid::new_v4(), None).unwrap();
        assert_eq!(reg.begin(s, Uuid::new_v4(), None).err(), Some(AlreadyRunning));
        p.finish(RunEvent::Done { message_id: None, plain: false });
        assert!(!reg.is_active(s));
        assert!(reg.begin(s, Uuid::new_v4(), None).is_ok());
    }

    #[tokio::test]
    async fn subscriber_gets_snapshot_then_the_rest_in_order() {
        let reg = RunRegistry::new(64);
        let s = Uuid::new_v4();
        let p = reg.begin(s, Uuid::new_v4(), None).unwrap();
        p.publish(RunEvent::Delta("Hel".into()));
        let mut sub = reg.subscribe(s).unwrap();
        assert_eq!(sub.snapshot.text, "Hel");
        assert_eq!(sub.snapshot.seq, 1);
        p.publish(RunEvent::Delta("lo".into()));
        p.finish(RunEvent::Done { message_id: None, plain: false });
        let a = sub.receiver.recv().await.unwrap();
        let b = sub.receiver.recv().await.unwrap();
        assert_eq!((a.seq, &a.event), (2, &RunEvent::Delta("lo".into())));
        assert_eq!(b.seq, 3);
        assert!(b.event.is_terminal());
        assert!(reg.subscribe(s).is_none());
    }

    #[tokio::test]
    async fn dropping_an_unfinished_publisher_reports_an_error() {
        let reg = RunRegistry::new(16);
        let s = Uuid::new_v4();
        let p = reg.begin(s, Uuid::new_v4(), None).unwrap();
        let mut sub = reg.subscribe(s).unwrap();
        drop(p);
        let e = sub.receiver.recv().await.unwrap();
        assert!(matches!(e.event, RunEvent::Error(_)));
        assert!(!reg.is_active(s));
    }

    #[tokio::test]
    async fn stopping_all_stops_live_runs_and_those_begun_after_and_waits_for_them() {
        let reg = RunRegistry::new(16);
        let mut live = reg.begin(Uuid::new_v4(), Uuid::new_v4(), None).unwrap();
        assert!(!reg.is_stopping() && !live.is_cancelled());
        assert!(!reg.wait_idle(Duration::from_millis(10)).await, "a run is live");
        assert_eq!(reg.stop_all(), 1);
        assert!(reg.is_stopping() && live.is_cancelled());
        let late = reg.begin(Uuid::new_v4(), Uuid::new_v4(), None).unwrap();
        assert!(late.is_cancelled(), "a run begun while stopping is stopped at once");
        // The runs end on their own tasks, as a run does when it sees Stop.
        let waiter = tokio::spawn({
            let reg = reg.clone();
            async move { reg.wait_idle(Duration::from_secs(30)).await }
        });
        tokio::spawn(async move {
            live.cancelled().await;
            live.finish(RunEvent::Done { message_id: None, plain: false });
            late.finish(RunEvent::Done { message_id: None, plain: false });
        });
        assert!(waiter.await.unwrap());
        assert!(reg.is_empty());
    }
}
