//! A small fixed-window rate limiter for sign-in attempts: in memory for one instance, in Redis
//! (shared by every instance, one atomic step per attempt) when several run; if Redis fails,
//! the instance counts in memory meanwhile.
//!
//! Bounded whatever arrives (SECURITY.md 53): keys are kept as 64-bit keyed hashes, never as
//! the text sent, and the table holds at most [`CAPACITY`] windows. When it is full, windows
//! that are over go first, then the oldest quarter: an attacker who floods it with fresh keys
//! can only make the limiter forget old windows early, never make it grow.

use std::collections::HashMap;
use std::hash::BuildHasher as _;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use sha2::Digest as _;

/// The most windows kept at once (about 24 bytes each).
pub const CAPACITY: usize = 65_536;

/// Counts attempts per key per window.
#[derive(Clone, Default)]
pub struct RateLimiter {
    inner: Arc<Mutex<Windows>>,
    shared: Option<crate::bus::limits::SharedCounters>,
}

#[derive(Default)]
struct Windows {
    hasher: std::collections::hash_map::RandomState,
    counts: HashMap<u64, (Instant, u32)>,
}

/// How long to wait before trying again.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RetryAfter(pub Duration);

impl RateLimiter {
    /// A limiter whose windows every instance shares.
    pub fn shared(counters: crate::bus::limits::SharedCounters) -> RateLimiter {
        RateLimiter { shared: Some(counters), ..Default::default() }
    }

    /// Counts one attempt for `key`; refuses once `limit` attempts were made within `window`
    /// (on any instance, when they share the windows).
    pub async fn check(&self, key: &str, limit: u32, window: Duration) -> Result<(), RetryAfter> {
        if let Some(shared) = &self.shared {
            // The key as a digest: what was typed never reaches Redis.
            let digest = sha2::Sha256::digest(key.as_bytes());
            let hex: String = digest[..12].iter().map(|b| format!("{b:02x}")).collect();
            match shared.hit(&shared.key(&format!("signin:{hex}")), u64::from(limit), window).await {
                Ok(outcome) => return outcome.map_err(|left| RetryAfter(left.max(Duration::from_secs(1)))),
                Err(e) => {
                    tracing::warn!(error = %e, "sign-in limits are counted in this instance until Redis is back")
                }
            }
        }
        self.check_here(key, limit, window)
    }

    /// [`Self::check`], counted in this process only.
    pub fn check_here(&self, key: &str, limit: u32, window: Duration) -> Result<(), RetryAfter> {
        let now = Instant::now();
        let mut windows = self.inner.lock().unwrap_or_else(|p| p.into_inner());
        let id = windows.hasher.hash_one(key);
        if windows.counts.len() >= CAPACITY && !windows.counts.contains_key(&id) {
            windows.make_room(now, window);
        }
        let entry = windows.counts.entry(id).or_insert((now, 0));
        if now.duration_since(entry.0) >= window {
            *entry = (now, 0);
        }
        if entry.1 >= limit {
            return Err(RetryAfter(
                window.saturating_sub(now.duration_since(entry.0)).max(Duration::from_secs(1)),
            ));
        }
        entry.1 += 1;
        Ok(())
    }

    /// How many windows are kept now.
    pub fn len(&self) -> usize {
        self.inner.lock().unwrap_or_else(|p| p.into_inner()).counts.len()
    }

    /// Whether no window is kept.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

impl Windows {
    /// Drops the windows that are over, then, if still full, the oldest quarter.
    fn make_room(&mut self, now: Instant, window: Duration) {
        self.counts.retain(|_, (start, _)| now.duration_since(*start) < window);
        if self.counts.len() < CAPACITY {
            return;
        }
        let mut starts: Vec<Instant> = self.counts.values().map(|(start, _)| *start).collect();
        let quarter = starts.len() / 4;
        let (_, cutoff, _) = starts.select_nth_unstable(quarter);
        let cutoff = *cutoff;
        self.counts.retain(|_, (start, _)| *start > cutoff);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn refuses_after_the_limit_and_keys_are_independent() {
        let rl = RateLimiter::default();
        let w = Duration::from_secs(60);
        for _ in 0..3 {
            assert!(rl.check_here("a", 3, w).is_ok());
        }
        let retry = rl.check_here("a", 3, w).unwrap_err();
        assert!(retry.0 <= w && retry.0 >= Duration::from_secs(1));
        assert!(rl.check_here("b", 3, w).is_ok());
    }

    #[test]
    fn a_new_window_starts_fresh() {
        let rl = RateLimiter::default();
        let w = Duration::from_millis(30);
        assert!(rl.check_here("a", 1, w).is_ok());
        assert!(rl.check_here("a", 1, w).is_err());
        std::thread::sleep(Duration::from_millis(40));
        assert!(rl.check_here("a", 1, w).is_ok());
    }

    #[test]
    fn a_flood_of_distinct_keys_never_grows_past_capacity() {
        let rl = RateLimiter::default();
        let w = Duration::from_secs(60);
        let long = "x".repeat(1000);
        for i in 0..(CAPACITY * 3) {
            assert!(rl.check_here(&format!("account:{i}{long}"), 5, w).is_ok());
            assert!(rl.len() <= CAPACITY);
        }
        // A key under attack now is still counted and limited.
        for _ in 0..5 {
            assert!(rl.check_here("account:victim", 5, w).is_ok());
        }
        assert!(rl.check_here("account:victim", 5, w).is_err());
    }
}
