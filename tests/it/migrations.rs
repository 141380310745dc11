//! Every migration runs up, down and up again, on SQLite and PostgreSQL.

use migration::{Migrator, MigratorTrait};
use sea_orm::{ConnectionTrait, Database, DbBackend, Statement};

use crate::support::TestDb;

const TABLES: &[&str] =
    &["users", "auth_sessions", "workspaces", "sessions", "messages", "runs", "search_tombstones"];

/// Every one of Arbor's tables exists (`when` names the step in the message).
async fn assert_every_table(db: &sea_orm::DatabaseConnection, when: &str) {
    let tables = existing_tables(db).await;
    for t in TABLES {
        assert!(tables.iter().any(|x| x == t), "{t} missing {when}: {tables:?}");
    }
}

async fn existing_tables(db: &sea_orm::DatabaseConnection) -> Vec<String> {
    let sql = match db.get_database_backend() {
        DbBackend::Sqlite => "SELECT name FROM sqlite_master WHERE type = 'table'",
        _ => "SELECT table_name FROM information_schema.tables WHERE table_schema = current_schema()",
    };
    let rows = db.query_all_raw(Statement::from_string(db.get_database_backend(), sql)).await.unwrap();
    rows.iter().map(|r| r.try_get_by_index::<String>(0).unwrap()).collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn migrations_go_up_down_and_up_again() {
    let test_db = TestDb::fresh().await;
    let db = Database::connect(&test_db.url).await.unwrap();
    assert_eq!(db.get_database_backend() == DbBackend::Postgres, TestDb::is_postgres());

    Migrator::up(&db, None).await.unwrap();
    assert_every_table(&db, "after up").await;
    assert!(Migrator::get_pending_migrations(&db).await.unwrap().is_empty());

    Migrator::down(&db, None).await.unwrap();
    let tables = existing_tables(&db).await;
    for t in TABLES {
        assert!(!tables.iter().any(|x| x == t), "{t} still there after down");
    }

    Migrator::up(&db, None).await.unwrap();
    assert_every_table(&db, "after second up").await;
    db.close().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_database_a_newer_arbor_migrated_is_refused_with_a_reason() {
    let test_db = TestDb::fresh().await;
    let db = Database::connect(&test_db.url).await.unwrap();
    // A fresh database and an up-to-date one are fine.
    arbor::storage::migrate_up(&db).await.unwrap();
    arbor::storage::migrate_up(&db).await.unwrap();
    let backend = db.get_database_backend();
    db.execute_raw(Statement::from_string(
        backend,
        "INSERT INTO seaql_migrations (version, applied_at) VALUES ('m20991231_000001_from_the_future', 0)",
    ))
    .await
    .unwrap();
    let err = arbor::storage::migrate_up(&db).await.unwrap_err().to_string();
    assert!(err.contains("migrated by a newer Arbor"), "{err}");
    assert!(err.contains("m20991231_000001_from_the_future"), "{err}");
    // Nothing was changed by the refusal.
    assert!(existing_tables(&db).await.iter().any(|t| t == "users"));
    db.close().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_migration_that_fails_leaves_nothing_half_applied() {
    let test_db = TestDb::fresh().await;
    let db = Database::connect(&test_db.url).await.unwrap();
    let backend = db.get_database_backend();
    // A table in the way of the 17th migration: the 16 before it succeed, then it fails.
    db.execute_raw(Statement::from_string(backend, "CREATE TABLE memories (stray INTEGER)")).await.unwrap();
    let err = arbor::storage::migrate_up(&db).await.unwrap_err().to_string();
    assert!(err.contains("memories"), "{err}");
    let tables = existing_tables(&db).await;
    for t in TABLES {
        assert!(!tables.iter().any(|x| x == t), "{t} was left by a failed migration run: {tables:?}");
    }
    let applied = db
        .query_all_raw(Statement::from_string(backend, "SELECT version FROM seaql_migrations"))
        .await
        .map(|rows| rows.len())
        .unwrap_or(0);
    assert_eq!(applied, 0, "a failed run recorded migrations as applied");
    // Once the stray table is gone, the same database migrates whole.
    db.execute_raw(Statement::from_string(backend, "DROP TABLE memories")).await.unwrap();
    arbor::storage::migrate_up(&db).await.unwrap();
    assert_every_table(&db, "after the second run").await;
    db.close().await.unwrap();
}

/// The settings of the server's pool that decide what sqlx does in the background.
struct PoolSettings {
    min_connections: u32,
    idle_timeout: Option<std::time::Duration>,
    max_lifetime: Option<std::time::Duration>,
}

fn pool_settings(db: &sea_orm::DatabaseConnection) -> PoolSettings {
    use sea_orm::sqlx::{Database, pool::PoolOptions};
    fn read<D: Database>(options: &PoolOptions<D>) -> PoolSettings {
        PoolSettings {
            min_connections: options.get_min_connections(),
            idle_timeout: options.get_idle_timeout(),
            max_lifetime: options.get_max_lifetime(),
        }
    }
    match db.get_database_backend() {
        DbBackend::Sqlite => read(db.get_sqlite_connection_pool().options()),
        _ => read(db.get_postgres_connection_pool().options()),
    }
}

/// sqlx's periodic sweep of idle connections can spin a core for good (see `storage::connect`):
/// the server's pool has nothing for it to sweep, so it never runs.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_pool_runs_no_sweep_of_idle_connections() {
    let test_db = TestDb::fresh().await;
    let config = crate::support::test_config(&test_db);
    let db = arbor::storage::connect(&config).await.unwrap();
    let pool = pool_settings(&db);
    assert_eq!((pool.idle_timeout, pool.max_lifetime), (None, None));
    // Still a working pool, and its idle count never above its size.
    db.execute_unprepared("SELECT 1").await.unwrap();
    let (open, idle) = arbor::storage::pool_use(&db);
    assert!(open >= 1 && idle <= open as usize, "{open} open, {idle} idle");
    db.close().await.unwrap();
}

/// A new SQLite file turns to WAL on its first connection, and that switch takes a lock the busy
/// timeout cannot wait for: a second connection opened at the same moment got "database is
/// locked" and the server did not start (seen twice in CI, from a pool that opened its minimum
/// connection in the background). The pool opens nothing by itself, so a new database opens
/// every time.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_new_database_opens_every_time() {
    let tries = if TestDb::is_postgres() { 3 } else { 100 };
    for _ in 0..tries {
        let test_db = TestDb::fresh().await;
        let config = crate::support::test_config(&test_db);
        let db = arbor::storage::connect(&config).await.unwrap_or_else(|e| panic!("a new database: {e}"));
        assert_eq!(pool_settings(&db).min_connections, 0, "no connection is opened in the background");
        db.execute_unprepared("SELECT 1").await.unwrap();
        db.close().await.unwrap();
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sqlite_durability_settings_are_checked_at_start() {
    if TestDb::is_postgres() {
        // The PostgreSQL run checks connectivity instead; pragmas are SQLite-only.
        let test_db = TestDb::fresh().await;
        let mut config = crate::support::test_config(&test_db);
        config.database.url = test_db.url.clone();
        let db = arbor::storage::connect(&config).await.unwrap();
        arbor::storage::check_pragmas(&db).await.unwrap();
        return;
    }
    let test_db = TestDb::fresh().await;
    let config = crate::support::test_config(&test_db);
    let db = arbor::storage::connect(&config).await.unwrap();
    let get = |sql: &'static str| {
        let db = db.clone();
        async move {
            let row =
                db.query_one_raw(Statement::from_string(DbBackend::Sqlite, sql)).await.unwrap().unwrap();
            row.try_get_by_index::<String>(0)
                .or_else(|_| row.try_get_by_index::<i64>(0).map(|v| v.to_string()))
                .unwrap()
        }
    };
    assert_eq!(get("PRAGMA journal_mode").await.to_lowercase(), "wal");
    assert_eq!(get("PRAGMA synchronous").await, "2");
    assert_eq!(get("PRAGMA foreign_keys").await, "1");
    assert_eq!(get("PRAGMA busy_timeout").await, "5000");
    // Built with the planner's stability guarantee: a statement that binds `LIMIT ?` stays
    // prepared from one run to the next (BENCHMARKS.md, browser path, step 8).
    assert!(arbor::storage::plans_are_stable(&db).await.unwrap(), "SQLite built without SQLITE_ENABLE_QPSG");
    // A connection opened without those settings is refused by the check.
    let mut opts = sea_orm::ConnectOptions::new(test_db.url.clone());
    opts.max_connections(1).min_connections(1);
    let plain = Database::connect(opts).await.unwrap();
    plain.execute_unprepared("PRAGMA synchronous = OFF").await.unwrap();
    let err = arbor::storage::check_pragmas(&plain).await.unwrap_err().to_string();
    assert!(err.contains("synchronous"), "{err}");
}

/// On PostgreSQL each test has a schema of its own in one shared database (`support::TestDb`):
/// Arbor's tables land in it, and another test's schema holds none of them.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn each_postgres_test_has_a_schema_of_its_own() {
    let (mine, other) = (TestDb::fresh_postgres().await, TestDb::fresh_postgres().await);
    let db = Database::connect(&mine.url).await.unwrap();
    arbor::storage::migrate_up(&db).await.unwrap();
    assert_every_table(&db, "in the test's own schema").await;
    let theirs = Database::connect(&other.url).await.unwrap();
    assert_eq!(existing_tables(&theirs).await, Vec::<String>::new(), "the other schema is empty");
    db.close().await.unwrap();
    theirs.close().await.unwrap();
}

/// Waits (up to 10 s) until every connection of the pool is idle, as sqlx hands them back on
/// spawned tasks; returns the pool's (open, idle).
async fn settled(db: &sea_orm::DatabaseConnection) -> (u32, usize) {
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
    loop {
        let (open, idle) = arbor::storage::pool_use(db);
        if idle == open as usize || std::time::Instant::now() > deadline {
            return (open, idle);
        }
        tokio::time::sleep(std::time::Duration::from_millis(10)).await;
    }
}

/// `n` of `db`'s pooled connections held, each by a transaction (which keeps its connection
/// until it ends).
async fn hold(db: &sea_orm::DatabaseConnection, n: usize) -> Vec<sea_orm::DatabaseTransaction> {
    futures_util::future::join_all((0..n).map(|_| async {
        let txn = sea_orm::TransactionTrait::begin(db).await.unwrap();
        txn.execute_unprepared("SELECT 1").await.unwrap();
        txn
    }))
    .await
}

/// A SQLite file of its own in `data_dir`, in either run (the trimming is SQLite's).
fn own_sqlite_url(data_dir: &std::path::Path) -> String {
    format!("sqlite://{}?mode=rwc", data_dir.join("own.db").display())
}

/// The test configuration on [`own_sqlite_url`].
fn sqlite_config(test_db: &TestDb) -> arbor::config::Config {
    let mut config = crate::support::test_config(test_db);
    config.database.url = own_sqlite_url(&test_db.data_dir);
    config
}

/// A SQLite pool that grew (at start, in a burst) closes its idle connections down to the one
/// the idle server's poll uses, and never one in use.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn idle_sqlite_connections_beyond_one_are_closed_and_busy_ones_never() {
    assert_eq!(arbor::storage::SQLITE_IDLE_CONNECTIONS, 1);
    let test_db = TestDb::fresh().await;
    let db = arbor::storage::connect(&sqlite_config(&test_db)).await.unwrap();
    settled(&db).await;
    let mut held = hold(&db, 4).await;
    assert_eq!(arbor::storage::pool_use(&db).0, 4);
    let busy = held.pop().unwrap();
    for txn in held {
        txn.commit().await.unwrap();
    }
    assert_eq!(arbor::storage::trim_idle_sqlite(&db).await, 0, "a connection is in use");
    busy.commit().await.unwrap();
    assert_eq!(settled(&db).await, (4, 4));
    assert_eq!(arbor::storage::trim_idle_sqlite(&db).await, 3);
    assert_eq!(arbor::storage::pool_use(&db), (1, 1));
    // Nothing more to close; the pool still serves and grows again when asked to.
    assert_eq!(arbor::storage::trim_idle_sqlite(&db).await, 0);
    let held = hold(&db, 3).await;
    assert_eq!(arbor::storage::pool_use(&db).0, 3);
    for txn in held {
        txn.commit().await.unwrap();
    }
    db.close().await.unwrap();
}

/// PostgreSQL's pool is left as it is: its idle connections cost the database server.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_postgres_pool_is_not_trimmed() {
    let test_db = TestDb::fresh_postgres().await;
    let mut config = crate::support::test_config(&test_db);
    config.database.url = test_db.url.clone();
    let db = arbor::storage::connect(&config).await.unwrap();
    settled(&db).await;
    for txn in hold(&db, 4).await {
        txn.commit().await.unwrap();
    }
    assert_eq!(settled(&db).await, (4, 4));
    assert_eq!(arbor::storage::trim_idle_sqlite(&db).await, 0);
    assert_eq!(arbor::storage::pool_use(&db).0, 4);
    db.close().await.unwrap();
}

/// The running server's SQLite pool comes back to one connection while it idles, after a
/// burst grew it (the search feeder closes the rest every few seconds), and stays at one: the
/// feeder's passes read on a single connection.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_running_servers_sqlite_pool_shrinks_back_after_a_burst() {
    let app = crate::support::TestApp::spawn_with(|config| {
        config.database.url = own_sqlite_url(&config.data_dir);
    })
    .await;
    for txn in hold(&app.state.db, 4).await {
        txn.commit().await.unwrap();
    }
    assert!(arbor::storage::pool_use(&app.state.db).0 >= 4);
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(30);
    while arbor::storage::pool_use(&app.state.db).0 > 1 {
        let now = arbor::storage::pool_use(&app.state.db);
        assert!(std::time::Instant::now() < deadline, "the pool stayed at {now:?} (open, idle)");
        tokio::time::sleep(std::time::Duration::from_millis(50)).await;
    }
    // Three of the feeder's idle passes (two statements each, once a second), watched without
    // nudging it: passes nudged back to back (as `settle` does) may each find the one before's
    // connection still on its way back, as any two statements in a row on the pool may.
    let from = app.state.queries.count();
    while app.state.queries.count() < from + 6 {
        assert!(std::time::Instant::now() < deadline, "the feeder ran no passes");
        assert_eq!(arbor::storage::pool_use(&app.state.db).0, 1, "a feeder pass opened a second connection");
        tokio::time::sleep(std::time::Duration::from_millis(10)).await;
    }
}

/// The pool gauge a scrape reports does not count the scrape's own query: read while the
/// server idles, every connection is idle (its count of runs ran after the pool was read).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_pool_gauge_does_not_count_the_scrapes_own_query() {
    let app = crate::support::TestApp::spawn_with(|config| {
        config.database.url = own_sqlite_url(&config.data_dir);
    })
    .await;
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(30);
    let at_rest = |(open, idle): (u32, usize)| open >= 1 && idle == open as usize;
    // Each scrape with the pool at rest, whatever its size: a scrape that read the pool after
    // its own query would find that query's connection still on its way back, every time.
    for _ in 0..5 {
        while !at_rest(arbor::storage::pool_use(&app.state.db)) {
            assert!(std::time::Instant::now() < deadline, "the pool never came to rest");
            tokio::time::sleep(std::time::Duration::from_millis(10)).await;
        }
        let (open, idle) = app.state.operations.present().await.unwrap().pool;
        assert_eq!(idle, open as usize, "the scrape saw {open} open, {idle} idle");
    }
}
