//! The audit log: who did what to what, when and from where. Services append a row for every
//! sign-in, role or status change, key change (never a value), provider change, quota change,
//! approval and vault event; admins read it filtered. Nothing updates or deletes a row.

use chrono::{DateTime, Utc};
use serde::Serialize;
use uuid::Uuid;

use crate::domain::DomainResult;
use crate::domain::authz::Admin;
use crate::model::accounts::User;
use crate::storage::Db;
use crate::storage::repos::audit as repo;

/// Who is acting and from which address, as the audit log records it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Origin {
    /// The acting user, if any.
    pub actor_id: Option<Uuid>,
    /// How they are known (an email, "system", "cli").
    pub actor: String,
    /// Client address.
    pub ip: Option<String>,
}

impl Origin {
    /// A signed-in user acting from `ip`.
    pub fn user(user: &User, ip: Option<String>) -> Origin {
        Origin { actor_id: Some(user.id), actor: user.email.clone(), ip }
    }

    /// The command line.
    pub fn cli() -> Origin {
        Origin { actor_id: None, actor: "cli".into(), ip: None }
    }

    /// Arbor itself.
    pub fn system() -> Origin {
        Origin { actor_id: None, actor: "system".into(), ip: None }
    }
}

/// Appends a row.
pub async fn record<C: crate::storage::Conn>(
    db: &C,
    origin: &Origin,
    action: &str,
    target: &str,
    details: serde_json::Value,
) -> DomainResult<()> {
    repo::insert(
        db,
        repo::NewEntry {
            actor_id: origin.actor_id,
            actor: &origin.actor,
            action,
            target,
            details,
            ip: origin.ip.as_deref(),
        },
    )
    .await?;
    Ok(())
}

/// A row for the admin page.
#[derive(Debug, Clone, Serialize)]
pub struct Entry {
    /// Row id (paging cursor).
    pub id: Uuid,
    /// When.
    pub at: DateTime<Utc>,
    /// Who, as recorded.
    pub actor: String,
    /// What.
    pub action: String,
    /// To what.
    pub target: String,
    /// Details as JSON text.
    pub details: String,
    /// From where.
    pub ip: Option<String>,
}

/// Filters of the audit page.
pub type Filter = repo::Filter;

/// Rows newest first, one page plus whether there are more (admins only: the console's
/// `AdminConsole::audit_log`).
pub(crate) async fn list(
    db: &Db,
    admin: &Admin,
    filter: &Filter,
    page: u64,
) -> DomainResult<(Vec<Entry>, bool)> {
    let _actor = admin.actor();
    let mut rows = repo::list(db, filter, page + 1).await?;
    let more = rows.len() as u64 > page;
    rows.truncate(usize::try_from(page).unwrap_or(usize::MAX));
    Ok((
        rows.into_iter()
            .map(|r| Entry {
                id: r.id,
                at: r.at,
                actor: r.actor,
                action: r.action,
                target: r.target,
                details: r.details,
                ip: r.ip,
            })
            .collect(),
        more,
    ))
}
