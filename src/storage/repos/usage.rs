//! Queries over `usage`: what a user spent since a moment, and the rows behind the usage page.

use chrono::{DateTime, Utc};
use sea_orm::{ColumnTrait, ConnectionTrait, DbBackend, EntityTrait, QueryFilter, QueryOrder, Statement};
use uuid::Uuid;

use crate::model::records::UsageRecord;
use crate::storage::StorageResult;
use crate::storage::entities::usage;

/// Tokens (in + out) and micro-dollars a user spent since `since`.
pub async fn spent_since<C: ConnectionTrait>(
    db: &C,
    user: Uuid,
    since: DateTime<Utc>,
) -> StorageResult<(i64, i64)> {
    let backend = db.get_database_backend();
    let (p1, p2) = if backend == DbBackend::Postgres { ("$1", "$2") } else { ("?", "?") };
    let sql = format!(
        "SELECT CAST(COALESCE(SUM(tokens_in + tokens_out), 0) AS BIGINT) AS tokens, \
         CAST(COALESCE(SUM(cost_micros), 0) AS BIGINT) AS micros \
         FROM usage WHERE user_id = {p1} AND created_at >= {p2}"
    );
    let row =
        db.query_one_raw(Statement::from_sql_and_values(backend, sql, [user.into(), since.into()])).await?;
    let Some(row) = row else { return Ok((0, 0)) };
    Ok((row.try_get::<i64>("", "tokens")?, row.try_get::<i64>("", "micros")?))
}

/// Every usage row in `[since, until)`, oldest first, optionally of one user.
pub async fn rows_between<C: ConnectionTrait>(
    db: &C,
    since: DateTime<Utc>,
    until: DateTime<Utc>,
    user: Option<Uuid>,
) -> StorageResult<Vec<UsageRecord>> {
    let mut q = usage::Entity::find()
        .filter(usage::Column::CreatedAt.gte(since))
        .filter(usage::Column::CreatedAt.lt(until));
    if let Some(user) = user {
        q = q.filter(usage::Column::UserId.eq(user));
    }
    Ok(q.order_by_asc(usage::Column::CreatedAt).all(db).await?.into_iter().map(Into::into).collect())
}
