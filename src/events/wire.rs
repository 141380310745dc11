//! The run registry's messages between instances (JSON on the bus's `Runs` topic).

use uuid::Uuid;

use super::snapshot::{Envelope, RunSnapshot};

/// What the registries of several instances say to each other.
#[derive(Debug, Clone, PartialEq, serde::Serialize, serde::Deserialize)]
#[serde(tag = "t", rename_all = "snake_case")]
pub(super) enum Wire {
    /// A run began.
    Begin { session: Uuid, run: Uuid, message: Option<Uuid>, owner: Option<Uuid> },
    /// A run's next event.
    Event { session: Uuid, envelope: Envelope },
    /// The whole of a live run so far (asked for with `Resync` or `Hello`).
    Snapshot { session: Uuid, owner: Option<Uuid>, snapshot: RunSnapshot },
    /// A run ended without a terminal event: abandoned before it started, or taken over from a
    /// lapsed instance (`note` is then the error its watchers see).
    Ended { session: Uuid, run: Uuid, note: Option<String> },
    /// Stop, pressed on another instance.
    Cancel { session: Uuid },
    /// A member was deactivated: stop their runs.
    CancelOwned { owner: Uuid },
    /// Send me the snapshot of this session's run.
    Resync { session: Uuid },
    /// I (re)joined: send me every live run you execute.
    Hello,
}
