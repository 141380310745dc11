//! What an answer is made of while it streams: the provider's events gathered into the
//! message's parts, the text not yet published, and how the model call ended.

use crate::events::{RunEvent, RunPublisher};
use crate::providers::types::{Part, ProviderEvent, Usage};

/// How a model call ended.
pub(crate) enum End {
    /// The provider finished the answer.
    Finished,
    /// Stop was pressed.
    Stopped,
    /// The provider failed; the message is for the user.
    Failed(String),
}

/// Text received but not yet published.
#[derive(Default)]
pub(super) struct Outbox {
    pub(super) text: String,
    pub(super) thoughts: String,
}

impl Outbox {
    pub(super) fn emit(&mut self, publisher: &RunPublisher) {
        if !self.thoughts.is_empty() {
            publisher.publish(RunEvent::Thought(std::mem::take(&mut self.thoughts)));
        }
        if !self.text.is_empty() {
            publisher.publish(RunEvent::Delta(std::mem::take(&mut self.text)));
        }
    }
}

/// Builds a message's parts from provider events.
pub(crate) struct Accumulator {
    pub(super) parts: Vec<Part>,
    pub(super) usage: Option<Usage>,
    produced: usize,
}

impl Accumulator {
    pub(super) fn new(parts: Vec<Part>) -> Accumulator {
        Accumulator { parts, usage: None, produced: 0 }
    }

    pub(super) fn produced_chars(&self) -> usize {
        self.produced
    }

    /// The answer text so far.
    pub(super) fn text(&self) -> String {
        self.parts
            .iter()
            .filter_map(|p| if let Part::Text { text } = p { Some(text.as_str()) } else { None })
            .collect()
    }

    pub(super) fn apply(&mut self, ev: ProviderEvent) {
        match ev {
            ProviderEvent::TextDelta(t) => {
                self.produced += t.len();
                match self.parts.last_mut() {
                    Some(Part::Text { text }) => text.push_str(&t),
                    _ => self.parts.push(Part::Text { text: t }),
                }
            }
            ProviderEvent::ThoughtDelta(t) => {
                self.produced += t.len();
                match self.parts.last_mut() {
                    Some(Part::Thought { text, signature: None, redacted: None }) => text.push_str(&t),
                    _ => self.parts.push(Part::Thought { text: t, signature: None, redacted: None }),
                }
            }
            ProviderEvent::ThoughtSignature(sig) => match self.parts.last_mut() {
                Some(Part::Thought { signature: slot @ None, redacted: None, .. }) => *slot = Some(sig),
                _ => self.parts.push(Part::Thought {
                    text: String::new(),
                    signature: Some(sig),
                    redacted: None,
                }),
            },
            ProviderEvent::RedactedThought(data) => {
                self.parts.push(Part::Thought { text: String::new(), signature: None, redacted: Some(data) })
            }
            ProviderEvent::ToolCall { id, name, arguments, signature } => {
                self.produced += arguments.to_string().len();
                self.parts.push(Part::ToolCall { id, name, arguments, signature });
            }
            ProviderEvent::Usage(u) => self.usage = Some(u),
            ProviderEvent::Finish(_) | ProviderEvent::Error(_) => {}
        }
    }
}
