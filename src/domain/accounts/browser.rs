//! Browser sessions: opening one when someone signs in (with what a sign-in records), resolving
//! a cookie to its person, ending one. The cookie's token itself is made and checked by
//! `auth::sessions`; this service owns the database and the session limits for it.

use std::sync::Arc;
use std::time::Duration;

use crate::auth::sessions::{self, Authenticated, IssuedSession, Rejection};
use crate::config::AuthConfig;
use crate::domain::DomainResult;
use crate::domain::accounts::{Accounts, User};
use crate::domain::audit::{self, Origin};
use crate::domain::fresh::FreshCopies;
use crate::storage::Db;
use crate::storage::changes::{self, Kept};
use crate::storage::repos::auth_sessions::{self as repo, StoredSession};

/// How long a browser session and its person are used from memory at most (see
/// `domain::fresh`: every write that ends a session or changes a person ends the copy at once).
const KNOWN_AGE: Duration = Duration::from_secs(10);
/// Sessions kept at once; past it all are read again.
const KNOWN_MOST: usize = 10_000;

/// The browser sessions of everyone, over the database, with the configured lifetimes.
#[derive(Clone)]
pub struct BrowserSessions {
    db: Db,
    limits: AuthConfig,
    /// Sessions with their person as last read, so a page's requests cost no query to say who
    /// sent them.
    known: Arc<FreshCopies<String, StoredSession>>,
}

impl BrowserSessions {
    /// The service over `db`, with the session lifetimes of `limits`.
    pub fn new(db: Db, limits: AuthConfig) -> BrowserSessions {
        BrowserSessions { db, limits, known: Arc::new(FreshCopies::new(KNOWN_AGE, KNOWN_MOST)) }
    }

    /// The person a cookie belongs to, enforcing the idle and absolute timeouts and their status.
    pub async fn resolve(&self, token: &str) -> DomainResult<Result<Authenticated, Rejection>> {
        let Some(id) = sessions::token_id(token) else { return Ok(Err(Rejection::Anonymous)) };
        // Read before the row: a write that ends the session or changes its person moves it.
        let generation = changes::generation(Kept::Accounts);
        let found = self
            .known
            .get_or_find(id.clone(), generation, async || repo::find_with_user(&self.db, &id).await)
            .await?;
        let Some(stored) = found else { return Ok(Err(Rejection::Anonymous)) };
        let (verdict, touched) = sessions::judge(&self.db, &self.limits, stored).await?;
        // Activity only moves forward, so a copy that missed it is stricter, never looser; it is
        // kept current here (about once a minute) so the next requests do not write it again.
        if let Some(at) = touched
            && let Some(mut copy) = self.known.get(&id, generation)
        {
            copy.last_seen_at = at;
            self.known.put(id, generation, copy);
        }
        Ok(verdict)
    }

    /// Ends the session of a cookie (signing out, or signing in again over it).
    pub async fn end(&self, token: &str) -> DomainResult<()> {
        Ok(sessions::revoke(&self.db, &sessions::hash_token(token)).await?)
    }
}

/// What a sign-in came with, besides the person it signs in.
pub struct SignIn<'a> {
    /// The cookie of the browser session the request came with: it is ended, a sign-in never
    /// carries an old session on.
    pub previous: Option<&'a str>,
    /// The setup link's token the sign-in carried.
    pub setup_token: Option<String>,
    /// The client's address, for the audit log and the sessions list.
    pub ip: Option<String>,
    /// The browser, for the sessions list.
    pub user_agent: Option<&'a str>,
}

/// A finished sign-in.
pub struct SignedIn {
    /// The new browser session (its token goes into the cookie).
    pub session: IssuedSession,
    /// Whether the setup link made this person the administrator.
    pub became_admin: bool,
}

impl Accounts {
    /// Finishes a sign-in (by password or through the identity provider): ends the session the
    /// browser came with, redeems the setup link it carried, records the sign-in and opens a
    /// new browser session.
    pub async fn open_browser_session(&self, user: &User, sign_in: SignIn<'_>) -> DomainResult<SignedIn> {
        if let Some(old) = sign_in.previous {
            self.browser.end(old).await?;
        }
        let origin = Origin::user(user, sign_in.ip.clone());
        let mut became_admin = false;
        if let Some(token) = sign_in.setup_token
            && self.redeem_setup(&token, user.id).await?
        {
            tracing::warn!(user = %user.id, "setup link redeemed: this user is now the administrator");
            let details = serde_json::json!({ "user_id": user.id, "to": "admin", "by": "the setup link" });
            audit::record(&self.db, &origin, "user.role", &format!("user:{}", user.email), details).await?;
            became_admin = true;
        }
        let via = if self.uses_provider(user.id).await.unwrap_or(false) { "oidc" } else { "password" };
        let details = serde_json::json!({ "via": via });
        audit::record(&self.db, &origin, "auth.sign_in", &format!("user:{}", user.email), details).await?;
        let session = sessions::issue(
            &self.db,
            &self.browser.limits,
            user.id,
            sign_in.user_agent,
            sign_in.ip.as_deref(),
        )
        .await?;
        Ok(SignedIn { session, became_admin })
    }

    /// Records a refused password sign-in: the address tried (never the password; unknown
    /// addresses are recorded the same way).
    pub async fn record_refused_sign_in(&self, ip: Option<String>, email: &str) -> DomainResult<()> {
        let origin = Origin { actor_id: None, actor: "anonymous".into(), ip };
        let target = format!("email:{}", email.trim().chars().take(254).collect::<String>());
        audit::record(&self.db, &origin, "auth.sign_in_failed", &target, serde_json::json!({})).await
    }
}
