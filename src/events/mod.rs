//! Live events: the run registry owns every live run and fans its events out per session.
//!
//! A run publishes typed [`RunEvent`]s; subscribers get a consistent snapshot plus every later
//! event in order. With several instances, a run lives on the one executing it and every other
//! instance keeps a mirror of it fed by the bus (`mirror.rs`), so a page on any instance
//! subscribes the same way. The web layer turns these into HTML fragments; nothing here knows HTML.

mod mirror;
pub mod registry;
mod snapshot;
mod wire;

pub use registry::{BeginError, RunPublisher, RunRegistry, SessionOf, Subscription};
pub use snapshot::{Envelope, RunSnapshot};

use uuid::Uuid;

/// What a live run reports, in order.
#[derive(Debug, Clone, PartialEq, serde::Serialize, serde::Deserialize)]
pub enum RunEvent {
    /// Answer text appended.
    Delta(String),
    /// Reasoning text appended.
    Thought(String),
    /// The model called a tool: its name and arguments as JSON text.
    ToolCall { name: String, arguments: String },
    /// Token usage so far.
    Usage { input: u64, output: u64 },
    /// The run finished the message it was writing and now writes this one (a tool result or
    /// the next answer); whoever watched the old message renders it final.
    Advance { message_id: Uuid },
    /// The run ended normally; the final message is stored under this id. `plain`: the run
    /// wrote that one answer and nothing else, and it is complete (no tool was called, no file
    /// attached): beside the message and the session's counts nothing changed, no decision waits
    /// and no call was left unfinished.
    Done {
        message_id: Option<Uuid>,
        #[serde(default)]
        plain: bool,
    },
    /// The run failed; the message is safe to show.
    Error(String),
}

impl RunEvent {
    /// Whether this event ends the run's stream.
    pub fn is_terminal(&self) -> bool {
        matches!(self, RunEvent::Done { .. } | RunEvent::Error(_))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// An instance from before `plain` was said (a rolling upgrade) is read as not plain: its
    /// watchers' pages read everything, as they did.
    #[test]
    fn a_done_that_does_not_say_plain_reads_as_not_plain() {
        let said = r#"{"Done":{"message_id":null}}"#;
        let read: RunEvent = serde_json::from_str(said).unwrap();
        assert_eq!(read, RunEvent::Done { message_id: None, plain: false });
        let both = RunEvent::Done { message_id: Some(Uuid::nil()), plain: true };
        assert_eq!(serde_json::from_str::<RunEvent>(&serde_json::to_string(&both).unwrap()).unwrap(), both);
    }
}
