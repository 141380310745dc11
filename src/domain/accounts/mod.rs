//! People and the acting-user value that authorizes every call.

pub mod api_tokens;
pub mod browser;
pub mod invitations;
pub mod oidc_accounts;

use uuid::Uuid;

pub use crate::model::accounts::{Role, Theme, User, UserStatus};

pub use crate::domain::authz::Actor;

use crate::auth::passwords;
use crate::domain::{DomainError, DomainResult};
use crate::storage::Db;
use crate::storage::repos::{auth_sessions, setup_tokens, users};

/// Local accounts and the member's own account: sign-up, sign-in and password changes, the
/// first administrator's setup link, the colour theme and browser sessions. Built once in the
/// app state around the database and the password hasher (one per server: its gate bounds the
/// hashes running at once).
#[derive(Clone)]
pub struct Accounts {
    db: Db,
    hasher: passwords::Hasher,
    /// Members' API tokens.
    pub tokens: api_tokens::ApiTokens,
    /// Invitations to the instance.
    pub invitations: invitations::Invitations,
    /// Browser sessions.
    pub browser: browser::BrowserSessions,
}

impl Accounts {
    /// The service over `db`, hashing with `hasher`, with the browser session lifetimes of
    /// `sessions`.
    pub fn new(db: Db, hasher: passwords::Hasher, sessions: crate::config::AuthConfig) -> Accounts {
        let tokens = api_tokens::ApiTokens::new(db.clone());
        let invitations = invitations::Invitations { db: db.clone(), hasher: hasher.clone() };
        let browser = browser::BrowserSessions::new(db.clone(), sessions);
        Accounts { db, hasher, tokens, invitations, browser }
    }
}

/// The one message for every failed password sign-in: it never tells whether the email exists.
pub const BAD_CREDENTIALS: &str = "That email and password do not match an account.";

/// Lower-cases and checks an email address (shape only; delivery is the mail server's job).
pub fn normalize_email(email: &str) -> DomainResult<String> {
    let email = email.trim().to_lowercase();
    let valid = email.len() <= 254
        && !email.chars().any(|c| c.is_whitespace() || c.is_control() || c == '<' || c == '>')
        && email.split_once('@').is_some_and(|(local, domain)| {
            !local.is_empty()
                && domain.contains('.')
                && !domain.starts_with('.')
                && !domain.ends_with('.')
                && !domain.contains('@')
        });
    if valid { Ok(email) } else { Err(DomainError::Invalid("Enter a valid email address.".into())) }
}

/// What these people are called (their name, else their email), by id, in one query: the thread
/// of a shared workspace says who asked, and a dialog who decided. Ids of deleted accounts are
/// left out.
pub async fn names(
    db: &Db,
    ids: &[uuid::Uuid],
) -> DomainResult<std::collections::HashMap<uuid::Uuid, String>> {
    if ids.is_empty() {
        return Ok(Default::default());
    }
    Ok(crate::storage::repos::users::names_of(db, ids).await?)
}

/// The one account with this email, for work an admin does by email (allow-lists, quotas,
/// `arbor admin promote`, `arbor admin token`). Only verified emails are looked up; when two
/// accounts share one (possible with emails from before verification was checked), it refuses
/// rather than pick one.
pub async fn one_by_email(db: &Db, email: &str) -> DomainResult<Option<User>> {
    let email = normalize_email(email)?;
    let mut found = users::find_by_email(db, &email).await?;
    match found.len() {
        0 => Ok(None),
        1 => Ok(found.pop().map(|(user, _)| user)),
        _ => Err(DomainError::Conflict(format!(
            "More than one account has the email {email}; change one of them in the admin console first."
        ))),
    }
}

/// Whether some account already has this (verified) email.
pub async fn email_taken(db: &Db, email: &str) -> DomainResult<bool> {
    Ok(!users::find_by_email(db, email).await?.is_empty())
}

/// Checks a new password against the length rule.
pub fn check_password(password: &str, min_len: usize) -> DomainResult<()> {
    let n = password.chars().count();
    if n < min_len {
        return Err(DomainError::Invalid(format!("Use at least {min_len} characters for the password.")));
    }
    if n > 1024 {
        return Err(DomainError::Invalid("That password is longer than 1024 characters.".into()));
    }
    Ok(())
}

fn clean_display_name(name: &str, email: &str) -> DomainResult<String> {
    let name = name.trim();
    if name.chars().any(char::is_control) || name.chars().count() > 100 {
        return Err(DomainError::Invalid("Use a name of at most 100 characters.".into()));
    }
    Ok(if name.is_empty() { email.split('@').next().unwrap_or(email).to_string() } else { name.to_string() })
}

/// What a password change ended besides the old password.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize)]
pub struct PasswordChanged {
    /// Other browser sessions signed out.
    pub sessions_ended: u64,
    /// Full-access API tokens revoked.
    pub tokens_revoked: u64,
}

impl Accounts {
    /// When no admin exists, issues a new one-time setup token (older links stop working).
    pub async fn open_setup(&self) -> DomainResult<Option<String>> {
        let db = &self.db;
        if users::count_admins(db).await? > 0 {
            return Ok(None);
        }
        let token = crate::auth::sessions::random_token();
        setup_tokens::replace(db, &crate::auth::sessions::hash_token(&token)).await?;
        Ok(Some(token))
    }

    /// Creates a local account with the given role.
    pub async fn create_local(
        &self,
        email: &str,
        display_name: &str,
        password: &str,
        min_len: usize,
        role: Role,
    ) -> DomainResult<User> {
        let db = &self.db;
        let hasher = &self.hasher;
        let email = normalize_email(email)?;
        check_password(password, min_len)?;
        let display_name = clean_display_name(display_name, &email)?;
        if email_taken(db, &email).await? {
            return Err(DomainError::Conflict(
                "We could not create that account. If you already have one, sign in instead.".into(),
            ));
        }
        let hash = hasher.hash(password.to_string()).await?;
        Ok(users::insert_local(db, &email, &display_name, role, &hash).await?)
    }

    /// Checks a local sign-in. Unknown email and wrong password fail alike, in the same time.
    pub async fn sign_in_local(&self, email: &str, password: &str) -> DomainResult<User> {
        let db = &self.db;
        let hasher = &self.hasher;
        let found = match normalize_email(email) {
            Ok(email) => users::find_local_by_email(db, &email).await?,
            Err(_) => None,
        };
        let (user, hash) = match found {
            Some((user, hash)) => (Some(user), Some(hash)),
            None => (None, None),
        };
        if !hasher.verify(password.to_string(), hash).await? {
            return Err(DomainError::Invalid(BAD_CREDENTIALS.into()));
        }
        let user = user.ok_or_else(|| DomainError::Invalid(BAD_CREDENTIALS.into()))?;
        if user.status != UserStatus::Active {
            return Err(DomainError::Forbidden);
        }
        users::touch_login(db, user.id).await?;
        Ok(user)
    }

    /// Changes the actor's own password after checking the current one.
    pub async fn change_password(
        &self,
        actor: &Actor,
        this_session: &str,
        current: &str,
        new: &str,
        min_len: usize,
    ) -> DomainResult<PasswordChanged> {
        let db = &self.db;
        let hasher = &self.hasher;
        let stored = users::password_hash(db, actor.user_id()).await?;
        if stored.is_none() {
            return Err(DomainError::Invalid(
                "Your account signs in through your organisation; it has no password here.".into(),
            ));
        }
        if !hasher.verify(current.to_string(), stored).await? {
            return Err(DomainError::Invalid("The current password is not correct.".into()));
        }
        check_password(new, min_len)?;
        let hash = hasher.hash(new.to_string()).await?;
        users::set_password(db, actor.user_id(), &hash).await?;
        // Whoever knew the old password may hold a browser session or a full-access token made
        // with it: both end now. API-only tokens cannot change the account and stay.
        let sessions_ended = auth_sessions::delete_others(db, actor.user_id(), this_session).await?;
        let tokens_revoked = crate::storage::repos::api_tokens::revoke_scope(
            db,
            actor.user_id(),
            api_tokens::Scope::Full.as_str(),
            chrono::Utc::now(),
        )
        .await?;
        Ok(PasswordChanged { sessions_ended, tokens_revoked })
    }

    /// Whether a setup link is still usable.
    pub async fn setup_is_open(&self, token: &str) -> DomainResult<bool> {
        let db = &self.db;
        if users::count_admins(db).await? > 0 {
            return Ok(false);
        }
        Ok(setup_tokens::is_open(db, &crate::auth::sessions::hash_token(token)).await?)
    }

    /// Makes `user_id` the administrator if the setup token is still unused, in one transaction.
    /// Exactly one caller can win, however many race.
    pub async fn redeem_setup(&self, token: &str, user_id: Uuid) -> DomainResult<bool> {
        let db = &self.db;
        let txn = crate::storage::Tx::begin(db).await?;
        let won = setup_tokens::redeem(txn.conn(), &crate::auth::sessions::hash_token(token), user_id)
            .await?
            && users::count_admins(txn.conn()).await? == 0;
        if won {
            users::set_role(txn.conn(), user_id, Role::Admin).await?;
            txn.commit().await?;
        } else {
            txn.rollback().await?;
        }
        Ok(won)
    }

    /// Makes an existing user an administrator (CLI).
    pub async fn promote_by_email(&self, email: &str) -> DomainResult<User> {
        let db = &self.db;
        let email = normalize_email(email)?;
        let user = one_by_email(db, &email).await?.ok_or(DomainError::NotFound)?;
        users::set_role(db, user.id, Role::Admin).await?;
        Ok(User { role: Role::Admin, ..user })
    }

    /// Sets the actor's colour theme: `system` (follow the browser), `light` or `dark`.
    pub async fn set_theme(&self, actor: &Actor, chosen: &str) -> DomainResult<Theme> {
        let db = &self.db;
        let theme = Theme::parse(chosen.trim())
            .ok_or_else(|| DomainError::Invalid("Choose the system setting, light or dark.".into()))?;
        users::set_theme(db, actor.user_id(), theme).await?;
        Ok(theme)
    }

    /// The actor's own browser sessions.
    pub async fn list_sessions(&self, actor: &Actor) -> DomainResult<Vec<auth_sessions::SessionListing>> {
        let db = &self.db;
        Ok(auth_sessions::list_for_user(db, actor.user_id()).await?)
    }

    /// Ends one of the actor's own sessions; someone else's is `NotFound`.
    pub async fn revoke_session(&self, actor: &Actor, session_id: &str) -> DomainResult<()> {
        let db = &self.db;
        if auth_sessions::delete_owned(db, actor.user_id(), session_id).await? {
            Ok(())
        } else {
            Err(DomainError::NotFound)
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn emails_are_normalised_and_checked() {
        assert_eq!(normalize_email("  Ada@Example.COM ").unwrap(), "ada@example.com");
        for bad in [
            "",
            "ada",
            "ada@",
            "@example.com",
            "ada@example",
            "a b@example.com",
            "ada@.com",
            "<a>@x.io",
            "a@b@c.io",
        ] {
            assert!(normalize_email(bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn password_length_is_enforced() {
        assert!(check_password("short", 12).is_err());
        assert!(check_password("twelve chars", 12).is_ok());
        assert!(check_password(&"x".repeat(1025), 12).is_err());
    }
}
