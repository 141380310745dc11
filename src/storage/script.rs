//! Several statements of one transaction sent to the database as one call.
//!
//! On SQLite every call is a hand-off to the connection's own thread and back (two context
//! switches, a channel each way): under load that costs more than a short statement itself
//! (BENCHMARKS.md, "Performance work", step 42). sqlx runs a text of several statements in one
//! call, binding the values in order across them, so a script is one hand-off. PostgreSQL's
//! extended protocol takes one statement with parameters per call: there the statements run one
//! by one, in the same order and the same transaction.
//!
//! [`Script::run`] runs inside a transaction the caller began: a statement that fails stops the
//! script (sqlx does not run the rest) and the caller's error path rolls everything back, as with
//! statements sent one by one. [`Script::run_as_transaction`] is a transaction of its own: on
//! SQLite its `BEGIN IMMEDIATE` and `COMMIT` are in the same text, so the whole write is one call
//! instead of three (step 45).

use std::sync::{Arc, LazyLock, Mutex, Weak};
use std::time::{Duration, Instant};

use sea_orm::sqlx::sqlite::{SqliteConnectOptions, SqlitePool};
use sea_orm::{ConnectionTrait, DbBackend, DbErr, QueryTrait, RuntimeErr, Statement, Value, Values};

use super::{Db, StorageError, StorageResult};

/// What separates two statements of a script in its text. sea-query writes no `;` of its own
/// and binds every value, so the counter of statements ([`statements_in`]) can split on it.
const JOINT: &str = ";\n";

/// Statements to run in order, as one call where the database allows it.
pub(crate) struct Script {
    backend: DbBackend,
    statements: Vec<Statement>,
}

impl Script {
    /// An empty script for `db`'s database.
    pub(crate) fn new<C: ConnectionTrait>(db: &C) -> Script {
        Script { backend: db.get_database_backend(), statements: Vec::new() }
    }

    /// Adds a statement built by sea-orm (an update, an insert, a delete).
    pub(crate) fn push<Q: QueryTrait>(&mut self, query: Q) -> &mut Script {
        let statement = query.build(self.backend);
        self.statements.push(statement);
        self
    }

    /// Runs the statements in order: one call on SQLite, one each on PostgreSQL.
    pub(crate) async fn run<C: ConnectionTrait>(self, db: &C) -> StorageResult<()> {
        if self.backend != DbBackend::Sqlite || self.statements.len() < 2 {
            for statement in self.statements {
                db.execute_raw(statement).await?;
            }
            return Ok(());
        }
        db.execute_raw(self.joined(None)).await?;
        Ok(())
    }

    /// Runs the statements as one write transaction of their own: all of them or none. On
    /// SQLite one call, `BEGIN IMMEDIATE` and `COMMIT` around the statements in one text; on
    /// PostgreSQL a transaction as [`super::begin_write`] makes, the statements one by one.
    pub(crate) async fn run_as_transaction(self, db: &Db) -> StorageResult<()> {
        if self.backend != DbBackend::Sqlite {
            let txn = super::begin_write(db).await?;
            self.run(&txn).await?;
            txn.commit().await?;
            return Ok(());
        }
        let statement = self.joined(Some(("BEGIN IMMEDIATE", "COMMIT")));
        let pool = db.get_sqlite_connection_pool().clone();
        let observer = observer_of(&pool);
        // Its own task: a request whose client goes away drops the caller mid-call, and sqlx
        // stops a text of several statements where its caller stopped listening, which would
        // leave the transaction open on a pooled connection. The task always ends it.
        tokio::spawn(write_on_sqlite(pool, statement, observer))
            .await
            .map_err(|e| StorageError::Db(DbErr::Custom(format!("a write was cut short: {e}"))))?
            .map_err(|e| StorageError::Db(DbErr::Exec(RuntimeErr::SqlxError(Arc::new(e)))))
    }

    /// The statements as one text of SQLite's, their values bound in order, between `around`'s
    /// two statements when given.
    fn joined(self, around: Option<(&str, &str)>) -> Statement {
        let mut sql = String::new();
        let mut values: Vec<Value> = Vec::new();
        let mut add = |text: &str| {
            if !sql.is_empty() {
                sql.push_str(JOINT);
            }
            sql.push_str(text);
        };
        if let Some((first, _)) = around {
            add(first);
        }
        for statement in self.statements {
            add(&statement.sql);
            values.extend(statement.values.map(|v| v.0).unwrap_or_default());
        }
        if let Some((_, last)) = around {
            add(last);
        }
        Statement::from_sql_and_values(DbBackend::Sqlite, sql, Values(values))
    }
}

/// Runs a transaction's whole text on one pooled SQLite connection. When a statement fails,
/// the rest did not run and the transaction is still open: it is rolled back on the same
/// connection before that goes back to the pool, and a connection that cannot roll back is
/// closed (SQLite then drops the transaction).
async fn write_on_sqlite(
    pool: SqlitePool,
    statement: Statement,
    observer: Option<Observer>,
) -> Result<(), sea_orm::sqlx::Error> {
    use sea_orm::sqlx::{self, Executor};
    let mut conn = pool.acquire().await?;
    let values = statement.values.unwrap_or(Values(Vec::new()));
    let started = Instant::now();
    let query =
        sqlx::query_with(sqlx::AssertSqlSafe(statement.sql.as_str()), sea_query_sqlx::SqlxValues(values));
    let result = conn.execute(query).await;
    if let Some(observer) = &observer {
        // `BEGIN` and `COMMIT` are not counted, as they are not when sea-orm sends them.
        let statements = statements_in(&statement.sql).saturating_sub(2);
        observer(&statement.sql, statements, started.elapsed(), result.is_err());
    }
    let Err(error) = result else { return Ok(()) };
    if conn.execute(sqlx::raw_sql(sqlx::AssertSqlSafe("ROLLBACK"))).await.is_err() {
        let _ = conn.close().await;
    }
    Err(error)
}

/// What hears of a call: its text, how many statements it ran, how long it took and whether it
/// failed (sea-orm's metric hook hears the rest, see `super::connect_counted`).
pub(crate) type Observer = Arc<dyn Fn(&str, u64, Duration, bool) + Send + Sync>;

/// The observer of each SQLite pool, by the pool's options (one allocation per pool, shared by
/// its clones): the statements a transaction's script runs on a connection of its own do not
/// pass sea-orm's hook, and are counted like the rest all the same.
type Observers = Vec<(Weak<SqliteConnectOptions>, Observer)>;
static OBSERVERS: LazyLock<Mutex<Observers>> = LazyLock::new(|| Mutex::new(Vec::new()));

/// Makes `observer` hear the statements [`Script::run_as_transaction`] runs on `db`'s pool.
pub(crate) fn observe(db: &Db, observer: Observer) {
    if db.get_database_backend() != DbBackend::Sqlite {
        return;
    }
    let options = Arc::downgrade(&db.get_sqlite_connection_pool().connect_options());
    let mut observers = OBSERVERS.lock().unwrap_or_else(|e| e.into_inner());
    observers.retain(|(pool, _)| pool.strong_count() > 0);
    observers.push((options, observer));
}

fn observer_of(pool: &SqlitePool) -> Option<Observer> {
    let options = pool.connect_options();
    let observers = OBSERVERS.lock().unwrap_or_else(|e| e.into_inner());
    observers.iter().find(|(o, _)| std::ptr::eq(o.as_ptr(), Arc::as_ptr(&options))).map(|(_, f)| f.clone())
}

/// How many statements a call ran: one, or a script's count.
pub(crate) fn statements_in(sql: &str) -> u64 {
    1 + sql.matches(JOINT).count() as u64
}

#[cfg(test)]
mod tests {
    use sea_orm::sea_query::Expr;
    use sea_orm::{ColumnTrait, EntityTrait, QueryFilter};

    use super::*;
    use crate::storage::entities::{chat_session, message};

    fn two_updates(backend: DbBackend) -> Script {
        let mut script = Script { backend, statements: Vec::new() };
        script
            .push(
                message::Entity::update_many()
                    .col_expr(message::Column::Status, Expr::value("complete"))
                    .filter(message::Column::Id.eq(uuid::Uuid::nil())),
            )
            .push(
                chat_session::Entity::update_many()
                    .col_expr(chat_session::Column::Title, Expr::value("a; b\n"))
                    .filter(chat_session::Column::Id.eq(uuid::Uuid::nil())),
            );
        script
    }

    #[test]
    fn a_script_binds_every_value_and_its_statements_are_counted() {
        let script = two_updates(DbBackend::Sqlite);
        let sql: Vec<&str> = script.statements.iter().map(|s| s.sql.as_str()).collect();
        let joined = sql.join(JOINT);
        // Values are bound, never written into the text: a `;` in one cannot split the script.
        assert!(!joined.contains("a; b"), "{joined}");
        assert_eq!(statements_in(&joined), 2);
        assert_eq!(statements_in(sql[0]), 1);
        let bound: usize = script.statements.iter().map(|s| s.values.as_ref().map_or(0, |v| v.0.len())).sum();
        assert_eq!(bound, 4);
    }
}
