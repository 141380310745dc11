//! A streamed gateway answer as the response body itself: each poll by the HTTP server reads the
//! provider's next events and returns their bytes, so a chunk costs no task hand-off (before,
//! a task read the provider and sent each chunk through a channel to the body: two wake-ups per
//! chunk). Events that are already there are written together. The provider is read only as
//! fast as the caller reads, and the usage is recorded exactly once, when the answer ends,
//! fails, or the caller goes away (the body is dropped).
//!
//! hyper hands a response body over one frame at a time: its connection task decodes the next
//! chunk only after this body took the previous one. So when a busy worker finds several
//! chunks waiting in the upstream socket, a relay that wrote what it had on the first
//! `Pending` would send each chunk in a write of its own. Instead, after a poll that gathered
//! events, the relay gives the connection task a turn (it wakes itself and returns `Pending`,
//! as `yield_now` does) and writes when a turn brings nothing more, or after [`MAX_TURNS`]. A
//! lone chunk waits one turn of the worker's queue; a backlog leaves in a few writes instead of
//! one each. The first events are written at once, so the first token never waits.

use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};

use bytes::Bytes;
use futures_util::Stream;

use super::{Settling, StreamFormat, from_provider};
use crate::domain::accounts::api_tokens::TokenCaller;
use crate::domain::gateway::{self, Finished, Opened};
use crate::providers::client::EventStream;
use crate::providers::types::{ChatRequest, ProviderEvent};
use crate::state::AppState;

/// Bytes gathered into one write at most, when many events are ready at once.
const BATCH: usize = 32 * 1024;

/// Turns given to the upstream connection before writing what was gathered, at most: each turn
/// brings one more chunk of a backlog, and on a saturated worker each turn waits for every
/// other task, so the wait stays bounded (1 and 2 gained nothing, 8 about what 32 did with
/// earlier chunks; BENCHMARKS step 30).
const MAX_TURNS: u8 = 8;

/// Where the answer is.
enum Phase {
    /// The opening bytes are next.
    Opening,
    /// Relaying the provider's events.
    Streaming,
    /// The answer ended normally; the format finishes its work before the closing bytes.
    Settling(Settling),
    /// The closing bytes are next.
    Closing,
    /// Nothing more.
    Ended,
}

/// What recording the usage needs; taken when it is recorded.
struct Ledger {
    state: Arc<AppState>,
    caller: TokenCaller,
    request: ChatRequest,
    model: crate::domain::providers::ResolvedModel,
    started: std::time::Instant,
    hold: crate::domain::admin::quota_holds::QuotaHold,
}

/// The response body of a streamed answer in format `F`.
pub(super) struct Relay<F: StreamFormat> {
    events: Option<EventStream>,
    format: F,
    phase: Phase,
    ledger: Option<Ledger>,
    /// Bytes gathered and not yet written.
    gathered: String,
    /// Turns given to the upstream connection since the last write.
    turns: u8,
    /// Whether events were relayed already.
    relayed: bool,
}

impl<F: StreamFormat> Relay<F> {
    pub(super) fn new(
        state: Arc<AppState>,
        caller: TokenCaller,
        request: ChatRequest,
        opened: Opened,
        format: F,
    ) -> Relay<F> {
        let Opened { model, stream, started, hold } = opened;
        Relay {
            events: Some(stream),
            format,
            phase: Phase::Opening,
            ledger: Some(Ledger { state, caller, request, model, started, hold }),
            gathered: String::new(),
            turns: 0,
            relayed: false,
        }
    }

    /// Records the usage once and lets go of the provider's stream.
    fn settle_accounts(&mut self) {
        self.events = None;
        if let Some(Ledger { state, caller, request, model, started, hold }) = self.ledger.take() {
            let done = Finished {
                model: &model,
                request: &request,
                reported: self.format.usage(),
                produced_chars: self.format.produced(),
                started,
                hold,
            };
            gateway::record(&state.usage, state.engine.providers(), &caller.actor, done);
        }
    }
}

/// Appends what the format made of an event, if anything (the first piece is kept as it is,
/// not copied: a lone chunk is written from its own buffer).
fn push(out: &mut String, made: Option<String>) {
    match made {
        Some(s) if out.is_empty() => *out = s,
        Some(s) => out.push_str(&s),
        None => {}
    }
}

impl<F: StreamFormat + Unpin> Stream for Relay<F> {
    type Item = Result<Bytes, actix_web::Error>;

    fn poll_next(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Option<Self::Item>> {
        let this = self.get_mut();
        // Whether this poll relayed an event and then found the upstream waiting.
        let mut caught_up = false;
        loop {
            match &mut this.phase {
                Phase::Opening => {
                    push(&mut this.gathered, this.format.open());
                    this.phase = Phase::Streaming;
                }
                Phase::Streaming => {
                    let Some(events) = this.events.as_mut() else {
                        this.phase = Phase::Closing;
                        continue;
                    };
                    match events.as_mut().poll_next(cx) {
                        Poll::Ready(Some(ProviderEvent::Error(e))) => {
                            this.gathered.push_str(&this.format.failed(&from_provider(&e)));
                            this.phase = Phase::Ended;
                            this.settle_accounts();
                        }
                        Poll::Ready(Some(ev)) => {
                            push(&mut this.gathered, this.format.event(ev));
                            caught_up = true;
                            if this.gathered.len() >= BATCH {
                                caught_up = false;
                                break;
                            }
                        }
                        Poll::Ready(None) => {
                            this.events = None;
                            this.phase = match this.format.settle() {
                                Some(settling) => Phase::Settling(settling),
                                None => Phase::Closing,
                            };
                        }
                        Poll::Pending => break,
                    }
                }
                Phase::Settling(settling) => match settling.as_mut().poll(cx) {
                    Poll::Ready(()) => this.phase = Phase::Closing,
                    Poll::Pending => break,
                },
                Phase::Closing => {
                    push(&mut this.gathered, this.format.close());
                    this.phase = Phase::Ended;
                    this.settle_accounts();
                }
                Phase::Ended => break,
            }
        }
        let streaming = matches!(this.phase, Phase::Streaming);
        // The first events leave at once: the first token never waits.
        let first = !this.relayed;
        this.relayed |= caught_up;
        if caught_up && streaming && !first && this.turns < MAX_TURNS {
            // The upstream's connection task may hold the next chunk already: let it run first.
            this.turns += 1;
            cx.waker().wake_by_ref();
            return Poll::Pending;
        }
        if !this.gathered.is_empty() {
            this.turns = 0;
            return Poll::Ready(Some(Ok(Bytes::from(std::mem::take(&mut this.gathered)))));
        }
        match this.phase {
            Phase::Ended => Poll::Ready(None),
            _ => Poll::Pending,
        }
    }
}

impl<F: StreamFormat> Drop for Relay<F> {
    /// The caller went away mid-answer (or the answer ended): the usage so far is recorded.
    fn drop(&mut self) {
        self.settle_accounts();
    }
}

#[cfg(test)]
mod tests;
