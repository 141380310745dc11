//! A streamed gateway answer as the response body itself: each poll by the HTTP server reads the
//! provider's next events and returns their bytes, so a chunk costs no task hand-off (before,
//! a task read the provider and sent each chunk through a channel to the body: two wake-ups per
//! chunk). Events that are already there are written together. The provider is read only as
//! fast as the caller reads, and the usage is recorded exactly once, when the answer ends,
//! fails, or the caller goes away (the body is dropped).

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

/// Appends what the format made of an event, if anything.
fn push(out: &mut String, made: Option<String>) {
    if let Some(s) = made {
        out.push_str(&s);
    }
}

impl<F: StreamFormat + Unpin> Stream for Relay<F> {
    type Item = Result<Bytes, actix_web::Error>;

    fn poll_next(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Option<Self::Item>> {
        let this = self.get_mut();
        let mut out = String::new();
        loop {
            match &mut this.phase {
                Phase::Opening => {
                    push(&mut out, this.format.open());
                    this.phase = Phase::Streaming;
                }
                Phase::Streaming => {
                    let Some(events) = this.events.as_mut() else {
                        this.phase = Phase::Closing;
                        continue;
                    };
                    match events.as_mut().poll_next(cx) {
                        Poll::Ready(Some(ProviderEvent::Error(e))) => {
                            out.push_str(&this.format.failed(&from_provider(&e)));
                            this.phase = Phase::Ended;
                            this.settle_accounts();
                        }
                        Poll::Ready(Some(ev)) => {
                            push(&mut out, this.format.event(ev));
                            if out.len() >= BATCH {
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
                    push(&mut out, this.format.close());
                    this.phase = Phase::Ended;
                    this.settle_accounts();
                }
                Phase::Ended => break,
            }
        }
        if !out.is_empty() {
            return Poll::Ready(Some(Ok(Bytes::from(out))));
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
