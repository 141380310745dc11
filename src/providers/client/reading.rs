//! A streamed response being read: bytes from the network, SSE events, provider events, with
//! the idle timeout and the key kept out of error messages.
//!
//! The reader is a [`Stream`] polled by whoever relays the answer. Its idle timeout is one timer
//! for the whole answer, moved on only when it fires early: arming a timer for every read (as
//! `tokio::time::timeout` around each one does) registered and removed a timer-wheel entry per
//! chunk, about 2 % of a busy server's CPU (BENCHMARKS step 32). Silence counts from when the
//! reader began to wait for the network, as with a timeout per read: a caller that stopped
//! reading for a while (the answer waits for it) does not make the provider late, although
//! hyper hands the next chunk over only after the first poll that follows.

use std::collections::VecDeque;
use std::future::Future;
use std::pin::Pin;
use std::task::{Context, Poll};
use std::time::Duration;

use futures_util::Stream;
use tokio::time::{Instant, Sleep};

use super::upstream::Body;
use super::{Decoder, parse_failure, redact, transport_error};
use crate::providers::sse::{SseEvent, SseParser};
use crate::providers::types::{ProviderError, ProviderEvent};
use crate::secret::Secret;

/// A streamed response being read: bytes -> SSE events -> provider events.
pub(super) struct Reading {
    body: Body,
    parser: SseParser,
    decoder: Decoder,
    /// Parsed but not yet decoded: one network read may hold a whole fast stream, and decoding
    /// it all before handing out the first event would delay the first token.
    raw: VecDeque<SseEvent>,
    pending: VecDeque<ProviderEvent>,
    idle_timeout: Duration,
    /// Fires at the idle timeout after some earlier wait began; when it does, the deadline of
    /// the present wait is checked and the timer moved there if that is later.
    idle: Pin<Box<Sleep>>,
    /// Since when the reader waits for the network: set when a read finds nothing, cleared
    /// when bytes come.
    waiting_since: Option<Instant>,
    key: Secret,
    done: bool,
}

impl Reading {
    /// Reading `body` with `decoder`, ending with an error after `idle_timeout` of silence;
    /// `key` is taken out of error messages.
    pub(super) fn new(body: Body, decoder: Decoder, idle_timeout: Duration, key: Secret) -> Reading {
        Reading {
            body,
            parser: SseParser::new(),
            decoder,
            raw: VecDeque::new(),
            pending: VecDeque::new(),
            idle_timeout,
            idle: Box::pin(tokio::time::sleep_until(Instant::now() + idle_timeout)),
            waiting_since: None,
            key,
            done: false,
        }
    }

    /// An error event with the key taken out of its message.
    fn redacted(&self, ev: ProviderEvent) -> ProviderEvent {
        match ev {
            ProviderEvent::Error(mut e) => {
                e.message = redact(&e.message, &self.key);
                ProviderEvent::Error(e)
            }
            other => other,
        }
    }

    /// `Ready` once the reader has waited for the network for the idle timeout; else the timer
    /// is armed for the present wait's deadline.
    fn poll_silence(&mut self, cx: &mut Context<'_>) -> Poll<()> {
        let since = *self.waiting_since.get_or_insert_with(Instant::now);
        loop {
            if self.idle.as_mut().poll(cx).is_pending() {
                return Poll::Pending;
            }
            let deadline = since + self.idle_timeout;
            if deadline <= Instant::now() {
                return Poll::Ready(());
            }
            // The timer was set for an earlier wait: it moves to this one's deadline (deadlines
            // only move forward, so it never fires late), and is polled to be registered there.
            self.idle.as_mut().reset(deadline);
        }
    }

    /// Decodes what the network gave, or the end of the body.
    fn take(&mut self, read: Option<Result<bytes::Bytes, super::upstream::Broken>>) {
        match read {
            Some(Ok(chunk)) => {
                self.waiting_since = None;
                self.raw.extend(self.parser.push(&chunk));
            }
            Some(Err(e)) => {
                self.done = true;
                self.pending.push_back(ProviderEvent::Error(transport_error(e.timeout)));
            }
            None => {
                for sse in self.parser.finish() {
                    if let Ok(events) = self.decoder.on_event(&sse) {
                        self.pending.extend(events);
                    }
                }
                match self.decoder.finish() {
                    Ok(events) => self.pending.extend(events),
                    Err(e) => self.pending.push_back(ProviderEvent::Error(parse_failure(&e))),
                }
                // What is left is handed out first, then the stream ends.
                self.done = true;
            }
        }
    }
}

impl Stream for Reading {
    type Item = ProviderEvent;

    /// The next event, or `None` once the stream has ended (after `Finish` or `Error`).
    fn poll_next(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Option<ProviderEvent>> {
        let this = self.get_mut();
        loop {
            if let Some(ev) = this.pending.pop_front() {
                if matches!(ev, ProviderEvent::Error(_)) {
                    this.done = true;
                    this.pending.clear();
                    this.raw.clear();
                }
                return Poll::Ready(Some(this.redacted(ev)));
            }
            if let Some(sse) = this.raw.pop_front() {
                match this.decoder.on_event(&sse) {
                    Ok(events) => this.pending.extend(events),
                    Err(e) => this.pending.push_back(ProviderEvent::Error(parse_failure(&e))),
                }
                continue;
            }
            if this.done {
                return Poll::Ready(None);
            }
            match this.body.as_mut().poll_next(cx) {
                Poll::Ready(read) => this.take(read),
                Poll::Pending => {
                    if this.poll_silence(cx).is_pending() {
                        return Poll::Pending;
                    }
                    this.done = true;
                    return Poll::Ready(Some(ProviderEvent::Error(ProviderError {
                        status: 0,
                        kind: "timeout".into(),
                        message: "the provider stopped sending".into(),
                        retryable: true,
                        retry_after_secs: None,
                    })));
                }
            }
        }
    }
}

#[cfg(test)]
mod tests;
