//! Storage adapter: the database connection, entities and the queries over them.

pub mod changes;
pub mod entities;
pub mod repos;
pub mod retry;
pub(crate) mod script;
pub mod snapshot;
pub mod usage_writer;

use std::time::Duration;

use migration::{Migrator, MigratorTrait};
use sea_orm::sqlx::sqlite::{SqliteJournalMode, SqliteSynchronous};
use sea_orm::{ConnectOptions, ConnectionTrait, Database, DatabaseConnection, DbBackend, Statement};

use crate::config::Config;

/// Everything that can go wrong below the domain.
#[derive(Debug, thiserror::Error)]
pub enum StorageError {
    /// The database refused or failed a statement.
    #[error("database error: {0}")]
    Db(#[from] sea_orm::DbErr),
    /// The database is not configured the way Arbor relies on.
    #[error("database check failed: {0}")]
    Check(String),
    /// A stored value could not be understood.
    #[error("corrupt stored value: {0}")]
    Corrupt(String),
}

impl StorageError {
    /// Whether the same write may pass if sent again ([`retry::may_pass_again`]).
    pub fn may_pass_again(&self) -> bool {
        matches!(self, StorageError::Db(e) if retry::may_pass_again(e))
    }
}

/// This process's id among the instances serving one database: the runs it executes carry it,
/// and its lease row is keyed by it. One per process (an instance is a process).
pub fn instance_id() -> uuid::Uuid {
    static ID: std::sync::LazyLock<uuid::Uuid> = std::sync::LazyLock::new(uuid::Uuid::now_v7);
    *ID
}

/// The database handle services receive.
pub type Db = sea_orm::DatabaseConnection;

/// Anything a query can run on: the pool or an open transaction. Repositories are generic over
/// it so one function serves both; the domain names it without naming the ORM.
pub use sea_orm::ConnectionTrait as Conn;

/// An open transaction. The domain begins one when several repository calls must succeed or
/// fail together, passes [`Tx::conn`] to them, and ends it with [`Tx::commit`] or
/// [`Tx::rollback`] (dropping it rolls back).
pub struct Tx(sea_orm::DatabaseTransaction);

impl Tx {
    /// Begins a transaction.
    pub async fn begin(db: &Db) -> StorageResult<Tx> {
        Ok(Tx(begin_write(db).await?))
    }

    /// The connection that runs queries inside the transaction.
    pub fn conn(&self) -> &sea_orm::DatabaseTransaction {
        &self.0
    }

    /// Makes every change of the transaction permanent.
    pub async fn commit(self) -> StorageResult<()> {
        Ok(self.0.commit().await?)
    }

    /// Drops every change of the transaction.
    pub async fn rollback(self) -> StorageResult<()> {
        Ok(self.0.rollback().await?)
    }
}

/// Begins a transaction that will write. On SQLite it takes the write lock at `BEGIN`
/// (`BEGIN IMMEDIATE`): a deferred transaction that reads first and writes later cannot upgrade
/// its lock once another connection has written (WAL returns SQLITE_BUSY at once, whatever the
/// busy timeout), which under load turned a delete into a 500. PostgreSQL ignores the mode.
pub async fn begin_write(db: &Db) -> Result<sea_orm::DatabaseTransaction, sea_orm::DbErr> {
    use sea_orm::{SqliteTransactionMode, TransactionOptions, TransactionTrait};
    db.begin_with_options(TransactionOptions {
        sqlite_transaction_mode: Some(SqliteTransactionMode::Immediate),
        ..Default::default()
    })
    .await
}

/// Shorthand for storage results.
pub type StorageResult<T> = Result<T, StorageError>;

/// Page cache per SQLite connection, in KiB.
const SQLITE_CACHE_KIB: u32 = 1024;

/// Opens the pool; for SQLite creates the file with WAL, `synchronous=FULL`, foreign keys and a
/// busy timeout on every connection, then verifies those settings took.
pub async fn connect(config: &Config) -> StorageResult<DatabaseConnection> {
    let url = config.database_url();
    if url.starts_with("sqlite:") {
        std::fs::create_dir_all(&config.data_dir).map_err(|e| {
            StorageError::Check(format!("cannot create data directory {}: {e}", config.data_dir.display()))
        })?;
    }
    let cores = std::thread::available_parallelism().map_or(1, |n| n.get());
    let sqlite = url.starts_with("sqlite:");
    let pool_size = config.database.pool_size(sqlite, cores);
    let mut opts = ConnectOptions::new(url);
    let busy = Duration::from_millis(config.database.sqlite_busy_timeout_ms);
    if sqlite {
        // sqlx pings a pooled connection before handing it out: on SQLite a round trip to the
        // connection's own thread and back before every statement, for a connection in this
        // process that nothing outside can break (BENCHMARKS.md, "Performance work", step 43).
        // PostgreSQL keeps the ping: a server restart or a dropped TCP connection is found
        // there, before a request's statement fails on it.
        opts.test_before_acquire(false);
    }
    opts.max_connections(pool_size)
        // No minimum: sqlx opens it from a background task while `connect` opens its own first
        // connection, and on a new SQLite file both then switch it to WAL, which takes a lock the
        // busy timeout cannot wait for ("database is locked", and the server did not start).
        // Connections stay open once made (no idle timeout below), so a minimum adds nothing.
        .min_connections(0)
        // No idle timeout and no maximum lifetime, so sqlx runs no periodic sweep of idle
        // connections. In sqlx-core 0.9.0 the pool's idle count can wrap below zero under load
        // (a connection popped between its push and the count's increment), and the sweep then
        // loops `usize::MAX` times without yielding: one core spins for good and the server never
        // shuts down (launchbadge/sqlx#3645, fixed by #4289, in no release yet). Seen here at the
        // end of a 30-minute soak. Connections to a local file or a database server lose nothing
        // by staying open.
        .idle_timeout(None)
        .max_lifetime(None)
        .connect_timeout(Duration::from_secs(config.database.connect_timeout_secs))
        .acquire_timeout(Duration::from_secs(config.database.connect_timeout_secs))
        .sqlx_logging(false)
        .map_sqlx_sqlite_opts(move |o| {
            o.create_if_missing(true)
                .journal_mode(SqliteJournalMode::Wal)
                .synchronous(SqliteSynchronous::Full)
                .foreign_keys(true)
                .busy_timeout(busy)
                // SQLite's page cache is per connection (2 MiB by default, up to 16): it
                // follows the data as it grows, and in WAL mode any write empties every other
                // connection's cache anyway. 1 MiB each keeps the pool's share of RSS bounded;
                // pages it drops are in the OS page cache.
                .pragma("cache_size", format!("-{SQLITE_CACHE_KIB}"))
        });
    let db = Database::connect(opts).await?;
    check_pragmas(&db).await?;
    if db.get_database_backend() == DbBackend::Sqlite && !plans_are_stable(&db).await? {
        tracing::warn!(
            "SQLite was built without SQLITE_ENABLE_QPSG (build from the repository, whose \
             .cargo/config.toml sets it): statements with LIMIT are compiled again on every run"
        );
    }
    Ok(db)
}

/// Whether SQLite was built with the query planner stability guarantee on, so a statement's
/// plan never depends on the values bound to it and cached statements stay valid when new values
/// are bound (`.cargo/config.toml` sets it; see the comment there).
pub async fn plans_are_stable(db: &DatabaseConnection) -> StorageResult<bool> {
    let rows = db
        .query_all_raw(Statement::from_string(DbBackend::Sqlite, "PRAGMA compile_options".to_string()))
        .await?;
    Ok(rows.iter().any(|r| r.try_get_by_index::<String>(0).is_ok_and(|o| o == "ENABLE_QPSG")))
}

/// How many statements a connection has run: installed by [`connect_counted`], read by the
/// tests that hold pages to a bounded number of queries.
#[derive(Debug, Clone, Default)]
pub struct QueryCounter(std::sync::Arc<std::sync::atomic::AtomicU64>);

impl QueryCounter {
    /// Statements run so far.
    pub fn count(&self) -> u64 {
        self.0.load(std::sync::atomic::Ordering::Relaxed)
    }
}

/// [`connect`], counting every statement the connection (and its clones) runs.
pub async fn connect_counted(config: &Config) -> StorageResult<(DatabaseConnection, QueryCounter)> {
    let mut db = connect(config).await?;
    let counter = QueryCounter::default();
    let inner = counter.0.clone();
    let observer: script::Observer = std::sync::Arc::new(move |sql, statements, elapsed, failed| {
        inner.fetch_add(statements, std::sync::atomic::Ordering::Relaxed);
        crate::metrics::db_statements(statements);
        // `RUST_LOG=arbor::sql=trace` lists every statement: how the per-request counts in
        // BENCHMARKS.md are broken down.
        tracing::trace!(target: "arbor::sql", elapsed_us = elapsed.as_micros() as u64, failed, "{sql}");
    });
    script::observe(&db, observer.clone());
    db.set_metric_callback(move |info| {
        // A script of several statements is one call (`script::Script`); each counts.
        let statements = script::statements_in(&info.statement.sql);
        observer(&info.statement.sql, statements, info.elapsed, info.failed);
    });
    Ok((db, counter))
}

/// The pool's connections: open, and of those idle (sqlx's idle count can wrap, see
/// [`connect`]; it is never shown above the open count).
pub fn pool_use(db: &DatabaseConnection) -> (u32, usize) {
    match db.get_database_backend() {
        DbBackend::Sqlite => {
            let pool = db.get_sqlite_connection_pool();
            (pool.size(), pool.num_idle().min(pool.size() as usize))
        }
        DbBackend::Postgres => {
            let pool = db.get_postgres_connection_pool();
            (pool.size(), pool.num_idle().min(pool.size() as usize))
        }
        _ => (0, 0),
    }
}

/// SQLite connections kept open while the server idles: the one the search feeder's poll
/// reads on (`repos::search::read_pass`).
pub const SQLITE_IDLE_CONNECTIONS: u32 = 1;

/// Closes idle SQLite connections beyond [`SQLITE_IDLE_CONNECTIONS`], and only while none is in
/// use: each holds its own page cache (up to 1 MiB) and statement cache, and a pool that grew
/// at start or in a burst otherwise keeps them for good (there is no idle timeout, see
/// [`connect`]). Returns how many it closed; a no-op on PostgreSQL, whose connections cost the
/// server, not this process.
pub async fn trim_idle_sqlite(db: &DatabaseConnection) -> u32 {
    if db.get_database_backend() != DbBackend::Sqlite {
        return 0;
    }
    let pool = db.get_sqlite_connection_pool();
    let mut closed = 0;
    while pool.size() > SQLITE_IDLE_CONNECTIONS && pool.num_idle() == pool.size() as usize {
        let Some(conn) = pool.try_acquire() else { break };
        if conn.close().await.is_err() {
            break;
        }
        closed += 1;
    }
    closed
}

/// Reads one integer or text pragma back from SQLite.
async fn pragma(db: &DatabaseConnection, name: &str) -> StorageResult<String> {
    let row = db
        .query_one_raw(Statement::from_string(DbBackend::Sqlite, format!("PRAGMA {name}")))
        .await?
        .ok_or_else(|| StorageError::Check(format!("PRAGMA {name} returned nothing")))?;
    if let Ok(v) = row.try_get_by_index::<String>(0) {
        return Ok(v.to_ascii_lowercase());
    }
    row.try_get_by_index::<i64>(0).map(|v| v.to_string()).map_err(StorageError::Db)
}

/// Verifies the SQLite settings durability depends on; a no-op on PostgreSQL.
pub async fn check_pragmas(db: &DatabaseConnection) -> StorageResult<()> {
    if db.get_database_backend() != DbBackend::Sqlite {
        return Ok(());
    }
    let expect = [("journal_mode", "wal"), ("synchronous", "2"), ("foreign_keys", "1")];
    for (name, want) in expect {
        let got = pragma(db, name).await?;
        if got != want {
            return Err(StorageError::Check(format!("SQLite PRAGMA {name} is {got}, expected {want}")));
        }
    }
    let cache = pragma(db, "cache_size").await?;
    if cache != format!("-{SQLITE_CACHE_KIB}") {
        return Err(StorageError::Check(format!(
            "SQLite PRAGMA cache_size is {cache}, expected -{SQLITE_CACHE_KIB}"
        )));
    }
    let busy: i64 = pragma(db, "busy_timeout").await?.parse().unwrap_or(0);
    if busy <= 0 {
        return Err(StorageError::Check("SQLite busy_timeout is not set".into()));
    }
    Ok(())
}

/// Applies every pending migration, after refusing a database a newer Arbor migrated: this
/// version would not know its tables, and its own migrations might undo the newer ones'.
///
/// All of them run in one transaction, on both databases (their DDL is transactional), so a
/// failed migration leaves nothing half-applied, and a new SQLite database is made with one
/// commit instead of one synced commit per statement (about 165 of them, most of a first
/// start's time: BENCHMARKS.md, "Code laid out by use"). On PostgreSQL several instances may
/// start together: the transaction also holds an advisory lock, so one instance applies them
/// and the others, waiting on the lock, find nothing left to do.
pub async fn migrate_up(db: &DatabaseConnection) -> StorageResult<()> {
    let txn = sea_orm::TransactionTrait::begin(db).await?;
    if db.get_database_backend() == DbBackend::Postgres {
        txn.execute_unprepared(&format!("SELECT pg_advisory_xact_lock({MIGRATION_LOCK})")).await?;
    }
    refuse_newer_schema(&txn).await?;
    Migrator::up(&txn, None).await?;
    txn.commit().await?;
    Ok(())
}

/// The advisory lock key the migrations hold on PostgreSQL ("arbor" in ASCII, then 1).
const MIGRATION_LOCK: i64 = 0x6172_626f_7201;

/// An error when the database holds a migration this binary does not know.
pub async fn refuse_newer_schema<C: ConnectionTrait>(db: &C) -> StorageResult<()> {
    let backend = db.get_database_backend();
    let exists = match backend {
        sea_orm::DbBackend::Sqlite => {
            "SELECT name FROM sqlite_master WHERE type = 'table' AND name = 'seaql_migrations'"
        }
        _ => {
            "SELECT table_name FROM information_schema.tables \
             WHERE table_schema = current_schema() AND table_name = 'seaql_migrations'"
        }
    };
    if db.query_one_raw(Statement::from_string(backend, exists)).await?.is_none() {
        return Ok(());
    }
    let rows =
        db.query_all_raw(Statement::from_string(backend, "SELECT version FROM seaql_migrations")).await?;
    let known: Vec<String> = Migrator::migrations().iter().map(|m| m.name().to_string()).collect();
    for row in rows {
        let version: String = row.try_get_by_index(0)?;
        if !known.contains(&version) {
            return Err(StorageError::Check(format!(
                "the database was migrated by a newer Arbor (it has migration {version}, which this version does \
                 not know); run that newer version, or restore a backup taken before the upgrade"
            )));
        }
    }
    Ok(())
}

/// Rolls back the given number of migrations.
pub async fn migrate_down(db: &DatabaseConnection, steps: u32) -> StorageResult<()> {
    Migrator::down(db, Some(steps)).await?;
    Ok(())
}

/// Each known migration with whether it is applied, oldest first.
pub async fn migration_status(db: &DatabaseConnection) -> StorageResult<Vec<(String, bool)>> {
    let all = Migrator::get_migration_with_status(db).await?;
    Ok(all
        .iter()
        .map(|m| (m.name().to_string(), m.status() == migration::MigrationStatus::Applied))
        .collect())
}

/// Whether the database answers and no migration is pending, without writing anything.
pub async fn readiness(db: &DatabaseConnection) -> StorageResult<()> {
    db.query_one_raw(Statement::from_string(db.get_database_backend(), "SELECT 1")).await?;
    let pending = Migrator::get_pending_migrations_read_only(db).await?;
    if pending.is_empty() {
        Ok(())
    } else {
        Err(StorageError::Check(format!("{} migration(s) pending", pending.len())))
    }
}
