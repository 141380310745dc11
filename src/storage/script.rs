//! Several statements of one transaction sent to the database as one call.
//!
//! On SQLite every call is a hand-off to the connection's own thread and back (two context
//! switches, a channel each way): under load that costs more than a short statement itself
//! (BENCHMARKS.md, "Performance work", step 42). sqlx runs a text of several statements in one
//! call, binding the values in order across them, so a script is one hand-off. PostgreSQL's
//! extended protocol takes one statement with parameters per call: there the statements run one
//! by one, in the same order and the same transaction.
//!
//! A script runs inside a transaction the caller began: a statement that fails stops the script
//! (sqlx does not run the rest) and the caller's error path rolls everything back, as with
//! statements sent one by one.

use sea_orm::{ConnectionTrait, DbBackend, QueryTrait, Statement, Value, Values};

use super::StorageResult;

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
        let mut sql = String::new();
        let mut values: Vec<Value> = Vec::new();
        for (i, statement) in self.statements.into_iter().enumerate() {
            if i > 0 {
                sql.push_str(JOINT);
            }
            sql.push_str(&statement.sql);
            values.extend(statement.values.map(|v| v.0).unwrap_or_default());
        }
        db.execute_raw(Statement::from_sql_and_values(DbBackend::Sqlite, sql, Values(values))).await?;
        Ok(())
    }
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
