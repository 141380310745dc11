//! Queries of the instances sharing one database: their leases, and ending the runs of an
//! instance whose lease lapsed.

use chrono::{DateTime, Utc};
use sea_orm::sea_query::{Expr, Query};
use sea_orm::{ColumnTrait, Condition, EntityTrait, QueryFilter, QuerySelect, Set};
use uuid::Uuid;

use crate::model::messages::MessageStatus;
use crate::storage::entities::{instance, message, run};
use crate::storage::{Db, StorageResult};

/// Registers (or re-registers) an instance with a fresh lease.
pub async fn register(db: &Db, id: Uuid, version: &str, now: DateTime<Utc>) -> StorageResult<()> {
    instance::Entity::delete_by_id(id).exec(db).await?;
    let row = instance::ActiveModel {
        id: Set(id),
        started_at: Set(now),
        renewed_at: Set(now),
        version: Set(version.into()),
    };
    instance::Entity::insert(row).exec_without_returning(db).await?;
    Ok(())
}

/// Renews an instance's lease; false when its row is gone (another instance took its runs
/// over after the lease lapsed).
pub async fn renew(db: &Db, id: Uuid, now: DateTime<Utc>) -> StorageResult<bool> {
    let done = instance::Entity::update_many()
        .col_expr(instance::Column::RenewedAt, Expr::value(now))
        .filter(instance::Column::Id.eq(id))
        .exec(db)
        .await?;
    Ok(done.rows_affected == 1)
}

/// Removes an instance's row (it stops).
pub async fn remove(db: &Db, id: Uuid) -> StorageResult<()> {
    instance::Entity::delete_by_id(id).exec(db).await?;
    Ok(())
}

/// Instances whose lease lapsed before `before`.
pub async fn lapsed(db: &Db, before: DateTime<Utc>) -> StorageResult<Vec<Uuid>> {
    Ok(instance::Entity::find()
        .select_only()
        .column(instance::Column::Id)
        .filter(instance::Column::RenewedAt.lt(before))
        .into_tuple()
        .all(db)
        .await?)
}

/// Takes a lapsed instance's place: deletes its row if its lease still lapsed before `before`.
/// Only one of several instances trying at once wins.
pub async fn claim(db: &Db, id: Uuid, before: DateTime<Utc>) -> StorageResult<bool> {
    let done = instance::Entity::delete_many()
        .filter(instance::Column::Id.eq(id))
        .filter(instance::Column::RenewedAt.lt(before))
        .exec(db)
        .await?;
    Ok(done.rows_affected == 1)
}

/// Whose runs to end as interrupted.
#[derive(Debug, Clone, Copy)]
pub enum RunsOf {
    /// One instance's (it lapsed, or it is stopping).
    Instance(Uuid),
    /// Every run no live instance holds: none recorded, or one without a row.
    Unheld,
}

/// Marks the running runs of `whose` interrupted, and the messages streaming in their sessions
/// (one live run per session, so those are the runs' own). Returns `(session, run)` of each.
pub async fn interrupt_runs(db: &Db, whose: RunsOf) -> StorageResult<Vec<(Uuid, Uuid)>> {
    let txn = crate::storage::begin_write(db).await?;
    let held = match whose {
        RunsOf::Instance(id) => Condition::all().add(run::Column::InstanceId.eq(id)),
        RunsOf::Unheld => Condition::any().add(run::Column::InstanceId.is_null()).add(
            run::Column::InstanceId.not_in_subquery(
                Query::select().column(instance::Column::Id).from(instance::Entity).to_owned(),
            ),
        ),
    };
    let runs: Vec<(Uuid, Uuid)> = run::Entity::find()
        .select_only()
        .column(run::Column::SessionId)
        .column(run::Column::Id)
        .filter(run::Column::Status.eq("running"))
        .filter(held)
        .into_tuple()
        .all(&txn)
        .await?;
    if runs.is_empty() {
        txn.commit().await?;
        return Ok(runs);
    }
    let now = Utc::now();
    let run_ids: Vec<Uuid> = runs.iter().map(|(_, r)| *r).collect();
    let sessions: Vec<Uuid> = runs.iter().map(|(s, _)| *s).collect();
    run::Entity::update_many()
        .col_expr(run::Column::Status, Expr::value("interrupted"))
        .col_expr(run::Column::UpdatedAt, Expr::value(now))
        .col_expr(run::Column::FinishedAt, Expr::value(Some(now)))
        .filter(run::Column::Id.is_in(run_ids))
        .filter(run::Column::Status.eq("running"))
        .exec(&txn)
        .await?;
    message::Entity::update_many()
        .col_expr(message::Column::Status, Expr::value(MessageStatus::Interrupted.as_str()))
        .col_expr(message::Column::UpdatedAt, Expr::value(now))
        .filter(message::Column::SessionId.is_in(sessions))
        .filter(message::Column::Status.eq(MessageStatus::Streaming.as_str()))
        .exec(&txn)
        .await?;
    txn.commit().await?;
    Ok(runs)
}
