//! A session's run state read in one statement each where a request would otherwise read it in
//! two or three: hand-written SQL with each backend's placeholders, as one row or one pair of
//! rows.

use sea_orm::EntityTrait;
use uuid::Uuid;

use crate::model::agent::Run;
use crate::model::sessions::ChatSession;
use crate::storage::entities::{chat_session, run};
use crate::storage::{Db, StorageResult};

/// The `n`-th bound value's placeholder in `backend`'s SQL.
fn placeholder(backend: sea_orm::DbBackend, n: usize) -> String {
    match backend {
        sea_orm::DbBackend::Postgres => format!("${n}"),
        _ => "?".to_string(),
    }
}

/// In one statement: a run of the session waiting for a decision (if any), and the session's
/// latest run (what [`super::agent::pending_call`] and [`super::agent::latest_run`] read in two).
pub async fn awaiting_and_latest_run(db: &Db, session_id: Uuid) -> StorageResult<(Option<Run>, Option<Run>)> {
    use sea_orm::Statement;
    let backend = db.get_database_backend();
    let p = |n| placeholder(backend, n);
    // Each side is a subquery so that each keeps its own LIMIT (SQLite allows no LIMIT on a
    // member of a compound select); `which` keeps the waiting run first.
    let sql = format!(
        "SELECT * FROM (SELECT 0 AS which, runs.* FROM runs WHERE session_id = {} \
         AND status = 'awaiting_confirmation' LIMIT 1) AS awaiting \
         UNION ALL SELECT * FROM (SELECT 1 AS which, runs.* FROM runs WHERE session_id = {} \
         ORDER BY created_at DESC, id DESC LIMIT 1) AS latest ORDER BY which",
        p(1),
        p(2)
    );
    let stmt = Statement::from_sql_and_values(backend, sql, [session_id.into(), session_id.into()]);
    let mut rows: Vec<Run> =
        run::Entity::find().from_raw_sql(stmt).all(db).await?.into_iter().map(Into::into).collect();
    // A waiting run is never alone: the latest run exists whenever any run does.
    Ok(match rows.len() {
        2 => {
            let latest = rows.pop();
            (rows.pop(), latest)
        }
        _ => (None, rows.pop()),
    })
}

/// Before a submit, in one statement: the session's row (whoever owns it: the domain checks the
/// actor's role), the message an earlier post with the same client id made in it (the same
/// submit again), and whether a run of it waits for a decision (what
/// [`super::workspaces::find_session_by_id`], [`super::messages::find_by_client_id`] and
/// [`super::agent::paused_run`] read in three). No session, then no repeat and nothing waiting,
/// when there is no such session.
pub async fn session_for_submit(
    db: &Db,
    session_id: Uuid,
    client_id: &str,
) -> StorageResult<(Option<ChatSession>, Option<Uuid>, bool)> {
    use sea_orm::{ConnectionTrait, FromQueryResult, Statement};
    let backend = db.get_database_backend();
    let p = |n| placeholder(backend, n);
    let sql = format!(
        "SELECT sessions.*, \
         (SELECT id FROM messages WHERE session_id = {} AND client_id = {} LIMIT 1) AS repeated, \
         CASE WHEN EXISTS (SELECT 1 FROM runs WHERE session_id = {} AND status = 'awaiting_confirmation') \
         THEN 1 ELSE 0 END AS paused FROM sessions WHERE id = {}",
        p(1),
        p(2),
        p(3),
        p(4)
    );
    let values = [session_id.into(), client_id.into(), session_id.into(), session_id.into()];
    let statement = Statement::from_sql_and_values(backend, sql, values);
    let Some(row) = db.query_one_raw(statement).await? else { return Ok((None, None, false)) };
    let session = super::workspaces::session_to_domain(chat_session::Model::from_query_result(&row, "")?);
    Ok((Some(session), row.try_get::<Option<Uuid>>("", "repeated")?, row.try_get::<i32>("", "paused")? != 0))
}
