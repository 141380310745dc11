//! Usage rows and the state of runs: recording what a call cost, marking runs orphaned by a crash
//! interrupted, and reading a run's status.

use super::*;

/// One provider call to record in `usage`.
pub struct UsageRow<'a> {
    /// Who made it.
    pub user_id: Uuid,
    /// From which session (none for API calls).
    pub session_id: Option<Uuid>,
    /// For which message (none for API calls).
    pub message_id: Option<Uuid>,
    /// Provider name.
    pub provider: &'a str,
    /// Model id.
    pub model: &'a str,
    /// Counts and cost.
    pub usage: MessageUsage,
    /// Time to the end of the call.
    pub latency_ms: u64,
    /// `ui` or `api`.
    pub via: &'a str,
}

/// Appends a usage row.
pub async fn insert_usage(db: &Db, u: &UsageRow<'_>) -> StorageResult<()> {
    insert_stamped(db, &StampedUsage::of(u)).await
}

/// A usage row with its id and time fixed and its tokens counted in the metrics, once: a write
/// that is tried again inserts the same row (and the repeat of one that did commit is refused
/// by its key instead of counting the call twice).
pub struct StampedUsage(usage::ActiveModel);

impl StampedUsage {
    /// Stamps `u` now.
    pub fn of(u: &UsageRow<'_>) -> StampedUsage {
        StampedUsage(usage_model(u))
    }

    /// The row's insert, for a script.
    pub(super) fn insert(&self) -> sea_orm::Insert<usage::ActiveModel> {
        usage::Entity::insert(self.0.clone())
    }
}

/// Appends a stamped usage row.
pub async fn insert_stamped(db: &Db, row: &StampedUsage) -> StorageResult<()> {
    row.insert().exec(db).await?;
    Ok(())
}

/// A usage row ready to insert, stamped now. Every usage row (browser and API) passes here,
/// so this is where its tokens and cost are counted in the metrics.
pub fn usage_model(u: &UsageRow<'_>) -> usage::ActiveModel {
    let n = &u.usage;
    crate::metrics::provider_usage(u.provider, u.model, u.via, n.input, n.output, n.cost_micros);
    usage::ActiveModel {
        id: Set(Uuid::now_v7()),
        user_id: Set(Some(u.user_id)),
        session_id: Set(u.session_id),
        message_id: Set(u.message_id),
        provider: Set(u.provider.to_string()),
        model: Set(u.model.to_string()),
        tokens_in: Set(to_i64(u.usage.input)),
        tokens_out: Set(to_i64(u.usage.output)),
        tokens_cached: Set(to_i64(u.usage.cached)),
        estimated: Set(u.usage.estimated),
        cost_micros: Set(u.usage.cost_micros),
        latency_ms: Set(to_i64(u.latency_ms)),
        via: Set(u.via.to_string()),
        created_at: Set(Utc::now()),
    }
}

/// After a crash: runs left `running` become `interrupted`, and so do their messages (text kept).
pub async fn interrupt_orphans(db: &Db) -> StorageResult<u64> {
    let txn = crate::storage::begin_write(db).await?;
    let now = Utc::now();
    let runs = run::Entity::update_many()
        .col_expr(run::Column::Status, Expr::value("interrupted"))
        .col_expr(run::Column::UpdatedAt, Expr::value(now))
        .col_expr(run::Column::FinishedAt, Expr::value(Some(now)))
        .filter(run::Column::Status.eq("running"))
        .exec(&txn)
        .await?;
    message::Entity::update_many()
        .col_expr(message::Column::Status, Expr::value(MessageStatus::Interrupted.as_str()))
        .col_expr(message::Column::UpdatedAt, Expr::value(now))
        .filter(message::Column::Status.eq(MessageStatus::Streaming.as_str()))
        .exec(&txn)
        .await?;
    txn.commit().await?;
    Ok(runs.rows_affected)
}

/// How many runs are in each of the states that are not over yet.
pub async fn count_unfinished_runs(db: &Db) -> StorageResult<Vec<(String, u64)>> {
    let mut out = Vec::new();
    for state in ["running", "awaiting_confirmation"] {
        let n = sea_orm::PaginatorTrait::count(run::Entity::find().filter(run::Column::Status.eq(state)), db)
            .await?;
        out.push((state.to_string(), n));
    }
    Ok(out)
}

/// The status of a run, if it exists in this session.
pub async fn run_status(db: &Db, session_id: Uuid, run_id: Uuid) -> StorageResult<Option<String>> {
    Ok(run::Entity::find_by_id(run_id)
        .filter(run::Column::SessionId.eq(session_id))
        .one(db)
        .await?
        .map(|r| r.status))
}

/// The newest run writing `message_id`.
pub async fn latest_run_for_message(
    db: &Db,
    session_id: Uuid,
    message_id: Uuid,
) -> StorageResult<Option<Uuid>> {
    Ok(run::Entity::find()
        .filter(run::Column::SessionId.eq(session_id))
        .filter(run::Column::AssistantMessageId.eq(message_id))
        .order_by_desc(run::Column::CreatedAt)
        .one(db)
        .await?
        .map(|r| r.id))
}
