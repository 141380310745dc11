//! Domain services: no actix, no tera. Every read of user data is scoped to the acting user here.

pub mod accounts;
pub mod admin;
pub mod agent;
pub mod audit;
pub mod authz;
pub mod deletion;
pub mod files;
pub(crate) mod fresh;
pub mod gateway;
pub mod mcp;
pub mod operations;
pub mod pages;
pub mod providers;
pub mod runs;
pub mod scim;
pub mod search;
pub mod sessions;
pub mod teams;
pub mod transfer;
pub mod validate;

use crate::storage::StorageError;

/// What a domain operation can fail with; the web layer maps each to a status.
#[derive(Debug, thiserror::Error)]
pub enum DomainError {
    /// The thing does not exist, or it is not the actor's (the two are never told apart).
    #[error("not found")]
    NotFound,
    /// The actor is known but may not do this.
    #[error("forbidden")]
    Forbidden,
    /// The input was rejected; the message is safe to show.
    #[error("{0}")]
    Invalid(String),
    /// The operation conflicts with the current state; the message is safe to show.
    #[error("{0}")]
    Conflict(String),
    /// A rate limit or quota says no for now; the message is safe to show, the number is the
    /// seconds until trying again may work.
    #[error("{0}")]
    Limited(String, u64),
    /// The server is at a fixed capacity for this kind of work (e.g. password hashing); the
    /// message is safe to show, the number is the seconds until trying again may work.
    #[error("{0}")]
    Busy(String, u64),
    /// The input is larger than a limit allows (a file, a member's storage); the message is safe
    /// to show.
    #[error("{0}")]
    TooLarge(String),
    /// A model provider failed to do what was asked; the message is safe to show.
    #[error("{0}")]
    Upstream(String),
    /// Storage failed; details are logged, not shown.
    #[error(transparent)]
    Storage(#[from] StorageError),
}

impl From<crate::vault::store::StoreError> for DomainError {
    fn from(e: crate::vault::store::StoreError) -> Self {
        use crate::vault::store::StoreError;
        match e {
            StoreError::NotFound => DomainError::NotFound,
            StoreError::Empty => DomainError::Invalid("Paste the key; it cannot be empty.".into()),
            // Crypto failures and storage errors are logged, never shown.
            other => DomainError::Storage(crate::storage::StorageError::Corrupt(other.to_string())),
        }
    }
}

impl From<crate::auth::passwords::PasswordError> for DomainError {
    fn from(e: crate::auth::passwords::PasswordError) -> Self {
        use crate::auth::passwords::PasswordError;
        match e {
            PasswordError::Busy => DomainError::Busy(
                "The server is busy checking other sign-ins. Try again in a few seconds.".into(),
                2,
            ),
            PasswordError::Failed(m) => DomainError::Storage(crate::storage::StorageError::Corrupt(m)),
        }
    }
}

/// Shorthand for domain results.
pub type DomainResult<T> = Result<T, DomainError>;
