//! When the relay writes: the first events at once, a backlog in one write after the upstream's
//! turns, the end without waiting.

use std::collections::VecDeque;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::task::{Wake, Waker};

use super::*;
use crate::gateway::ApiError;
use crate::providers::types::Usage;

/// Each text delta as `text|`, between `open|` and `close|`.
struct Plain;

impl StreamFormat for Plain {
    fn open(&mut self) -> Option<String> {
        Some("open|".into())
    }
    fn event(&mut self, ev: ProviderEvent) -> Option<String> {
        match ev {
            ProviderEvent::TextDelta(t) => Some(format!("{t}|")),
            _ => None,
        }
    }
    fn failed(&mut self, e: &ApiError) -> String {
        format!("failed: {}|", e.message)
    }
    fn close(&mut self) -> Option<String> {
        Some("close|".into())
    }
    fn usage(&self) -> Option<Usage> {
        None
    }
    fn produced(&self) -> usize {
        0
    }
}

/// Counts how often the task was woken.
#[derive(Default)]
struct Wakes(AtomicUsize);

impl Wake for Wakes {
    fn wake(self: Arc<Self>) {
        self.0.fetch_add(1, Ordering::SeqCst);
    }
}

/// The upstream's side: events decoded and waiting, and whether the answer ended.
#[derive(Default)]
struct Upstream {
    waiting: VecDeque<ProviderEvent>,
    ended: bool,
}

/// Sends events into a relay, as the upstream connection's task does.
#[derive(Clone, Default)]
struct Sender(Arc<Mutex<Upstream>>);

impl Sender {
    fn send(&self, ev: ProviderEvent) {
        self.0.lock().expect("lock").waiting.push_back(ev);
    }
    fn end(&self) {
        self.0.lock().expect("lock").ended = true;
    }
}

/// A relay of the events sent with the returned sender (no usage is recorded: no ledger).
fn relay() -> (Relay<Plain>, Sender) {
    let tx = Sender::default();
    let upstream = tx.clone();
    // The polls are made by hand here, so a pending read needs no waker kept.
    let rx = futures_util::stream::poll_fn(move |_| {
        let mut up = upstream.0.lock().expect("lock");
        match up.waiting.pop_front() {
            Some(ev) => Poll::Ready(Some(ev)),
            None if up.ended => Poll::Ready(None),
            None => Poll::Pending,
        }
    });
    let relay = Relay {
        events: Some(Box::pin(rx)),
        format: Plain,
        phase: Phase::Opening,
        ledger: None,
        gathered: String::new(),
        turns: 0,
        relayed: false,
    };
    (relay, tx)
}

fn text(t: &str) -> ProviderEvent {
    ProviderEvent::TextDelta(t.into())
}

/// Polls once: the bytes written, `Some(None)` at the end, `None` while pending.
fn poll(relay: &mut Relay<Plain>, wakes: &Arc<Wakes>) -> Option<Option<String>> {
    let waker = Waker::from(wakes.clone());
    let mut cx = Context::from_waker(&waker);
    match Pin::new(relay).poll_next(&mut cx) {
        Poll::Ready(Some(Ok(bytes))) => Some(Some(String::from_utf8(bytes.to_vec()).expect("utf-8"))),
        Poll::Ready(Some(Err(e))) => panic!("the relay failed: {e}"),
        Poll::Ready(None) => Some(None),
        Poll::Pending => None,
    }
}

/// A relay that has written its opening and first event: later events may wait for turns.
fn relay_past_the_first_token() -> (Relay<Plain>, Sender, Arc<Wakes>) {
    let (mut relay, tx) = relay();
    let wakes = Arc::new(Wakes::default());
    tx.send(text("a"));
    assert_eq!(poll(&mut relay, &wakes), Some(Some("open|a|".into())));
    (relay, tx, wakes)
}

fn woken(wakes: &Wakes) -> usize {
    wakes.0.load(Ordering::SeqCst)
}

#[test]
fn the_first_events_leave_at_once() {
    let (mut relay, tx) = relay();
    let wakes = Arc::new(Wakes::default());
    assert_eq!(poll(&mut relay, &wakes), Some(Some("open|".into())), "the opening does not wait for events");
    assert_eq!(poll(&mut relay, &wakes), None);
    tx.send(text("a"));
    assert_eq!(poll(&mut relay, &wakes), Some(Some("a|".into())), "the first token never waits");
}

#[test]
fn later_events_wait_for_the_upstreams_turns_and_leave_together() {
    let (mut relay, tx, wakes) = relay_past_the_first_token();
    tx.send(text("b"));
    let before = woken(&wakes);
    assert_eq!(poll(&mut relay, &wakes), None, "b waits one turn");
    assert_eq!(woken(&wakes), before + 1, "the relay woke itself for its next turn");
    // During the turn the upstream decoded two more chunks.
    tx.send(text("c"));
    tx.send(text("d"));
    assert_eq!(poll(&mut relay, &wakes), None, "the turn brought more: another turn");
    assert_eq!(poll(&mut relay, &wakes), Some(Some("b|c|d|".into())), "a turn without news writes");
    assert_eq!(poll(&mut relay, &wakes), None, "nothing is left");
    assert_eq!(relay.turns, 0);
}

#[test]
fn a_steady_backlog_is_written_after_the_last_turn() {
    let (mut relay, tx, wakes) = relay_past_the_first_token();
    let mut expected = String::new();
    for turn in 0..MAX_TURNS {
        let t = format!("t{turn}");
        expected.push_str(&format!("{t}|"));
        tx.send(text(&t));
        assert_eq!(poll(&mut relay, &wakes), None, "turn {turn} of {MAX_TURNS}");
    }
    tx.send(text("last"));
    expected.push_str("last|");
    assert_eq!(poll(&mut relay, &wakes), Some(Some(expected)), "the wait is bounded");
}

#[test]
fn the_end_is_written_without_a_turn() {
    let (mut relay, tx, wakes) = relay_past_the_first_token();
    tx.send(text("b"));
    tx.end();
    assert_eq!(poll(&mut relay, &wakes), Some(Some("b|close|".into())));
    assert_eq!(poll(&mut relay, &wakes), Some(None));
}

#[test]
fn a_batch_at_the_size_limit_is_written_without_a_turn() {
    let (mut relay, tx, wakes) = relay_past_the_first_token();
    let big = "x".repeat(BATCH);
    tx.send(text(&big));
    tx.send(text("after"));
    assert_eq!(poll(&mut relay, &wakes), Some(Some(format!("{big}|"))), "a full batch leaves at once");
    assert_eq!(poll(&mut relay, &wakes), None, "the next event waits its turn");
    assert_eq!(poll(&mut relay, &wakes), Some(Some("after|".into())));
}
