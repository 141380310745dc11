//! The test world: a fresh database per test, the real app on an ephemeral port, helpers.

#![allow(dead_code)]

pub mod browser;
pub mod digest;
pub mod idp;
pub mod mock_upstream;
pub mod rogue_idp;
pub mod smtp;
pub mod sse_client;

use std::net::{SocketAddr, TcpListener};
use std::path::PathBuf;

use arbor::config::{CliOverrides, Config};
use arbor::domain::accounts::{Actor, Role, User, UserStatus};
use arbor::state::AppState;
use arbor::storage::repos::messages::NewMessage;
use sea_orm::{ConnectionTrait, Database};
use uuid::Uuid;

/// Installs the TLS provider every reqwest client in the tests needs.
pub fn init_crypto() {
    let _ = rustls::crypto::ring::default_provider().install_default();
}

/// A database that exists for one test: a SQLite file in a temp dir, or a PostgreSQL schema of
/// its own, created on `ARBOR_TEST_DATABASE_URL`'s server and dropped afterwards.
///
/// On PostgreSQL every test gets a schema in one shared database (`arbor_tests`), reached with
/// `search_path` set in the URL, rather than a database each: `CREATE DATABASE` copies and syncs
/// a template (about 0.5 s and 0.3 s of system CPU here, for each of several hundred tests),
/// a schema takes milliseconds. Arbor names no schema in its SQL, so it runs the same in
/// `public` or in a schema of its own; the schema's connections carry it as their
/// `application_name`, so dropping it ends them first, as `DROP DATABASE ... WITH (FORCE)` did.
pub struct TestDb {
    /// URL the app should use.
    pub url: String,
    /// Data directory (SQLite file, and everything else the app writes).
    pub data_dir: PathBuf,
    _dir: tempfile::TempDir,
    /// On PostgreSQL: the shared database's URL and the schema's name.
    pg: Option<(String, String)>,
}

/// The database the tests' schemas live in.
const SHARED_PG_DATABASE: &str = "arbor_tests";

impl TestDb {
    /// Whether this run targets PostgreSQL.
    pub fn is_postgres() -> bool {
        std::env::var("ARBOR_TEST_DATABASE_URL").is_ok_and(|v| !v.is_empty())
    }

    /// A fresh, empty database.
    pub async fn fresh() -> TestDb {
        Self::fresh_on(std::env::var("ARBOR_TEST_DATABASE_URL").ok().filter(|v| !v.is_empty())).await
    }

    /// A fresh PostgreSQL database, whichever run this is (several instances need one): on
    /// `ARBOR_TEST_DATABASE_URL`'s server, else the machine's own at 127.0.0.1:5432.
    pub async fn fresh_postgres() -> TestDb {
        let url = std::env::var("ARBOR_TEST_DATABASE_URL")
            .ok()
            .filter(|v| !v.is_empty())
            .unwrap_or_else(|| "postgres://postgres@127.0.0.1:5432/postgres".into());
        Self::fresh_on(Some(url)).await
    }

    async fn fresh_on(admin_url: Option<String>) -> TestDb {
        let dir = tempfile::tempdir().expect("tempdir");
        let data_dir = dir.path().join("data");
        std::fs::create_dir_all(&data_dir).expect("data dir");
        match admin_url {
            None => {
                let url = format!("sqlite://{}?mode=rwc", data_dir.join("arbor.db").display());
                TestDb { url, data_dir, _dir: dir, pg: None }
            }
            Some(admin_url) => {
                let shared = shared_pg_database(&admin_url).await;
                let name = format!("arbor_t_{}", Uuid::new_v4().simple());
                let conn = Database::connect(&shared).await.expect("connect to the tests' database");
                conn.execute_unprepared(&format!("CREATE SCHEMA \"{name}\""))
                    .await
                    .expect("create test schema");
                conn.close().await.ok();
                let mut url = reqwest::Url::parse(&shared).expect("a URL");
                url.query_pairs_mut()
                    .append_pair("options", &format!("-c search_path={name}"))
                    .append_pair("application_name", &name);
                TestDb { url: url.to_string(), data_dir, _dir: dir, pg: Some((shared, name)) }
            }
        }
    }
}

/// The URL of the database the tests' schemas live in, on `admin_url`'s server; made once per
/// process (several test processes may race to make it: the loser's error is expected).
async fn shared_pg_database(admin_url: &str) -> String {
    static MADE: std::sync::Mutex<Vec<String>> = std::sync::Mutex::new(Vec::new());
    let mut url = reqwest::Url::parse(admin_url).expect("ARBOR_TEST_DATABASE_URL is a URL");
    url.set_path(&format!("/{SHARED_PG_DATABASE}"));
    let shared = url.to_string();
    let made = MADE.lock().unwrap_or_else(std::sync::PoisonError::into_inner).contains(&shared);
    if !made {
        let admin = Database::connect(admin_url).await.expect("connect to ARBOR_TEST_DATABASE_URL");
        let exists = admin
            .query_one_raw(sea_orm::Statement::from_string(
                sea_orm::DbBackend::Postgres,
                format!("SELECT 1 FROM pg_database WHERE datname = '{SHARED_PG_DATABASE}'"),
            ))
            .await
            .expect("look for the tests' database")
            .is_some();
        if !exists {
            // Another test (or process) may make it at the same moment: its error is fine.
            let _ = admin.execute_unprepared(&format!("CREATE DATABASE \"{SHARED_PG_DATABASE}\"")).await;
        }
        admin.close().await.ok();
        MADE.lock().unwrap_or_else(std::sync::PoisonError::into_inner).push(shared.clone());
    }
    shared
}

impl Drop for TestDb {
    fn drop(&mut self) {
        let Some((shared, name)) = self.pg.take() else {
            return;
        };
        // Drop runs outside async context: use a private runtime on a plain thread.
        let _ = std::thread::spawn(move || {
            let rt = tokio::runtime::Builder::new_current_thread().enable_all().build().expect("runtime");
            rt.block_on(async move {
                if let Ok(conn) = Database::connect(&shared).await {
                    // Connections a test left open could hold locks the drop would wait for.
                    let _ = conn
                        .execute_unprepared(&format!(
                            "SELECT pg_terminate_backend(pid) FROM pg_stat_activity \
                             WHERE application_name = '{name}' AND pid <> pg_backend_pid()"
                        ))
                        .await;
                    let _ =
                        conn.execute_unprepared(&format!("DROP SCHEMA IF EXISTS \"{name}\" CASCADE")).await;
                    let _ = conn.close().await;
                }
            });
        })
        .join();
    }
}

/// A person signed in (cookie and CSRF token) with a workspace and a chat session, written
/// straight into the database of a real server process.
pub struct Seeded {
    /// The person.
    pub user: User,
    /// `Cookie` header value.
    pub cookie: String,
    /// The browser session's CSRF token.
    pub csrf: String,
    /// Their workspace.
    pub workspace: Uuid,
    /// A chat session in it.
    pub session: Uuid,
}

/// Seeds `email` with `role`, signed in, with a workspace "Work" and a chat session `title`.
pub async fn seed_person(
    conn: &sea_orm::DatabaseConnection,
    auth: &arbor::config::AuthConfig,
    email: &str,
    role: Role,
    title: &str,
) -> Seeded {
    let user =
        arbor::storage::repos::users::insert(conn, email, "Ada", role, UserStatus::Active).await.unwrap();
    let issued = arbor::auth::sessions::issue(conn, auth, user.id, Some("tests"), None).await.unwrap();
    let actor = Actor::for_tests(&user);
    let ws =
        arbor::domain::sessions::Sessions::new(conn.clone()).create_workspace(&actor, "Work").await.unwrap();
    let session = arbor::domain::sessions::Sessions::new(conn.clone())
        .create_session(&actor, ws.id, title)
        .await
        .unwrap()
        .id;
    Seeded {
        user,
        cookie: format!("arbor_session={}", issued.token),
        csrf: issued.csrf_secret,
        workspace: ws.id,
        session,
    }
}

/// The configuration tests run with: defaults, one worker, the test database.
pub fn test_config(db: &TestDb) -> Config {
    let mut config = arbor::config::load(&CliOverrides::default(), &[]).expect("default config").config;
    config.data_dir = db.data_dir.clone();
    config.database.url = db.url.clone();
    config.database.max_connections = 5;
    config.server.workers = 1;
    config.server.bind = "127.0.0.1:0".parse().expect("addr");
    // Templates render in a child: the real binary, not this test process.
    config.agent.prompt_renderer = env!("CARGO_BIN_EXE_arbor").into();
    config
}

/// A running Arbor with its own database.
pub struct TestApp {
    /// Where it listens.
    pub addr: SocketAddr,
    /// The shared state, for driving the domain directly.
    pub state: AppState,
    /// A client that follows no redirects and keeps no cookies.
    pub client: reqwest::Client,
    handle: actix_web::dev::ServerHandle,
    // Dropped last: the server must stop before the database goes.
    db: TestDb,
}

impl TestApp {
    /// Starts the app on a fresh database.
    pub async fn spawn() -> TestApp {
        Self::spawn_with(|_| {}).await
    }

    /// Starts the app after letting the test adjust the configuration.
    pub async fn spawn_with(adjust: impl FnOnce(&mut Config)) -> TestApp {
        let listener = TcpListener::bind("127.0.0.1:0").expect("bind");
        Self::spawn_on(listener, adjust).await
    }

    /// Starts the app on a listener the test bound first (so its URL is known in advance).
    pub async fn spawn_on(listener: TcpListener, adjust: impl FnOnce(&mut Config)) -> TestApp {
        init_crypto();
        let db = TestDb::fresh().await;
        let addr = listener.local_addr().expect("addr");
        let mut config = test_config(&db);
        // The real address, so links Arbor derives from it point back at this server.
        config.server.bind = addr;
        adjust(&mut config);
        let state = arbor::build_state(config).await.expect("build state");
        let server = arbor::serve(state.clone(), listener).expect("serve");
        let handle = server.handle();
        tokio::spawn(server);
        // Idle connections leave the pool after 2 s, before the server's keep-alive (actix's
        // 5 s) closes them: a request sent on a connection the server is closing at that moment
        // fails with "connection closed before message completed" (seen once in CI, on a busy
        // machine, after a test waited between two requests).
        let client = reqwest::Client::builder()
            .redirect(reqwest::redirect::Policy::none())
            .pool_idle_timeout(std::time::Duration::from_secs(2))
            .build()
            .expect("client");
        TestApp { addr, state, client, handle, db }
    }

    /// Absolute URL of a path on this app.
    pub fn url(&self, path: &str) -> String {
        format!("http://{}{}", self.addr, path)
    }

    /// Creates an active user.
    pub async fn create_user(&self, email: &str, role: Role) -> User {
        arbor::storage::repos::users::insert(
            &self.state.db,
            email,
            email.split('@').next().unwrap_or(email),
            role,
            UserStatus::Active,
        )
        .await
        .expect("insert user")
    }

    /// Signs a user in and returns the `Cookie` header value for their session.
    pub async fn login(&self, user: &User) -> String {
        self.login_full(user).await.cookie
    }

    /// Signs a user in and returns the cookie and the CSRF token of the new session.
    pub async fn login_full(&self, user: &User) -> TestSession {
        let issued = arbor::auth::sessions::issue(
            &self.state.db,
            &self.state.config.auth,
            user.id,
            Some("tests"),
            None,
        )
        .await
        .expect("issue session");
        TestSession {
            cookie: format!("arbor_session={}", issued.token),
            csrf: issued.csrf_secret.clone(),
            id: arbor::auth::sessions::hash_token(&issued.token),
        }
    }

    /// This app's origin, as a browser would send it.
    pub fn origin(&self) -> String {
        format!("http://{}", self.addr)
    }

    /// A same-origin form POST, with the session's cookie and CSRF token when given.
    pub async fn post_form(
        &self,
        path: &str,
        body: &str,
        session: Option<&TestSession>,
    ) -> reqwest::Response {
        let mut req = self
            .client
            .post(self.url(path))
            .header("Origin", self.origin())
            .header("Content-Type", "application/x-www-form-urlencoded")
            .body(body.to_string());
        if let Some(s) = session {
            req = req.header("Cookie", &s.cookie).header("X-CSRF-Token", &s.csrf);
        }
        req.send().await.expect("request")
    }

    /// A GET with an optional session cookie.
    pub async fn get(&self, path: &str, cookie: Option<&str>) -> reqwest::Response {
        let mut req = self.client.get(self.url(path));
        if let Some(c) = cookie {
            req = req.header("Cookie", c);
        }
        req.send().await.expect("request")
    }

    /// A workspace and an empty session owned by `user`.
    pub async fn create_session(&self, user: &User) -> (Uuid, Uuid) {
        let actor = Actor::for_tests(user);
        let ws = self.state.sessions.create_workspace(&actor, "Research").await.expect("workspace");
        let s = self.state.sessions.create_session(&actor, ws.id, "First session").await.expect("session");
        (ws.id, s.id)
    }
}

impl Drop for TestApp {
    fn drop(&mut self) {
        // The stop command is sent on call; awaiting it is not needed.
        drop(self.handle.stop(false));
    }
}

/// A complete user message with the given parts, as a member's question is stored.
fn user_message(
    id: Uuid,
    parent_id: Option<Uuid>,
    parts: &[arbor::providers::types::Part],
) -> NewMessage<'_> {
    NewMessage {
        id,
        parent_id,
        role: arbor::domain::sessions::tree::Role::User,
        parts,
        model: None,
        status: arbor::domain::sessions::tree::MessageStatus::Complete,
        client_id: None,
        author_id: None,
    }
}

/// A user message with `text`, written straight to the database as the session's active root.
pub async fn seed_message(db: &arbor::storage::Db, session: Uuid, text: &str) -> Uuid {
    let id = Uuid::now_v7();
    let parts = [arbor::providers::types::Part::Text { text: text.into() }];
    arbor::storage::repos::messages::insert_chosen(db, session, &user_message(id, None, &parts))
        .await
        .expect("message");
    id
}

/// A question and its answer (both `text`), with the run that wrote the answer, written
/// straight to the database under `parent` and chosen: (run, question, answer).
pub async fn seed_turn(
    db: &arbor::storage::Db,
    session: Uuid,
    owner: Uuid,
    parent: Option<Uuid>,
    text: &str,
) -> (Uuid, Uuid, Uuid) {
    use arbor::domain::sessions::tree::Role;
    use arbor::storage::repos::messages::{NewRun, insert_turn};
    let parts = [arbor::providers::types::Part::Text { text: text.into() }];
    let (q, a, run) = (Uuid::now_v7(), Uuid::now_v7(), Uuid::now_v7());
    let question = user_message(q, parent, &parts);
    let answer = NewMessage { id: a, parent_id: Some(q), role: Role::Assistant, ..question };
    let new_run = NewRun { id: run, owner_id: owner, leaf_message_id: q, assistant_message_id: a };
    insert_turn(db, session, &question, &answer, &new_run).await.expect("turn");
    (run, q, a)
}

/// A signed-in browser session as the tests hold it.
#[derive(Debug, Clone)]
pub struct TestSession {
    /// `Cookie` header value.
    pub cookie: String,
    /// The session's CSRF token.
    pub csrf: String,
    /// The session's id (token hash), as the sessions page names it.
    pub id: String,
}

/// The session cookie value from a response's `Set-Cookie`, as a `Cookie` header value.
pub fn session_cookie_from(res: &reqwest::Response) -> Option<String> {
    res.headers()
        .get_all("set-cookie")
        .iter()
        .filter_map(|v| v.to_str().ok())
        .find(|c| c.starts_with("arbor_session=") && !c.starts_with("arbor_session=;"))
        .and_then(|c| c.split(';').next())
        .map(str::to_string)
}

/// A free loopback port (for running the real binary).
pub fn free_port() -> u16 {
    TcpListener::bind("127.0.0.1:0").and_then(|l| l.local_addr()).map(|a| a.port()).expect("free port")
}

/// Percent-encodes a form or query value (everything but ASCII letters, digits, `-`, `_`, `.`).
pub fn urlencode(v: &str) -> String {
    v.bytes()
        .map(|b| match b {
            b'A'..=b'Z' | b'a'..=b'z' | b'0'..=b'9' | b'-' | b'_' | b'.' => (b as char).to_string(),
            _ => format!("%{b:02X}"),
        })
        .collect()
}

/// The statements one GET of `path` runs (with this cookie): the least of five tries after one
/// that is not counted (a first visit may touch the session or fill a cache), since the search
/// feeder and the usage writer share the connection and may run one at that moment; on a busy
/// machine a request is slow and more of them land inside it. A try during which a kept copy's
/// generation moved is not counted: the generations are the process's, so another test's write
/// (tests share the process, not the database) makes this page read its copies again.
pub async fn queries_of(app: &TestApp, cookie: &str, path: &str) -> u64 {
    use arbor::storage::changes::{Kept, generation};
    let generations = || Kept::ALL.map(generation);
    let warm = app.get(path, Some(cookie)).await;
    assert_eq!(warm.status(), 200, "{path}");
    warm.text().await.unwrap();
    let (mut least, mut counted) = (u64::MAX, 0);
    for _ in 0..100 {
        let (before, kept) = (app.state.queries.count(), generations());
        let res = app.get(path, Some(cookie)).await;
        assert_eq!(res.status(), 200, "{path}");
        res.text().await.unwrap();
        if generations() != kept {
            continue;
        }
        least = least.min(app.state.queries.count() - before);
        counted += 1;
        if counted == 5 {
            return least;
        }
    }
    panic!("{path}: a kept copy's generation moved during {} of 100 tries", 100 - counted);
}
