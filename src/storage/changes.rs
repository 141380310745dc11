//! Generations of the tables whose rows the domain keeps in memory between writes (tokens and
//! browser sessions with their users, aliases, quotas, vault secrets, workspaces, MCP servers): every write to one moves its generation, and a
//! copy read at an older generation is stale. Writes made here are also offered to the other
//! instances ([`local_changes`]), whose listeners move their own generation ([`heard`]).
//!
//! The generation moves right after the statement. A write inside a transaction moves it before
//! the commit, so a copy read between the two holds the old row until its age runs out (the
//! copies' fixed age bounds that, and every other missed note).

use std::sync::LazyLock;
use std::sync::atomic::{AtomicU64, Ordering};

use tokio::sync::broadcast;

/// What a kept copy was read from.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Kept {
    /// `api_tokens`, the `auth_sessions` that end (activity does not count) and the `users`
    /// columns a token's or a cookie's check reads (status, role, names).
    Accounts,
    /// `model_aliases`.
    Aliases,
    /// `quotas`.
    Quotas,
    /// `vault_secrets`.
    Vault,
    /// `workspaces` (their settings and attached key; who may open them is read each time).
    Workspaces,
    /// Which MCP servers a member's runs may use: `mcp_servers`, and `group_members` (servers
    /// are shared with groups).
    McpServers,
}

impl Kept {
    /// Every kind, for a gap in what the other instances said.
    pub const ALL: [Kept; 6] =
        [Kept::Accounts, Kept::Aliases, Kept::Quotas, Kept::Vault, Kept::Workspaces, Kept::McpServers];

    fn slot(self) -> &'static AtomicU64 {
        static SLOTS: [AtomicU64; 6] = [const { AtomicU64::new(0) }; 6];
        &SLOTS[self as usize]
    }
}

/// The generation of `kept` in this process: read it before reading the rows, and the copy is
/// current while it has not moved.
pub fn generation(kept: Kept) -> u64 {
    kept.slot().load(Ordering::Acquire)
}

/// This process wrote `kept`: copies here are stale, and the other instances are told.
pub fn changed(kept: Kept) {
    kept.slot().fetch_add(1, Ordering::AcqRel);
    // No receiver (a single instance, or the CLI) is not an error.
    let _ = LOCAL.send(kept);
}

/// Another instance wrote `kept` (or notes may have been missed): copies here are stale.
pub fn heard(kept: Kept) {
    kept.slot().fetch_add(1, Ordering::AcqRel);
}

/// Notes of the changes this process makes, for whoever tells the other instances.
pub fn local_changes() -> broadcast::Receiver<Kept> {
    LOCAL.subscribe()
}

static LOCAL: LazyLock<broadcast::Sender<Kept>> = LazyLock::new(|| broadcast::channel(256).0);

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_change_moves_its_generation_and_is_announced() {
        let mut notes = local_changes();
        let (aliases, quotas) = (generation(Kept::Aliases), generation(Kept::Quotas));
        changed(Kept::Aliases);
        assert!(generation(Kept::Aliases) > aliases);
        heard(Kept::Quotas);
        assert!(generation(Kept::Quotas) > quotas);
        // Other tests write too, so only this note's presence is asserted.
        let mut seen = Vec::new();
        while let Ok(k) = notes.try_recv() {
            seen.push(k);
        }
        assert!(seen.contains(&Kept::Aliases), "{seen:?}");
    }
}
