//! A turn's writes are all or nothing, even when a statement in the middle fails or the caller
//! goes away mid-write; the connection they ran on is fit for the next write either way. On
//! SQLite a turn's start and a reply's end are one call each, their `BEGIN` and `COMMIT` in the
//! same text (storage::script), so a failed or abandoned call must not leave its transaction open
//! on a pooled connection.

use std::time::{Duration, Instant};

use arbor::domain::sessions::tree::MessageStatus;
use arbor::providers::types::Part;
use arbor::storage::entities::chat_session;
use arbor::storage::repos::messages::{self, NewRun, Outcome};
use sea_orm::EntityTrait;
use uuid::Uuid;

use crate::runs::{Chat, chat_with, turn_messages};

/// The messages and run of one turn, for the test to write.
struct Turn {
    question: Uuid,
    answer: Uuid,
    run: Uuid,
}

impl Turn {
    fn new() -> Turn {
        Turn { question: Uuid::now_v7(), answer: Uuid::now_v7(), run: Uuid::now_v7() }
    }

    /// Writes the turn under `parent` as `owner`'s run.
    async fn insert(&self, c: &Chat, parent: Option<Uuid>, owner: Uuid) -> Result<(), String> {
        let text = [Part::Text { text: "a question".into() }];
        let (user, reply) = turn_messages(c, &text, self.question, self.answer, parent);
        let new_run = NewRun {
            id: self.run,
            owner_id: owner,
            leaf_message_id: self.question,
            assistant_message_id: self.answer,
        };
        messages::insert_turn(&c.app.state.db, c.session, &user, &reply, &new_run)
            .await
            .map_err(|e| e.to_string())
    }

    /// How many of its two messages and its run are in the database, in one statement (one
    /// moment: reads one by one could straddle the write's commit).
    async fn rows_written(&self, c: &Chat) -> usize {
        use sea_orm::{ConnectionTrait, DbBackend, Statement};
        let db = &c.app.state.db;
        let backend = db.get_database_backend();
        let [a, b, r] = match backend {
            DbBackend::Postgres => ["$1", "$2", "$3"],
            _ => ["?", "?", "?"],
        };
        let sql = format!(
            "SELECT (SELECT COUNT(*) FROM messages WHERE id IN ({a}, {b})) \
             + (SELECT COUNT(*) FROM runs WHERE id = {r}) AS n"
        );
        let values = [self.question, self.answer, self.run].map(sea_orm::Value::from);
        let row =
            db.query_one_raw(Statement::from_sql_and_values(backend, sql, values)).await.unwrap().unwrap();
        usize::try_from(row.try_get::<i64>("", "n").unwrap()).unwrap()
    }

    /// Ends the reply as complete.
    async fn finish(&self, c: &Chat) {
        let text = [Part::Text { text: "the answer".into() }];
        let outcome = Outcome {
            parts: &text,
            status: MessageStatus::Complete,
            run_status: "completed",
            error: None,
            usage: None,
        };
        messages::finish(&c.app.state.db, self.answer, self.run, &outcome, None).await.unwrap();
        assert_eq!(c.message(self.answer).await.status, MessageStatus::Complete);
    }
}

async fn active_root(c: &Chat) -> Option<Uuid> {
    chat_session::Entity::find_by_id(c.session).one(&c.app.state.db).await.unwrap().unwrap().active_root_id
}

/// The run's statement fails (its owner is no user) after the messages' statement ran: none of
/// the turn stays, the session still points where it did, and the next turns and their ends are
/// written (a transaction left open would hold the write lock or refuse the next `BEGIN`).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_turn_whose_last_statement_fails_leaves_nothing_and_the_next_turn_is_written() {
    let c = chat_with(|_| {}).await;
    let first = Turn::new();
    first.insert(&c, None, c.user.id).await.unwrap();
    first.finish(&c).await;
    let root = active_root(&c).await;
    assert_eq!(root, Some(first.question));
    for _ in 0..3 {
        let broken = Turn::new();
        let error = broken.insert(&c, Some(first.answer), Uuid::now_v7()).await.unwrap_err();
        assert!(error.to_lowercase().contains("foreign key"), "{error}");
        assert_eq!(broken.rows_written(&c).await, 0, "nothing of the failed turn stays");
        assert_eq!(c.message(first.answer).await.chosen_child_id, None, "the answer chose nothing");
        assert_eq!(active_root(&c).await, root);
    }
    let next = Turn::new();
    next.insert(&c, Some(first.answer), c.user.id).await.unwrap();
    assert_eq!(next.rows_written(&c).await, 3);
    assert_eq!(c.message(first.answer).await.chosen_child_id, Some(next.question));
    next.finish(&c).await;
}

/// A caller that goes away once the write has begun (a browser that closes the page while its
/// post is answered) leaves the turn whole or absent, never half written, and the connection
/// it ran on takes the next write.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_turn_whose_caller_goes_away_is_written_whole_or_not_at_all() {
    use futures_util::FutureExt;
    let c = chat_with(|_| {}).await;
    let mut parent = None;
    for _ in 0..4 {
        let abandoned = Turn::new();
        // Polled once (the write is sent), then dropped. A write that ended in that one poll
        // (it can, on a fast connection) is held to its own word.
        let polled = abandoned.insert(&c, parent, c.user.id).now_or_never();
        // A write still running lands soon (SQLite: in its own task) or never (PostgreSQL: the
        // dropped transaction rolls back); waiting longer only slows a run that wrote nothing.
        let deadline = Instant::now() + Duration::from_secs(3);
        let mut written = abandoned.rows_written(&c).await;
        while polled.is_none() && written == 0 && Instant::now() < deadline {
            tokio::time::sleep(Duration::from_millis(20)).await;
            written = abandoned.rows_written(&c).await;
        }
        match &polled {
            Some(Ok(())) => assert_eq!(written, 3, "a write that said it was done"),
            Some(Err(e)) => assert_eq!(written, 0, "a write that failed: {e}"),
            None => {}
        }
        assert!(written == 0 || written == 3, "{written} of the turn's 3 rows");
        let next = Turn::new();
        let under = if written == 3 { Some(abandoned.answer) } else { parent };
        next.insert(&c, under, c.user.id).await.unwrap();
        assert_eq!(next.rows_written(&c).await, 3);
        next.finish(&c).await;
        parent = Some(next.answer);
    }
}
