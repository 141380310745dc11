//! Model aliases: a user's own names for a model or a comma-separated fallback chain, so tools
//! with fixed model names can be pointed at any model (`gpt-4` → `anthropic/claude-sonnet-4-5,
//! gemini/gemini-2.5-pro`).

use std::sync::Arc;

use serde::Serialize;
use uuid::Uuid;

use crate::domain::accounts::Actor;
use crate::domain::audit::{self, Origin};
use crate::domain::fresh::FreshCopies;
use crate::domain::{DomainError, DomainResult};
use crate::storage::Db;
use crate::storage::changes::{self, Kept};
use crate::storage::repos::aliases as repo;

/// A member's model aliases as a service over the database (built once in the app state; the
/// gateway holds its own to expand the names it is sent).
#[derive(Clone)]
pub struct Aliases {
    db: Db,
    /// Members' alias tables as last read: every gateway call looks its model name up, so the
    /// lookup is served from memory until an alias is written (here or, through the bus, on
    /// another instance); a copy [`KEPT_AGE`] old is read again beside the call that finds it so.
    kept: Arc<FreshCopies<Uuid, AliasTable>>,
}

impl Aliases {
    /// The service over this database.
    pub fn new(db: Db) -> Aliases {
        Aliases { db, kept: Arc::new(FreshCopies::new(KEPT_AGE, KEPT_MOST)) }
    }
}

/// A member's aliases as `(alias, target)`, as last read.
type AliasTable = Arc<Vec<(String, String)>>;

/// How long a member's aliases are used from memory at most (how long a change another instance
/// made counts here when its note was lost).
const KEPT_AGE: std::time::Duration = std::time::Duration::from_secs(10);
/// Members whose aliases are kept at most (beyond: all are dropped and read again).
const KEPT_MOST: usize = 10_000;

/// The most aliases one user may keep.
pub const MAX_ALIASES: usize = 100;

/// An alias as listed.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Alias {
    /// The name requests use.
    pub alias: String,
    /// What it stands for: `[provider/]model[$alias]`, comma-separated.
    pub target: String,
}

/// Whether an alias name is well-formed: `[A-Za-z0-9._-]+`, at most 64, not starting with a
/// dot. Dots are allowed because the names tools hard-code have them (`gemini-2.5-pro`).
pub fn valid_alias(name: &str) -> bool {
    (1..=64).contains(&name.len())
        && !name.starts_with('.')
        && name.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'_' || b == b'-' || b == b'.')
}

impl Aliases {
    /// The actor's aliases by name.
    pub async fn list(&self, actor: &Actor) -> DomainResult<Vec<Alias>> {
        Ok(repo::list(&self.db, actor.user_id())
            .await?
            .into_iter()
            .map(|(alias, target)| Alias { alias, target })
            .collect())
    }

    /// What an alias stands for, if the actor has it.
    pub async fn lookup(&self, actor: &Actor, name: &str) -> DomainResult<Option<String>> {
        if !valid_alias(name) {
            return Ok(None);
        }
        let generation = changes::generation(Kept::Aliases);
        let member = actor.user_id();
        let read = || {
            let db = self.db.clone();
            async move { Ok::<_, crate::storage::StorageError>(Arc::new(repo::list(&db, member).await?)) }
        };
        let table = self.kept.get_or_refresh(member, generation, read).await?;
        Ok(table.iter().find(|(alias, _)| alias == name).map(|(_, target)| target.clone()))
    }

    /// Creates or replaces an alias.
    pub async fn set(&self, actor: &Actor, origin: &Origin, name: &str, target: &str) -> DomainResult<Alias> {
        let db = &self.db;
        let name = name.trim();
        if !valid_alias(name) {
            return Err(DomainError::Invalid(
                "An alias may use letters, digits, ., - and _ (at most 64), like \"gemini-2.5-pro\".".into(),
            ));
        }
        let models: Vec<&str> = target.split(',').map(str::trim).filter(|m| !m.is_empty()).collect();
        if models.is_empty() || models.len() > 10 {
            return Err(DomainError::Invalid("Name one to ten models, separated by commas.".into()));
        }
        if models.iter().any(|m| m.len() > 200 || m.chars().any(|c| c.is_control() || c.is_whitespace())) {
            return Err(DomainError::Invalid("A model name is too long or has spaces.".into()));
        }
        let target = models.join(",");
        let exists = repo::target(db, actor.user_id(), name).await?.is_some();
        if !exists && repo::count(db, actor.user_id()).await? >= MAX_ALIASES as u64 {
            return Err(DomainError::Invalid(format!("You can keep at most {MAX_ALIASES} aliases.")));
        }
        repo::put(db, actor.user_id(), name, &target).await?;
        audit::record(
            db,
            origin,
            "alias.set",
            &format!("alias:{name}"),
            serde_json::json!({ "target": target }),
        )
        .await?;
        Ok(Alias { alias: name.to_string(), target })
    }

    /// Deletes an alias.
    pub async fn delete(&self, actor: &Actor, origin: &Origin, name: &str) -> DomainResult<()> {
        let db = &self.db;
        if !repo::delete(db, actor.user_id(), name).await? {
            return Err(DomainError::NotFound);
        }
        audit::record(db, origin, "alias.delete", &format!("alias:{name}"), serde_json::json!({})).await
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn alias_names_are_checked() {
        assert!(valid_alias("gpt-4"));
        assert!(valid_alias("Fast_Model"));
        assert!(!valid_alias(""));
        assert!(!valid_alias("a/b"));
        assert!(!valid_alias("a$b"));
        assert!(!valid_alias("a b"));
        assert!(!valid_alias(&"a".repeat(65)));
    }
}
