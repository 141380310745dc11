//! Responses the Responses API keeps (`store`): continuing one with `previous_response_id`,
//! reading and deleting it. A response belongs to the member whose token made it; another
//! member's id is not found.

use serde_json::Value;

use crate::domain::accounts::Actor;
use crate::domain::{DomainError, DomainResult};
use crate::providers::types::ChatMessage;
use crate::storage::Db;
use crate::storage::repos::stored_responses as repo;

/// Stored Responses API answers as a service over the database (the gateway's `stored`).
#[derive(Clone)]
pub struct StoredResponses {
    pub(super) db: Db,
}

/// The most responses a chain may join, and the most bytes their turns may hold together:
/// a caller cannot make one request read without bound.
const MAX_LINKS: usize = 256;
const MAX_CHAIN_BYTES: usize = 32 * 1024 * 1024;

/// Days a stored response is kept, as OpenAI keeps them; older ones are not found and are
/// deleted (at most once an hour, when a new one is kept).
pub const KEEP_DAYS: i64 = 30;

/// When expired responses were last deleted (seconds since the epoch).
static LAST_PURGE: std::sync::atomic::AtomicI64 = std::sync::atomic::AtomicI64::new(0);

/// The oldest creation time still kept.
fn kept_since() -> chrono::DateTime<chrono::Utc> {
    chrono::Utc::now() - chrono::Duration::days(KEEP_DAYS)
}

/// What a response continues: the chain's latest system prompt and its messages, oldest first.
#[derive(Debug, Default)]
pub struct Chain {
    /// The system prompt of the latest response that had one.
    pub system: Option<String>,
    /// Every turn's messages, oldest first.
    pub messages: Vec<ChatMessage>,
}

fn corrupt(message: String) -> DomainError {
    DomainError::Storage(crate::storage::StorageError::Corrupt(message))
}

impl StoredResponses {
    /// Joins the chain ending at `id` (the actor's own response).
    pub async fn chain(&self, actor: &Actor, id: &str) -> DomainResult<Chain> {
        let mut turns: Vec<Vec<ChatMessage>> = Vec::new();
        let (mut system, mut bytes, mut next) = (None, 0usize, Some(id.to_string()));
        while let Some(id) = next {
            if turns.len() == MAX_LINKS {
                return Err(DomainError::Invalid(format!(
                    "The response chain is longer than {MAX_LINKS} responses."
                )));
            }
            let row = repo::find(&self.db, actor.user_id(), &id, kept_since())
                .await?
                .ok_or(DomainError::NotFound)?;
            bytes += row.turn.len();
            if bytes > MAX_CHAIN_BYTES {
                return Err(DomainError::Invalid("The response chain is larger than 32 MiB.".into()));
            }
            let turn: Vec<ChatMessage> = serde_json::from_str(&row.turn)
                .map_err(|e| corrupt(format!("stored response {id} is unreadable: {e}")))?;
            if system.is_none() {
                system = row.system;
            }
            turns.push(turn);
            next = row.previous_id;
        }
        Ok(Chain { system, messages: turns.into_iter().rev().flatten().collect() })
    }

    /// Keeps a finished response for `actor`.
    pub async fn keep(&self, actor: &Actor, k: Keep<'_>) -> DomainResult<()> {
        let db = &self.db;
        let turn = serde_json::to_string(k.turn).map_err(|e| corrupt(e.to_string()))?;
        let row = repo::NewResponse {
            id: k.id,
            user_id: actor.user_id(),
            previous_id: k.previous_id,
            system: k.system,
            turn,
            body: k.body.to_string(),
        };
        repo::insert(db, row).await?;
        let now = chrono::Utc::now().timestamp();
        let last = LAST_PURGE.load(std::sync::atomic::Ordering::Relaxed);
        if now - last >= 3600
            && LAST_PURGE
                .compare_exchange(
                    last,
                    now,
                    std::sync::atomic::Ordering::Relaxed,
                    std::sync::atomic::Ordering::Relaxed,
                )
                .is_ok()
        {
            let gone = repo::delete_older_than(db, kept_since()).await?;
            if gone > 0 {
                tracing::info!(deleted = gone, "stored responses past their {KEEP_DAYS} days deleted");
            }
        }
        Ok(())
    }

    /// The response object of one of `actor`'s responses.
    pub async fn find(&self, actor: &Actor, id: &str) -> DomainResult<Value> {
        let row =
            repo::find(&self.db, actor.user_id(), id, kept_since()).await?.ok_or(DomainError::NotFound)?;
        serde_json::from_str(&row.body).map_err(|e| corrupt(format!("stored response {id}: {e}")))
    }

    /// Deletes one of `actor`'s responses.
    pub async fn forget(&self, actor: &Actor, id: &str) -> DomainResult<()> {
        if repo::delete(&self.db, actor.user_id(), id).await? { Ok(()) } else { Err(DomainError::NotFound) }
    }
}

/// A response to keep.
pub struct Keep<'a> {
    /// `resp_…`.
    pub id: &'a str,
    /// The response it continued.
    pub previous_id: Option<&'a str>,
    /// Its system prompt.
    pub system: Option<&'a str>,
    /// The request's own messages, then the answer.
    pub turn: &'a [ChatMessage],
    /// The response object.
    pub body: &'a Value,
}
