//! The agent's rules as a service.

use crate::domain::sessions::Sessions;
use crate::storage::Db;

/// The agent's rules as a service, built once in the app state (the run engine holds its own):
/// a member's "always" rules, a session's todos, the agent's memory, and the host folders admins
/// allow a workspace's tools into.
#[derive(Clone)]
pub struct Agent {
    pub(super) db: Db,
    pub(super) sessions: Sessions,
}

impl Agent {
    /// The service over this database.
    pub fn new(db: Db) -> Agent {
        Agent { sessions: Sessions::new(db.clone()), db }
    }
}
