//! A streamed response being read: bytes from the network, SSE events, provider events, with
//! the idle timeout and the key kept out of error messages.

use std::collections::VecDeque;
use std::time::Duration;

use futures_util::StreamExt;

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
            key,
            done: false,
        }
    }

    /// The next event, or `None` once the stream has ended (after `Finish` or `Error`).
    pub(super) async fn next(&mut self) -> Option<ProviderEvent> {
        loop {
            if let Some(ev) = self.pending.pop_front() {
                if matches!(ev, ProviderEvent::Error(_)) {
                    self.done = true;
                    self.pending.clear();
                    self.raw.clear();
                }
                return Some(ev);
            }
            if let Some(sse) = self.raw.pop_front() {
                match self.decoder.on_event(&sse) {
                    Ok(events) => self.pending.extend(events),
                    Err(e) => self.pending.push_back(ProviderEvent::Error(parse_failure(&e))),
                }
                continue;
            }
            if self.done {
                return None;
            }
            let Ok(read) = tokio::time::timeout(self.idle_timeout, self.body.next()).await else {
                self.done = true;
                return Some(ProviderEvent::Error(ProviderError {
                    status: 0,
                    kind: "timeout".into(),
                    message: "the provider stopped sending".into(),
                    retryable: true,
                    retry_after_secs: None,
                }));
            };
            match read {
                Some(Ok(chunk)) => self.raw.extend(self.parser.push(&chunk)),
                Some(Err(e)) => {
                    self.done = true;
                    return Some(ProviderEvent::Error(transport_error(e.timeout)));
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
                    // What is left is handed out by the loop above, then the stream ends.
                    self.done = true;
                }
            }
        }
    }

    pub(super) fn redact(&self, ev: ProviderEvent) -> ProviderEvent {
        match ev {
            ProviderEvent::Error(mut e) => {
                e.message = redact(&e.message, &self.key);
                ProviderEvent::Error(e)
            }
            other => other,
        }
    }
}
