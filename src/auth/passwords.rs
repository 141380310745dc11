//! Argon2id password hashing, run off the async threads.

use argon2::Argon2;
use argon2::password_hash::phc::PasswordHash;
use argon2::password_hash::{PasswordHasher, PasswordVerifier};

use std::sync::{Arc, OnceLock};

/// A hash checked when an email is unknown, so both paths cost the same time.
fn dummy_hash() -> &'static str {
    static DUMMY: OnceLock<String> = OnceLock::new();
    DUMMY.get_or_init(|| {
        Argon2::default().hash_password(b"arbor-dummy-password").map(|h| h.to_string()).unwrap_or_default()
    })
}

/// Why a password could not be hashed or checked.
#[derive(Debug, thiserror::Error)]
pub enum PasswordError {
    /// Every hashing slot is taken and the short queue is full: try again shortly (503).
    #[error("the server is busy checking other passwords")]
    Busy,
    /// Hashing itself failed (a bug, not the person's input).
    #[error("password hashing failed: {0}")]
    Failed(String),
}

/// Each Argon2 hash takes ~19 MiB and tens of milliseconds of one core, so a sign-in flood
/// could otherwise fill memory and starve every other request. At most one hash per core runs at
/// once; a bounded number wait, briefly; the rest are refused at once (SECURITY.md 53). One per
/// server (it lives in the application state), cloned cheaply.
#[derive(Clone)]
pub struct Hasher {
    gate: Arc<Gate>,
}

struct Gate {
    running: tokio::sync::Semaphore,
    waiting: tokio::sync::Semaphore,
}

/// How long a queued hash waits for a core before it is refused.
const QUEUE_WAIT: std::time::Duration = std::time::Duration::from_secs(5);
/// Hashes that may wait per core: a burst of sign-ups at a launch still goes through.
const WAITING_PER_CORE: usize = 16;

impl Default for Hasher {
    /// One running hash per core of this machine.
    fn default() -> Self {
        Hasher::new(std::thread::available_parallelism().map(|n| n.get()).unwrap_or(1))
    }
}

impl Hasher {
    /// At most `cores` hashes at once.
    pub fn new(cores: usize) -> Self {
        let cores = cores.max(1);
        let gate = Gate {
            running: tokio::sync::Semaphore::new(cores),
            waiting: tokio::sync::Semaphore::new(cores * WAITING_PER_CORE),
        };
        Hasher { gate: Arc::new(gate) }
    }

    /// Runs `work` on a blocking thread once a hashing slot is free.
    async fn gated<T: Send + 'static>(
        &self,
        work: impl FnOnce() -> T + Send + 'static,
    ) -> Result<T, PasswordError> {
        let queued = self.gate.waiting.try_acquire().map_err(|_| PasswordError::Busy)?;
        let running = tokio::time::timeout(QUEUE_WAIT, self.gate.running.acquire())
            .await
            .map_err(|_| PasswordError::Busy)?
            .map_err(|_| PasswordError::Busy)?;
        drop(queued);
        let result =
            tokio::task::spawn_blocking(work).await.map_err(|e| PasswordError::Failed(e.to_string()));
        drop(running);
        result
    }

    /// Hashes a password with Argon2id (default parameters, random salt).
    pub async fn hash(&self, password: String) -> Result<String, PasswordError> {
        self.gated(move || Argon2::default().hash_password(password.as_bytes()).map(|h| h.to_string()))
            .await?
            .map_err(|e| PasswordError::Failed(e.to_string()))
    }

    /// Whether the password matches the stored hash; `None` checks a dummy hash and fails.
    pub async fn verify(&self, password: String, stored: Option<String>) -> Result<bool, PasswordError> {
        self.gated(move || {
            let known = stored.is_some();
            let stored = stored.unwrap_or_else(|| dummy_hash().to_string());
            let Ok(parsed) = PasswordHash::new(&stored) else {
                return false;
            };
            let ok = Argon2::default().verify_password(password.as_bytes(), &parsed).is_ok();
            ok && known
        })
        .await
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn hashes_verify_and_differ() {
        let h = Hasher::default();
        let a = h.hash("correct horse battery".into()).await.unwrap();
        let b = h.hash("correct horse battery".into()).await.unwrap();
        assert!(a.starts_with("$argon2id$"));
        assert_ne!(a, b, "random salt");
        assert!(h.verify("correct horse battery".into(), Some(a.clone())).await.unwrap());
        assert!(!h.verify("wrong".into(), Some(a)).await.unwrap());
        assert!(!h.verify("anything".into(), None).await.unwrap());
        assert!(!h.verify("x".into(), Some("not a hash".into())).await.unwrap());
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn a_flood_of_hashes_is_refused_beyond_the_queue_and_the_rest_complete() {
        let cores = 2;
        let h = Hasher::new(cores);
        let attempts = cores * (WAITING_PER_CORE + 1) * 3;
        let tasks: Vec<_> = (0..attempts)
            .map(|_| {
                let h = h.clone();
                tokio::spawn(async move { h.verify("guess".into(), None).await })
            })
            .collect();
        let (mut refused, mut checked) = (0, 0);
        for task in tasks {
            match task.await.unwrap() {
                Err(PasswordError::Busy) => refused += 1,
                Ok(false) => checked += 1,
                other => panic!("{other:?}"),
            }
        }
        assert!(refused > 0, "a flood beyond the queue is refused");
        assert!(checked >= cores, "the running and queued ones complete: {checked}");
        assert_eq!(refused + checked, attempts);
        // Once the flood is over, the next attempt is served.
        assert!(!h.verify("guess".into(), None).await.unwrap());
    }
}
