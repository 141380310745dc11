//! A small fixed-window rate limiter for sign-in attempts, in memory, per instance.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

/// Counts attempts per key per window.
#[derive(Clone, Default)]
pub struct RateLimiter {
    inner: Arc<Mutex<HashMap<String, (Instant, u32)>>>,
}

/// How long to wait before trying again.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RetryAfter(pub Duration);

impl RateLimiter {
    /// Counts one attempt for `key`; refuses once `limit` attempts were made within `window`.
    pub fn check(&self, key: &str, limit: u32, window: Duration) -> Result<(), RetryAfter> {
        let now = Instant::now();
        let mut map = self.inner.lock().unwrap_or_else(|p| p.into_inner());
        if map.len() > 100_000 {
            // Bounded memory: forget windows that are over.
            map.retain(|_, (start, _)| now.duration_since(*start) < window);
        }
        let entry = map.entry(key.to_string()).or_insert((now, 0));
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
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn refuses_after_the_limit_and_keys_are_independent() {
        let rl = RateLimiter::default();
        let w = Duration::from_secs(60);
        for _ in 0..3 {
            assert!(rl.check("a", 3, w).is_ok());
        }
        let retry = rl.check("a", 3, w).unwrap_err();
        assert!(retry.0 <= w && retry.0 >= Duration::from_secs(1));
        assert!(rl.check("b", 3, w).is_ok());
    }

    #[test]
    fn a_new_window_starts_fresh() {
        let rl = RateLimiter::default();
        let w = Duration::from_millis(30);
        assert!(rl.check("a", 1, w).is_ok());
        assert!(rl.check("a", 1, w).is_err());
        std::thread::sleep(Duration::from_millis(40));
        assert!(rl.check("a", 1, w).is_ok());
    }
}
