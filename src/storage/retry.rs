//! Trying a write again after the database refused it for a moment: a restart, a dropped
//! connection, a pool that is briefly exhausted, or a lock held past SQLite's busy timeout.
//! Used by the writes nobody waits on and nothing would repeat: a reply's end and the gateway's
//! usage rows. A write the database refuses for what it is (a constraint) is not tried again.

use std::time::Duration;

/// Attempts at one write before it is given up.
pub const ATTEMPTS: u32 = 5;

/// The wait after a write's first failed attempt, doubled after each (3.75 s in all): long
/// enough for a database that restarts or a pool that empties, short enough that a shutdown
/// is not held up for long.
const FIRST_WAIT: Duration = Duration::from_millis(250);

/// The attempts left at one write and the wait before the next.
pub struct Backoff {
    attempt: u32,
    wait: Duration,
}

impl Default for Backoff {
    /// A write's first attempt is about to run.
    fn default() -> Backoff {
        Backoff { attempt: 1, wait: FIRST_WAIT }
    }
}

impl Backoff {
    /// The attempt that just ran (from 1).
    pub fn attempt(&self) -> u32 {
        self.attempt
    }

    /// After a failed attempt whose cause was mended at once: `false` when it was the last,
    /// else `true` without a wait.
    pub fn next_at_once(&mut self) -> bool {
        if self.attempt >= ATTEMPTS {
            return false;
        }
        self.attempt += 1;
        true
    }

    /// After a failed attempt: `false` when it was the last, else waits and returns `true`.
    pub async fn wait_for_next(&mut self) -> bool {
        if !self.next_at_once() {
            return false;
        }
        tokio::time::sleep(self.wait).await;
        self.wait = self.wait.saturating_mul(2);
        true
    }
}

/// Whether `e` may pass if the same write is sent again: anything but a constraint the rows
/// break.
pub fn may_pass_again(e: &sea_orm::DbErr) -> bool {
    e.sql_err().is_none()
}

#[cfg(test)]
mod tests {
    use super::{ATTEMPTS, Backoff};

    #[tokio::test(start_paused = true)]
    async fn a_write_gets_five_attempts_with_doubling_waits_between() {
        let started = tokio::time::Instant::now();
        let mut backoff = Backoff::default();
        let mut waits = Vec::new();
        let mut before = started;
        while backoff.wait_for_next().await {
            waits.push((tokio::time::Instant::now() - before).as_millis());
            before = tokio::time::Instant::now();
        }
        assert_eq!(backoff.attempt(), ATTEMPTS);
        assert_eq!(waits, [250, 500, 1000, 2000]);
    }
}
