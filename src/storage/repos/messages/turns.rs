//! The writes of a turn: its messages and run when it starts, the partial text while it streams,
//! its end with the usage row. Each start and end is one transaction sent as one script
//! ([`Script::run_as_transaction`]: one call on SQLite, its `BEGIN` and `COMMIT` included).

use sea_orm::sea_query::{Expr, ExprTrait, Query};

use super::*;

/// A run to record.
pub struct NewRun {
    /// Id chosen by the caller (the registry already knows it).
    pub id: Uuid,
    /// The session's owner.
    pub owner_id: Uuid,
    /// The message the run answers.
    pub leaf_message_id: Uuid,
    /// The message it writes.
    pub assistant_message_id: Uuid,
}

fn insert_run_into(script: &mut Script, session_id: Uuid, r: &NewRun) {
    let now = Utc::now();
    let row = run::ActiveModel {
        id: Set(r.id),
        session_id: Set(session_id),
        owner_id: Set(r.owner_id),
        leaf_message_id: Set(Some(r.leaf_message_id)),
        assistant_message_id: Set(Some(r.assistant_message_id)),
        status: Set("running".into()),
        instance_id: Set(Some(crate::storage::instance_id())),
        // Every new run makes its first model call at once (`RunEngine::launch`): it is counted
        // here, in the statement that makes the run, rather than in a statement of its own.
        iterations: Set(1),
        error: Set(None),
        created_at: Set(now),
        updated_at: Set(now),
        finished_at: Set(None),
    };
    script.push(run::Entity::insert(row));
}

/// Marks the session changed (and sets its model when given). Returns the `updated_at` it
/// writes: the session's version as of this write, in microseconds (what PostgreSQL keeps), so
/// the value returned is the value read back on either database.
pub(super) fn touch_session_into(
    script: &mut Script,
    session_id: Uuid,
    model: Option<&str>,
) -> chrono::DateTime<Utc> {
    use chrono::SubsecRound;
    let now = Utc::now().trunc_subsecs(6);
    let mut update = chat_session::Entity::update_many()
        .col_expr(chat_session::Column::UpdatedAt, Expr::value(now))
        .filter(chat_session::Column::Id.eq(session_id));
    if let Some(model) = model {
        update = update.col_expr(chat_session::Column::Model, Expr::value(model));
    }
    script.push(update);
    now
}

/// [`touch_session_into`] on its own.
pub(super) async fn touch_session<C: ConnectionTrait>(
    db: &C,
    session_id: Uuid,
    model: Option<&str>,
) -> StorageResult<chrono::DateTime<Utc>> {
    let mut script = Script::new(db);
    let version = touch_session_into(&mut script, session_id, model);
    script.run(db).await?;
    Ok(version)
}

/// The update marking the session that holds `message_id` as changed (its `updated_at`), to which
/// a caller may add conditions.
fn touch_session_of_where(message_id: Uuid) -> sea_orm::UpdateMany<chat_session::Entity> {
    chat_session::Entity::update_many()
        .col_expr(chat_session::Column::UpdatedAt, Expr::value(Utc::now()))
        .filter(
            chat_session::Column::Id.in_subquery(
                Query::select()
                    .column(message::Column::SessionId)
                    .from(message::Entity)
                    .and_where(message::Column::Id.eq(message_id))
                    .to_owned(),
            ),
        )
}

/// Marks the session holding `message_id` as changed, for a write that knows only the message:
/// its usage and size count in the session's cached skeleton, which is keyed by `updated_at`.
pub(crate) async fn touch_session_of<C: ConnectionTrait>(db: &C, message_id: Uuid) -> StorageResult<()> {
    touch_session_of_where(message_id).exec(db).await?;
    Ok(())
}

/// In one transaction: the user message under `user.parent_id`, the assistant placeholder under
/// it, both chosen on the active path, and the run writing the placeholder.
pub async fn insert_turn(
    db: &Db,
    session_id: Uuid,
    user: &NewMessage<'_>,
    assistant: &NewMessage<'_>,
    run: &NewRun,
) -> StorageResult<()> {
    insert_noted_turn(db, session_id, None, user, assistant, run, &[]).await.map(drop)
}

/// [`insert_turn`], after a note of what changed in the session's environment (the user
/// message goes under the note), which is then cleared from the session, with the uploads the
/// message carries. One transaction; returns the session's `updated_at` as written.
#[allow(clippy::too_many_arguments)]
pub async fn insert_noted_turn(
    db: &Db,
    session_id: Uuid,
    note: Option<&NewMessage<'_>>,
    user: &NewMessage<'_>,
    assistant: &NewMessage<'_>,
    run: &NewRun,
    uploads: &[Uuid],
) -> StorageResult<chrono::DateTime<Utc>> {
    let mut script = Script::new(db);
    let mut now = Utc::now();
    if let Some(note) = note {
        insert_kind_into(&mut script, session_id, note, kind_of(note), now);
        choose_into(&mut script, session_id, note.parent_id, note.id);
        script.push(
            chat_session::Entity::update_many()
                .col_expr(chat_session::Column::EnvNote, Expr::value(Option::<String>::None))
                .filter(chat_session::Column::Id.eq(session_id)),
        );
        now += chrono::Duration::microseconds(1);
    }
    // The question and the answer's placeholder in one statement, the question already
    // pointing at its answer: the foreign keys are checked when the statement ends.
    let mut question = message_row(session_id, user, kind_of(user), now);
    question.chosen_child_id = Set(Some(assistant.id));
    // A later timestamp keeps "oldest first" ordering stable within the turn.
    let answer =
        message_row(session_id, assistant, kind_of(assistant), now + chrono::Duration::microseconds(1));
    script.push(message::Entity::insert_many([question, answer]));
    let chosen_and_run = |script: &mut Script| {
        choose_into(script, session_id, user.parent_id, user.id);
        insert_run_into(script, session_id, run);
        touch_session_into(script, session_id, assistant.model)
    };
    if uploads.is_empty() {
        let version = chosen_and_run(&mut script);
        script.run_as_transaction(db).await?;
        return Ok(version);
    }
    // The files come with the message, or not at all: how many moved is read in between.
    let txn = crate::storage::begin_write(db).await?;
    script.run(&txn).await?;
    let moved = super::super::files::attach_uploads(&txn, run.owner_id, session_id, user.id, uploads).await?;
    if moved != uploads.len() {
        txn.rollback().await?;
        return Err(StorageError::Corrupt("an upload of this message is gone".into()));
    }
    let mut script = Script::new(&txn);
    let version = chosen_and_run(&mut script);
    script.run(&txn).await?;
    txn.commit().await?;
    Ok(version)
}

/// In one transaction: a new assistant message under `assistant.parent_id` (a sibling of earlier
/// answers), chosen on the active path, and its run.
pub async fn insert_answer(
    db: &Db,
    session_id: Uuid,
    assistant: &NewMessage<'_>,
    run: &NewRun,
) -> StorageResult<()> {
    let mut script = Script::new(db);
    insert_kind_into(&mut script, session_id, assistant, kind_of(assistant), Utc::now());
    choose_into(&mut script, session_id, assistant.parent_id, assistant.id);
    insert_run_into(&mut script, session_id, run);
    touch_session_into(&mut script, session_id, assistant.model);
    script.run_as_transaction(db).await
}

/// In one transaction: an existing message goes back to `streaming` and a run resumes it.
pub async fn resume_message(db: &Db, session_id: Uuid, message_id: Uuid, run: &NewRun) -> StorageResult<()> {
    let mut script = Script::new(db);
    script.push(
        message::Entity::update_many()
            .col_expr(message::Column::Status, Expr::value(MessageStatus::Streaming.as_str()))
            .col_expr(message::Column::Error, Expr::value(Option::<String>::None))
            .col_expr(message::Column::UpdatedAt, Expr::value(Utc::now()))
            .filter(message::Column::Id.eq(message_id))
            .filter(message::Column::SessionId.eq(session_id)),
    );
    insert_run_into(&mut script, session_id, run);
    touch_session_into(&mut script, session_id, None);
    script.run_as_transaction(db).await
}

/// Writes a streaming message's content so far.
pub async fn save_parts(db: &Db, message_id: Uuid, parts: &[Part]) -> StorageResult<()> {
    message::Entity::update_many()
        .col_expr(message::Column::Parts, Expr::value(parts_json(parts)))
        .col_expr(message::Column::UpdatedAt, Expr::value(Utc::now()))
        .filter(message::Column::Id.eq(message_id))
        // Only while it streams: another instance may have ended it as interrupted meanwhile.
        .filter(message::Column::Status.eq(MessageStatus::Streaming.as_str()))
        .exec(db)
        .await?;
    Ok(())
}

/// How a run ended, for its message and its row.
pub struct Outcome<'a> {
    /// Final content.
    pub parts: &'a [Part],
    /// Final message status.
    pub status: MessageStatus,
    /// Run status: completed, cancelled, failed or interrupted.
    pub run_status: &'a str,
    /// Error shown with the message.
    pub error: Option<&'a str>,
    /// Usage, when the call got that far.
    pub usage: Option<MessageUsage>,
}

/// An answer's size: the provider's count of what it wrote, else Arbor's count of its parts.
pub(crate) fn answer_tokens(parts: &[Part], usage: Option<MessageUsage>) -> u64 {
    match usage {
        Some(u) if !u.estimated && u.output > 0 => u.output,
        _ => count_parts(parts),
    }
}

/// The status another instance leaves on a run it ended for this one (its lease ran out).
const INTERRUPTED: &str = "interrupted";

/// In one transaction: the message's final state, the run's end and the usage row of the run's
/// last provider call (`usage_row`), so a reply's cost is on its message exactly when it is in
/// the ledger. When another instance already ended the run, only the usage row is written (the
/// call was made and is paid for either way).
pub async fn finish(
    db: &Db,
    message_id: Uuid,
    run_id: Uuid,
    o: &Outcome<'_>,
    usage_row: Option<&StampedUsage>,
) -> StorageResult<()> {
    if o.run_status == INTERRUPTED {
        return finish_interrupted(db, message_id, run_id, o, usage_row).await;
    }
    let mut script = Script::new(db);
    let now = Utc::now();
    script.push(run_end(run_id, o, now));
    // The message and its session are written unless another instance ended the run as
    // interrupted meanwhile: what it recorded stands. This run's own end is never that status
    // here, so after the statement above the run is `interrupted` only if that happened (a run
    // row that is gone does not stop the answer). Runs before messages, as every writer of both
    // does, so two transactions on PostgreSQL never wait on each other's rows.
    let not_interrupted = Expr::exists(
        Query::select()
            .expr(Expr::val(1))
            .from(run::Entity)
            .and_where(run::Column::Id.eq(run_id))
            .and_where(run::Column::Status.eq(INTERRUPTED))
            .to_owned(),
    )
    .not();
    end_message_into(&mut script, message_id, o, now, usage_row, Some(not_interrupted));
    script.run_as_transaction(db).await
}

/// [`finish`] for a run this instance ends as interrupted (it is going down): the run's status
/// cannot tell then whether another instance ended it first, so the count of rows the run's
/// update changed does.
async fn finish_interrupted(
    db: &Db,
    message_id: Uuid,
    run_id: Uuid,
    o: &Outcome<'_>,
    usage_row: Option<&StampedUsage>,
) -> StorageResult<()> {
    let txn = crate::storage::begin_write(db).await?;
    let now = Utc::now();
    let ended = run_end(run_id, o, now).exec(&txn).await?;
    if ended.rows_affected == 0
        && run::Entity::find_by_id(run_id).one(&txn).await?.is_some_and(|r| r.status == INTERRUPTED)
    {
        txn.rollback().await?;
        if let Some(row) = usage_row {
            insert_stamped(db, row).await?;
        }
        return Ok(());
    }
    let mut script = Script::new(&txn);
    end_message_into(&mut script, message_id, o, now, usage_row, None);
    script.run(&txn).await?;
    txn.commit().await?;
    Ok(())
}

/// What a reply's end writes after its run's: the message, its session's version and the usage
/// row, added to `script`. `guard`, when given, conditions the message's and the session's
/// updates (the usage row is written either way).
fn end_message_into(
    script: &mut Script,
    message_id: Uuid,
    o: &Outcome<'_>,
    now: chrono::DateTime<Utc>,
    usage_row: Option<&StampedUsage>,
    guard: Option<Expr>,
) {
    let (mut message, mut session) = (message_end(message_id, o, now), touch_session_of_where(message_id));
    if let Some(guard) = guard {
        message = message.filter(guard.clone());
        session = session.filter(guard);
    }
    script.push(message).push(session);
    if let Some(row) = usage_row {
        script.push(row.insert());
    }
}

/// The run's end, unless another instance already ended it as interrupted.
fn run_end(run_id: Uuid, o: &Outcome<'_>, now: chrono::DateTime<Utc>) -> sea_orm::UpdateMany<run::Entity> {
    run::Entity::update_many()
        .col_expr(run::Column::Status, Expr::value(o.run_status))
        .col_expr(run::Column::Error, Expr::value(o.error.map(str::to_string)))
        .col_expr(run::Column::UpdatedAt, Expr::value(now))
        .col_expr(run::Column::FinishedAt, Expr::value(Some(now)))
        .filter(run::Column::Id.eq(run_id))
        .filter(run::Column::Status.ne(INTERRUPTED))
}

/// The message's final content, status and usage.
fn message_end(
    message_id: Uuid,
    o: &Outcome<'_>,
    now: chrono::DateTime<Utc>,
) -> sea_orm::UpdateMany<message::Entity> {
    let update = message::Entity::update_many()
        .col_expr(message::Column::Parts, Expr::value(parts_json(o.parts)))
        .col_expr(message::Column::Status, Expr::value(o.status.as_str()))
        .col_expr(message::Column::Error, Expr::value(o.error.map(str::to_string)))
        .col_expr(message::Column::UpdatedAt, Expr::value(now))
        .col_expr(message::Column::TokenCount, Expr::value(to_i64(answer_tokens(o.parts, o.usage))));
    with_usage(update, o.usage).filter(message::Column::Id.eq(message_id))
}

/// A message's update, writing its usage too when there is one.
pub(crate) fn with_usage(
    update: sea_orm::UpdateMany<message::Entity>,
    usage: Option<MessageUsage>,
) -> sea_orm::UpdateMany<message::Entity> {
    let Some(u) = usage else { return update };
    update
        .col_expr(message::Column::TokensIn, Expr::value(to_i64(u.input)))
        .col_expr(message::Column::TokensOut, Expr::value(to_i64(u.output)))
        .col_expr(message::Column::TokensCached, Expr::value(to_i64(u.cached)))
        .col_expr(message::Column::CostMicros, Expr::value(u.cost_micros))
        .col_expr(message::Column::UsageEstimated, Expr::value(u.estimated))
}
