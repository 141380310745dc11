//! Server-side browser sessions: a random 256-bit token in a cookie, its SHA-256 in the database.

use base64::Engine;
use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use chrono::{DateTime, Duration, Utc};
use sha2::{Digest, Sha256};
use uuid::Uuid;

use crate::config::AuthConfig;
use crate::domain::authz::Actor;
use crate::model::accounts::{User, UserStatus};
use crate::storage::repos::auth_sessions::{self as repo, StoredSession};
use crate::storage::{Db, StorageResult};

/// Activity is written back at most this often, so reads stay reads.
const TOUCH_EVERY: Duration = Duration::seconds(60);

/// A freshly issued session: the token goes into the cookie and nowhere else.
pub struct IssuedSession {
    /// The cookie value (never stored).
    pub token: String,
    /// The CSRF secret bound to this session.
    pub csrf_secret: String,
}

impl std::fmt::Debug for IssuedSession {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("IssuedSession { .. }")
    }
}

/// Who a request belongs to, resolved from its cookie.
#[derive(Debug, Clone)]
pub struct Authenticated {
    /// The signed-in user.
    pub user: User,
    /// The authorization value for service calls.
    pub actor: Actor,
    /// Hash of the session token (the row id).
    pub session_id: String,
    /// CSRF secret of the session.
    pub csrf_secret: String,
}

/// Why a cookie did not yield a usable session.
#[derive(Debug, PartialEq, Eq)]
pub enum Rejection {
    /// No session, an unknown token, or an expired one.
    Anonymous,
    /// The user exists but may not use Arbor now.
    Disabled,
}

/// 32 random bytes from the OS CSPRNG, URL-safe base64.
pub fn random_token() -> String {
    let mut bytes = [0u8; 32];
    rand::fill(&mut bytes);
    URL_SAFE_NO_PAD.encode(bytes)
}

/// SHA-256 hex of a token: what the database stores.
pub fn hash_token(token: &str) -> String {
    let digest = Sha256::digest(token.as_bytes());
    digest.iter().map(|b| format!("{b:02x}")).collect()
}

/// Creates a session for a user and returns the token for the cookie.
pub async fn issue(
    db: &Db,
    cfg: &AuthConfig,
    user_id: Uuid,
    user_agent: Option<&str>,
    ip: Option<&str>,
) -> StorageResult<IssuedSession> {
    let token = random_token();
    let csrf_secret = random_token();
    let expires_at = Utc::now() + Duration::hours(cfg.session_max_hours);
    repo::insert(db, &hash_token(&token), user_id, &csrf_secret, expires_at, user_agent, ip).await?;
    Ok(IssuedSession { token, csrf_secret })
}

/// The row id of a cookie's token: its hash, or `None` when the value cannot be one of ours
/// (a token is 43 base64url characters), which then costs no query.
pub fn token_id(token: &str) -> Option<String> {
    let ours =
        token.len() == 43 && token.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'-' || b == b'_');
    ours.then(|| hash_token(token))
}

/// What a stored session grants now: the idle and absolute timeouts (an expired session is
/// deleted) and the user's status are enforced, and activity is written back at most once a
/// minute. Returns the verdict, and when activity was written if it was.
pub async fn judge(
    db: &Db,
    cfg: &AuthConfig,
    stored: StoredSession,
) -> StorageResult<(Result<Authenticated, Rejection>, Option<DateTime<Utc>>)> {
    let now = Utc::now();
    let idle_limit = stored.last_seen_at + Duration::minutes(cfg.session_idle_minutes);
    if now >= stored.expires_at || now >= idle_limit {
        repo::delete(db, &stored.id).await?;
        return Ok((Err(Rejection::Anonymous), None));
    }
    if stored.user.status != UserStatus::Active {
        return Ok((Err(Rejection::Disabled), None));
    }
    let touched = now - stored.last_seen_at >= TOUCH_EVERY;
    if touched {
        repo::touch(db, &stored.id, now).await?;
    }
    let actor = Actor::verified(&stored.user);
    let auth =
        Authenticated { user: stored.user, actor, session_id: stored.id, csrf_secret: stored.csrf_secret };
    Ok((Ok(auth), touched.then_some(now)))
}

/// Ends a session server-side.
pub async fn revoke(db: &Db, session_id: &str) -> StorageResult<()> {
    repo::delete(db, session_id).await
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tokens_are_random_256_bit_and_hashes_are_stable() {
        let a = random_token();
        let b = random_token();
        assert_ne!(a, b);
        assert_eq!(URL_SAFE_NO_PAD.decode(&a).unwrap().len(), 32);
        assert_eq!(a.len(), 43);
        assert_eq!(hash_token("abc"), "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad");
    }
}
