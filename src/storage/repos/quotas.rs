//! Queries over `quotas`: per-user limits and the instance default, keyed by scope.

use chrono::Utc;
use sea_orm::{ActiveModelTrait, EntityTrait, Set};

use crate::storage::changes::{self, Kept};
use crate::storage::entities::quota;
use crate::storage::{Db, StorageResult};

/// The limits of one scope; `None` means unlimited.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Limits {
    /// Tokens per UTC day.
    pub tokens_day: Option<i64>,
    /// Tokens per calendar month.
    pub tokens_month: Option<i64>,
    /// Micro-dollars per UTC day.
    pub micros_day: Option<i64>,
    /// Micro-dollars per calendar month.
    pub micros_month: Option<i64>,
}

/// The table's generation (see [`crate::storage::changes`]): read it before reading the table,
/// and the copy is current while it has not moved.
pub fn generation() -> u64 {
    changes::generation(Kept::Quotas)
}

fn changed() {
    changes::changed(Kept::Quotas);
}

fn limits(r: &quota::Model) -> Limits {
    Limits {
        tokens_day: r.tokens_day,
        tokens_month: r.tokens_month,
        micros_day: r.micros_day,
        micros_month: r.micros_month,
    }
}

/// Every row.
pub async fn all(db: &Db) -> StorageResult<Vec<(String, Limits)>> {
    Ok(quota::Entity::find().all(db).await?.iter().map(|r| (r.scope.clone(), limits(r))).collect())
}

/// Sets the limits of a scope, inserting or replacing its row.
pub async fn put(db: &Db, scope: &str, l: Limits) -> StorageResult<()> {
    let existing = quota::Entity::find_by_id(scope.to_string()).one(db).await?;
    let row = quota::ActiveModel {
        scope: Set(scope.to_string()),
        tokens_day: Set(l.tokens_day),
        tokens_month: Set(l.tokens_month),
        micros_day: Set(l.micros_day),
        micros_month: Set(l.micros_month),
        updated_at: Set(Utc::now()),
    };
    if existing.is_some() {
        row.update(db).await?;
    } else {
        row.insert(db).await?;
    }
    changed();
    Ok(())
}

/// Removes a scope's row, if any.
pub async fn remove(db: &Db, scope: &str) -> StorageResult<()> {
    quota::Entity::delete_by_id(scope.to_string()).exec(db).await?;
    changed();
    Ok(())
}

/// [`remove`] in the caller's transaction.
/// (Before the commit: a copy read in between lives until its age runs out, and only ever held
/// the quota of a group being deleted.)
pub async fn remove_in<C: sea_orm::ConnectionTrait>(conn: &C, scope: &str) -> StorageResult<()> {
    quota::Entity::delete_by_id(scope.to_string()).exec(conn).await?;
    changed();
    Ok(())
}
