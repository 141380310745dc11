//! Queries over `quotas`: per-user limits and the instance default, keyed by scope.

use chrono::Utc;
use sea_orm::{ActiveModelTrait, ColumnTrait, EntityTrait, QueryFilter, Set};

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

fn limits(r: &quota::Model) -> Limits {
    Limits {
        tokens_day: r.tokens_day,
        tokens_month: r.tokens_month,
        micros_day: r.micros_day,
        micros_month: r.micros_month,
    }
}

/// The rows of these scopes, in one query (this runs before every reply and API call).
pub async fn of_scopes(db: &Db, scopes: &[&str]) -> StorageResult<Vec<(String, Limits)>> {
    let rows = quota::Entity::find()
        .filter(quota::Column::Scope.is_in(scopes.iter().map(|s| s.to_string())))
        .all(db)
        .await?;
    Ok(rows.iter().map(|r| (r.scope.clone(), limits(r))).collect())
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
    Ok(())
}

/// Removes a scope's row, if any.
pub async fn remove(db: &Db, scope: &str) -> StorageResult<()> {
    quota::Entity::delete_by_id(scope.to_string()).exec(db).await?;
    Ok(())
}

/// [`remove`] in the caller's transaction.
pub async fn remove_in<C: sea_orm::ConnectionTrait>(conn: &C, scope: &str) -> StorageResult<()> {
    quota::Entity::delete_by_id(scope.to_string()).exec(conn).await?;
    Ok(())
}
