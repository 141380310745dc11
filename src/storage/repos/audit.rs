//! Queries over `audit_log`: inserts and filtered reads; the table refuses updates and deletes.

use chrono::{DateTime, Utc};
use sea_orm::{
    ActiveModelTrait, ColumnTrait, ConnectionTrait, EntityTrait, QueryFilter, QueryOrder, QuerySelect, Set,
};
use uuid::Uuid;

use crate::model::records::AuditEntry;
use crate::storage::StorageResult;
use crate::storage::entities::audit_entry;

/// A row to append.
#[derive(Debug, Clone)]
pub struct NewEntry<'a> {
    /// Who acted (none for the system or the command line).
    pub actor_id: Option<Uuid>,
    /// How the actor was known at the time (an email, "system", "cli").
    pub actor: &'a str,
    /// What was done, dotted: `user.role`, `vault.decrypt`, `provider.key_add`.
    pub action: &'a str,
    /// What it was done to.
    pub target: &'a str,
    /// Details as JSON; never a secret value.
    pub details: serde_json::Value,
    /// Where the request came from.
    pub ip: Option<&'a str>,
}

/// Appends one row.
pub async fn insert<C: ConnectionTrait>(db: &C, e: NewEntry<'_>) -> StorageResult<()> {
    audit_entry::ActiveModel {
        id: Set(Uuid::now_v7()),
        at: Set(Utc::now()),
        actor_id: Set(e.actor_id),
        actor: Set(e.actor.to_string()),
        action: Set(e.action.to_string()),
        target: Set(e.target.to_string()),
        details: Set(e.details.to_string()),
        ip: Set(e.ip.map(str::to_string)),
    }
    .insert(db)
    .await?;
    Ok(())
}

/// Which rows to read.
#[derive(Debug, Clone, Default)]
pub struct Filter {
    /// Action prefix (`user.` matches every user action).
    pub action: Option<String>,
    /// Substring of the actor's label.
    pub actor: Option<String>,
    /// Substring of the target.
    pub target: Option<String>,
    /// Rows at or after.
    pub since: Option<DateTime<Utc>>,
    /// Rows before.
    pub until: Option<DateTime<Utc>>,
    /// Rows older than this id (the next page).
    pub before: Option<Uuid>,
}

/// Newest first, at most `limit` rows.
pub async fn list<C: ConnectionTrait>(db: &C, f: &Filter, limit: u64) -> StorageResult<Vec<AuditEntry>> {
    let mut q = audit_entry::Entity::find();
    if let Some(a) = f.action.as_deref().filter(|a| !a.is_empty()) {
        q = q.filter(audit_entry::Column::Action.starts_with(a));
    }
    if let Some(a) = f.actor.as_deref().filter(|a| !a.is_empty()) {
        q = q.filter(audit_entry::Column::Actor.contains(a));
    }
    if let Some(t) = f.target.as_deref().filter(|t| !t.is_empty()) {
        q = q.filter(audit_entry::Column::Target.contains(t));
    }
    if let Some(s) = f.since {
        q = q.filter(audit_entry::Column::At.gte(s));
    }
    if let Some(u) = f.until {
        q = q.filter(audit_entry::Column::At.lt(u));
    }
    if let Some(b) = f.before {
        q = q.filter(audit_entry::Column::Id.lt(b));
    }
    Ok(q.order_by_desc(audit_entry::Column::Id)
        .limit(limit)
        .all(db)
        .await?
        .into_iter()
        .map(Into::into)
        .collect())
}
