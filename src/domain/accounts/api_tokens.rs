//! API access tokens: `arb_…` bearer tokens for the `/v1` gateway (scope `api`) or for the
//! whole account (scope `full`). Shown once at creation, stored only as SHA-256 hashes, listed
//! by prefix and last use, revocable and optionally expiring; a disabled user's tokens stop
//! working at once because every check reads the user's status (from memory, read again after
//! any write to tokens or users on any instance).

use std::sync::Arc;

use chrono::{DateTime, Duration, Utc};
use serde::Serialize;
use uuid::Uuid;

use crate::auth::sessions::{hash_token, random_token};
use crate::domain::accounts::{Actor, User, UserStatus};
use crate::domain::audit::{self, Origin};
use crate::domain::fresh::FreshCopies;
use crate::domain::{DomainError, DomainResult};
use crate::model::accounts::TokenRecord;
use crate::storage::Db;
use crate::storage::changes::{self, Kept};
use crate::storage::repos::api_tokens as repo;

/// API tokens as a service over the database: members make, list and revoke theirs; the
/// gateway's and SCIM's extractors authenticate with them; the operator issues one from the CLI.
#[derive(Clone)]
pub struct ApiTokens {
    db: Db,
    /// Tokens checked lately, with their users: every API call checks one before anything else,
    /// so the check is served from memory until a token or user is written (here or, through
    /// the bus, on another instance) or the copy is [`KNOWN_AGE`] old.
    known: Arc<FreshCopies<String, Arc<Known>>>,
}

impl ApiTokens {
    /// The service over this database.
    pub fn new(db: Db) -> ApiTokens {
        ApiTokens { db, known: Arc::new(FreshCopies::new(KNOWN_AGE, KNOWN_MOST)) }
    }
}

/// How long a checked token is used from memory at most: how long a revocation or a disabled
/// account takes to count here when the note from the instance that wrote it was lost, or when
/// it was written by the command line (which has no bus).
const KNOWN_AGE: std::time::Duration = std::time::Duration::from_secs(10);
/// Tokens kept at most (beyond: all are dropped and read again).
const KNOWN_MOST: usize = 10_000;

/// A token as last read, with its user and when its use was last recorded.
struct Known {
    record: TokenRecord,
    user: User,
    used: std::sync::Mutex<Option<DateTime<Utc>>>,
}

/// What every token starts with, so secret scanners and people recognise it.
pub const TOKEN_PREFIX: &str = "arb_";

/// The most live tokens one user may hold.
pub const MAX_TOKENS: usize = 50;

/// What a token may be used for.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Scope {
    /// The `/v1` API and account management.
    Full,
    /// The `/v1` model API only.
    Api,
    /// The sessions API only (`/v1/workspaces`, `/v1/sessions`): a program that works in the
    /// person's sessions as they would in the browser.
    Sessions,
    /// Directory provisioning (`/scim/v2`) only; made by admins, valid while they are one.
    Scim,
}

impl Scope {
    /// The stored spelling.
    pub fn as_str(self) -> &'static str {
        match self {
            Scope::Full => "full",
            Scope::Api => "api",
            Scope::Sessions => "sessions",
            Scope::Scim => "scim",
        }
    }

    /// Parses the stored or submitted spelling.
    pub fn parse(s: &str) -> Option<Scope> {
        match s {
            "full" => Some(Scope::Full),
            "api" => Some(Scope::Api),
            "sessions" => Some(Scope::Sessions),
            "scim" => Some(Scope::Scim),
            _ => None,
        }
    }

    /// What a member may pick for a token of their own: `api`, `sessions` or `full` (SCIM tokens are made
    /// in the admin console).
    pub fn parse_member(s: &str) -> Option<Scope> {
        Scope::parse(s).filter(|s| *s != Scope::Scim)
    }
}

/// A token as the settings page lists it.
#[derive(Debug, Clone, Serialize)]
pub struct TokenRow {
    /// Row id.
    pub id: Uuid,
    /// Its name.
    pub name: String,
    /// The first characters, to tell tokens apart.
    pub prefix: String,
    /// full | api.
    pub scope: String,
    /// `YYYY-MM-DD`, or none.
    pub expires: Option<String>,
    /// When it was last used, or "never".
    pub last_used: String,
    /// active | expired | revoked.
    pub state: &'static str,
}

fn row(m: TokenRecord, now: DateTime<Utc>) -> TokenRow {
    let state = if m.revoked_at.is_some() {
        "revoked"
    } else if m.expires_at.is_some_and(|e| e <= now) {
        "expired"
    } else {
        "active"
    };
    TokenRow {
        id: m.id,
        name: m.name,
        prefix: m.prefix,
        scope: m.scope,
        expires: m.expires_at.map(|e| e.format("%Y-%m-%d").to_string()),
        last_used: m
            .last_used_at
            .map_or_else(|| "never".into(), |t| t.format("%Y-%m-%d %H:%M UTC").to_string()),
        state,
    }
}

impl ApiTokens {
    /// The actor's tokens, newest first.
    pub async fn list(&self, actor: &Actor) -> DomainResult<Vec<TokenRow>> {
        let now = Utc::now();
        Ok(repo::list_for_user(&self.db, actor.user_id()).await?.into_iter().map(|m| row(m, now)).collect())
    }

    /// Creates a token named `name` with `scope`, expiring after `days` (none: never).
    pub async fn create(
        &self,
        actor: &Actor,
        origin: &Origin,
        name: &str,
        scope: Scope,
        days: Option<u32>,
    ) -> DomainResult<Created> {
        let db = &self.db;
        let name = name.trim();
        if name.is_empty() || name.chars().count() > 80 || name.chars().any(char::is_control) {
            return Err(DomainError::Invalid("Give the token a name of at most 80 characters.".into()));
        }
        if days.is_some_and(|d| !(1..=3650).contains(&d)) {
            return Err(DomainError::Invalid("A token expires after 1 to 3650 days, or never.".into()));
        }
        let live = self.list(actor).await?.iter().filter(|t| t.state == "active").count();
        if live >= MAX_TOKENS {
            return Err(DomainError::Invalid(format!(
                "You can hold at most {MAX_TOKENS} live tokens; revoke one."
            )));
        }
        let token = format!("{TOKEN_PREFIX}{}", random_token());
        let prefix: String = token.chars().take(12).collect();
        let now = Utc::now();
        let saved = repo::insert(
            db,
            TokenRecord {
                id: Uuid::now_v7(),
                user_id: actor.user_id(),
                name: name.to_string(),
                prefix: prefix.clone(),
                token_hash: hash_token(&token),
                scope: scope.as_str().to_string(),
                expires_at: days.map(|d| now + Duration::days(i64::from(d))),
                last_used_at: None,
                revoked_at: None,
                created_at: now,
            },
        )
        .await?;
        audit::record(
            db,
            origin,
            "token.create",
            &format!("token:{prefix}"),
            serde_json::json!({ "name": name, "scope": scope.as_str(), "expires_days": days }),
        )
        .await?;
        Ok(Created { token: crate::secret::Secret::new(token), row: row(saved, now) })
    }

    /// Revokes one of the actor's tokens.
    pub async fn revoke(&self, actor: &Actor, origin: &Origin, id: Uuid) -> DomainResult<()> {
        let db = &self.db;
        let found = repo::find_owned(db, actor.user_id(), id).await?.ok_or(DomainError::NotFound)?;
        if found.revoked_at.is_none() {
            repo::revoke(db, found.id, Utc::now()).await?;
            audit::record(
                db,
                origin,
                "token.revoke",
                &format!("token:{}", found.prefix),
                serde_json::json!({}),
            )
            .await?;
        }
        Ok(())
    }

    /// Checks a presented token; records its use (at most once a minute).
    pub async fn authenticate(&self, presented: &str) -> DomainResult<Result<TokenCaller, Refusal>> {
        let db = &self.db;
        let presented = presented.trim();
        if !presented.starts_with(TOKEN_PREFIX) || presented.len() > 200 {
            return Ok(Err(Refusal::Invalid));
        }
        let hash = hash_token(presented);
        let generation = changes::generation(Kept::Accounts);
        let found = self
            .known
            .get_or_find(hash.clone(), generation, async || {
                let found = repo::find_with_user(db, &hash).await?;
                Ok::<_, crate::storage::StorageError>(found.map(|(record, user)| {
                    let used = std::sync::Mutex::new(record.last_used_at);
                    Arc::new(Known { record, user, used })
                }))
            })
            .await?;
        let Some(known) = found else { return Ok(Err(Refusal::Invalid)) };
        let (found, user) = (&known.record, &known.user);
        let now = Utc::now();
        if found.revoked_at.is_some() || found.expires_at.is_some_and(|e| e <= now) {
            return Ok(Err(Refusal::Invalid));
        }
        let Some(scope) = Scope::parse(&found.scope) else { return Ok(Err(Refusal::Invalid)) };
        if user.status != UserStatus::Active {
            return Ok(Err(Refusal::Disabled));
        }
        if known.record_use(now) {
            repo::touch(db, found.id, now).await?;
        }
        Ok(Ok(TokenCaller { actor: Actor::verified(user), user: user.clone(), scope, token_id: found.id }))
    }

    /// `arbor admin token`: a token for the user with this email, made by the operator at the
    /// command line (whoever runs it holds the server's files and key, so no session is needed).
    pub async fn issue_for_operator(
        &self,
        email: &str,
        name: &str,
        scope: Scope,
        days: Option<u32>,
    ) -> DomainResult<Created> {
        let db = &self.db;
        let email = crate::domain::accounts::normalize_email(email)?;
        let user = crate::domain::accounts::one_by_email(db, &email).await?.ok_or(DomainError::NotFound)?;
        self.create(&Actor::verified(&user), &audit::Origin::cli(), name, scope, days).await
    }
}

impl Known {
    /// Whether this use is to be written down (at most once a minute per token).
    fn record_use(&self, now: DateTime<Utc>) -> bool {
        let mut used = self.used.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
        if used.is_some_and(|t| now - t <= Duration::seconds(60)) {
            return false;
        }
        *used = Some(now);
        true
    }
}

/// A new token: the value (shown once) and its row.
#[derive(Debug)]
pub struct Created {
    /// The whole token; never stored, never shown again.
    pub token: crate::secret::Secret,
    /// How it is listed.
    pub row: TokenRow,
}

/// Why a presented token was refused.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Refusal {
    /// Unknown, malformed, revoked or expired: the same answer for all of them.
    Invalid,
    /// The token's user is disabled.
    Disabled,
}

/// A caller authenticated by token.
#[derive(Debug, Clone)]
pub struct TokenCaller {
    /// The user.
    pub user: User,
    /// The actor for service calls.
    pub actor: Actor,
    /// The token's scope.
    pub scope: Scope,
    /// The token's row id.
    pub token_id: Uuid,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn scopes_parse() {
        assert_eq!(Scope::parse("full"), Some(Scope::Full));
        assert_eq!(Scope::parse("api"), Some(Scope::Api));
        assert_eq!(Scope::parse("root"), None);
        assert_eq!(Scope::Api.as_str(), "api");
    }
}
