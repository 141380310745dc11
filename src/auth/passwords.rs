//! Argon2id password hashing, run off the async threads.

use argon2::Argon2;
use argon2::password_hash::phc::PasswordHash;
use argon2::password_hash::{PasswordHasher, PasswordVerifier};

use std::sync::OnceLock;

/// A hash checked when an email is unknown, so both paths cost the same time.
fn dummy_hash() -> &'static str {
    static DUMMY: OnceLock<String> = OnceLock::new();
    DUMMY.get_or_init(|| {
        Argon2::default().hash_password(b"arbor-dummy-password").map(|h| h.to_string()).unwrap_or_default()
    })
}

/// Hashes a password with Argon2id (default parameters, random salt).
pub async fn hash(password: String) -> Result<String, String> {
    tokio::task::spawn_blocking(move || {
        Argon2::default().hash_password(password.as_bytes()).map(|h| h.to_string()).map_err(|e| e.to_string())
    })
    .await
    .map_err(|e| e.to_string())?
}

/// Whether the password matches the stored hash; `None` checks a dummy hash and fails.
pub async fn verify(password: String, stored: Option<String>) -> bool {
    tokio::task::spawn_blocking(move || {
        let known = stored.is_some();
        let stored = stored.unwrap_or_else(|| dummy_hash().to_string());
        let Ok(parsed) = PasswordHash::new(&stored) else {
            return false;
        };
        let ok = Argon2::default().verify_password(password.as_bytes(), &parsed).is_ok();
        ok && known
    })
    .await
    .unwrap_or(false)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn hashes_verify_and_differ() {
        let a = hash("correct horse battery".into()).await.unwrap();
        let b = hash("correct horse battery".into()).await.unwrap();
        assert!(a.starts_with("$argon2id$"));
        assert_ne!(a, b, "random salt");
        assert!(verify("correct horse battery".into(), Some(a.clone())).await);
        assert!(!verify("wrong".into(), Some(a)).await);
        assert!(!verify("anything".into(), None).await);
        assert!(!verify("x".into(), Some("not a hash".into())).await);
    }
}
