//! What a live run has produced: its events with their positions, and the snapshot they fold
//! into (the same on the executing instance and on every mirror).

use uuid::Uuid;

use super::RunEvent;

/// One event with its position in the run.
#[derive(Debug, Clone, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct Envelope {
    /// 1-based, gap-free sequence number within the run.
    pub seq: u64,
    /// The run it belongs to.
    pub run_id: Uuid,
    /// The event itself.
    pub event: RunEvent,
}

/// Everything a live run has produced up to `seq`.
#[derive(Debug, Clone, Default, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct RunSnapshot {
    /// The run.
    pub run_id: Uuid,
    /// The message the run writes.
    pub message_id: Option<Uuid>,
    /// Last sequence number folded into this snapshot.
    pub seq: u64,
    /// Answer text so far.
    pub text: String,
    /// Reasoning text so far.
    pub thoughts: String,
    /// Latest usage.
    pub usage: Option<(u64, u64)>,
    /// Tool calls so far: name and arguments as JSON text.
    pub tool_calls: Vec<(String, String)>,
}

impl RunSnapshot {
    pub(super) fn apply(&mut self, event: &RunEvent) {
        match event {
            RunEvent::Delta(t) => self.text.push_str(t),
            RunEvent::Thought(t) => self.thoughts.push_str(t),
            RunEvent::Usage { input, output } => self.usage = Some((*input, *output)),
            RunEvent::ToolCall { name, arguments } => self.tool_calls.push((name.clone(), arguments.clone())),
            RunEvent::Advance { message_id } => {
                *self = RunSnapshot {
                    run_id: self.run_id,
                    message_id: Some(*message_id),
                    seq: self.seq,
                    ..Default::default()
                };
            }
            RunEvent::Done { .. } | RunEvent::Error(_) => {}
        }
    }
}
