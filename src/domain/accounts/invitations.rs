//! Invitations by email: an admin invites an address with a role; the single-use link expires.

use chrono::{Duration, Utc};
use uuid::Uuid;

use crate::auth::sessions::{hash_token, random_token};
use crate::domain::accounts::{self, Role, User, UserStatus};
use crate::domain::authz::Admin;
use crate::domain::{DomainError, DomainResult};
use crate::storage::Db;
use crate::storage::repos::{invitations as repo, users};

pub use crate::model::accounts::Invitation;

/// Invitations as a service: admins make and list them; the invited open and accept them
/// (with a password, hashed behind the server's one gate, or through the identity provider).
#[derive(Clone)]
pub struct Invitations {
    pub(super) db: Db,
    pub(super) hasher: crate::auth::passwords::Hasher,
}

/// A new invitation and the token for its link (shown or mailed once, stored only hashed).
#[derive(Debug)]
pub struct NewInvitation {
    /// The stored invitation.
    pub invitation: Invitation,
    /// The secret part of the link.
    pub token: String,
}

impl Invitations {
    /// Invites an address with a role. Admins only.
    pub async fn create(
        &self,
        admin: &Admin,
        email: &str,
        role: Role,
        valid_hours: i64,
    ) -> DomainResult<NewInvitation> {
        let db = &self.db;
        let actor = admin.actor();
        let email = accounts::normalize_email(email)?;
        if accounts::email_taken(db, &email).await? {
            return Err(DomainError::Conflict(format!("{email} already has an account.")));
        }
        let token = random_token();
        let expires = Utc::now() + Duration::hours(valid_hours);
        let invitation =
            repo::insert(db, &email, role, &hash_token(&token), actor.user_id(), expires).await?;
        Ok(NewInvitation { invitation, token })
    }

    /// The open invitation behind a link; used, expired and unknown links are all `NotFound`.
    pub async fn open(&self, token: &str) -> DomainResult<Invitation> {
        if token.len() != 43 {
            return Err(DomainError::NotFound);
        }
        let invitation =
            repo::find_by_token_hash(&self.db, &hash_token(token)).await?.ok_or(DomainError::NotFound)?;
        if invitation.is_open() { Ok(invitation) } else { Err(DomainError::NotFound) }
    }

    /// The open invitation with this id (a sign-in that started from its link).
    pub async fn open_by_id(&self, id: Uuid) -> DomainResult<Invitation> {
        let invitation = repo::find(&self.db, id).await?.ok_or(DomainError::NotFound)?;
        if invitation.is_open() { Ok(invitation) } else { Err(DomainError::NotFound) }
    }

    /// Accepts an invitation with a local password: the account and the acceptance are one
    /// transaction, so a link can create at most one account.
    pub async fn accept_local(
        &self,
        token: &str,
        display_name: &str,
        password: &str,
        min_len: usize,
    ) -> DomainResult<User> {
        let db = &self.db;
        let invitation = self.open(token).await?;
        accounts::check_password(password, min_len)?;
        let name = display_name.trim();
        if name.chars().count() > 100 || name.chars().any(char::is_control) {
            return Err(DomainError::Invalid("Use a name of at most 100 characters.".into()));
        }
        if accounts::email_taken(db, &invitation.email).await? {
            return Err(DomainError::Conflict(
                "An account with this email exists already. Sign in instead.".into(),
            ));
        }
        let name = if name.is_empty() {
            invitation.email.split('@').next().unwrap_or("").to_string()
        } else {
            name.to_string()
        };
        let hash = self.hasher.hash(password.to_string()).await?;
        let txn = crate::storage::Tx::begin(db).await?;
        let user =
            users::insert(txn.conn(), &invitation.email, &name, invitation.role, UserStatus::Active).await?;
        users::set_password(txn.conn(), user.id, &hash).await?;
        if !repo::mark_accepted(txn.conn(), invitation.id, user.id).await? {
            txn.rollback().await?;
            return Err(DomainError::NotFound);
        }
        txn.commit().await?;
        Ok(user)
    }

    /// Recent invitations. Admins only.
    pub async fn list(&self, admin: &Admin) -> DomainResult<Vec<Invitation>> {
        let _actor = admin.actor();
        Ok(repo::recent(&self.db, 100).await?)
    }
}
