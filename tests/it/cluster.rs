//! Several real Arbor processes on one PostgreSQL database and one Redis (issue #20): a run
//! executed by one instance streams on another, Stop and decisions work from any instance, an
//! instance killed mid-run leaves its replies interrupted on the others, migrations run once,
//! and a Redis that is down at start or lost while running is handled.
//!
//! These tests always use PostgreSQL (`ARBOR_TEST_DATABASE_URL`'s server, else the machine's
//! own) and Redis (`ARBOR_TEST_REDIS_URL`, else 127.0.0.1:6379): several instances need both.

use std::process::Stdio;
use std::time::{Duration, Instant};

use arbor::domain::accounts::{Actor, Role, UserStatus};
use arbor::domain::sessions::tree::MessageStatus;
use arbor::storage::repos::messages;
use uuid::Uuid;

use crate::cli::{Child, arbor, wait_exit, wait_healthy};
use crate::runs::use_mock;
use crate::support::mock_upstream::{self, MockUpstream, Provider, Reply};
use crate::support::sse_client::{Frame, SseReader};
use crate::support::{TestDb, free_port, init_crypto};

/// A master key every instance shares (as an operator's secret would be).
const MASTER_KEY: &str = "8f1c2d3e4a5b69788796a5b4c3d2e1f00112233445566778899aabbccddeeff0";

pub(crate) fn redis_url() -> String {
    std::env::var("ARBOR_TEST_REDIS_URL")
        .ok()
        .filter(|v| !v.is_empty())
        .unwrap_or("redis://127.0.0.1:6379".into())
}

/// One Arbor installation of several instances: the shared database, data folder and
/// configuration, and a member signed in with a chat session.
pub(crate) struct Cluster {
    pub(crate) mock: MockUpstream,
    /// Dropped after the processes (see `Drop`).
    _db: TestDb,
    pub(crate) dir: tempfile::TempDir,
    pub(crate) instances: Vec<(u16, Child)>,
    pub(crate) conn: sea_orm::DatabaseConnection,
    pub(crate) user: arbor::domain::accounts::User,
    pub(crate) workspace: Uuid,
    pub(crate) session: Uuid,
    pub(crate) cookie: String,
    pub(crate) csrf: String,
}

/// The configuration every instance reads: PostgreSQL, the bus, a short lease, the mock.
fn write_config(
    dir: &std::path::Path,
    db: &TestDb,
    mock: &MockUpstream,
    bus_url: &str,
    extra: &str,
) -> std::path::PathBuf {
    let mut probe = crate::support::test_config(db);
    use_mock(&mut probe, mock);
    let provider = &probe.llm.providers["openai"];
    let prefix = format!("t{}", Uuid::new_v4().simple());
    let config = dir.join("arbor.toml");
    std::fs::write(
        &config,
        format!(
            "{extra}[bus]\nurl = \"{bus_url}\"\nprefix = \"{prefix}\"\nlease_secs = 3\n\
             [llm]\ndetect_local_ollama = false\nflush_ms = 200\n[llm.providers.openai]\nkind = \"openai\"\n\
             base_url = \"{}\"\napi_key = \"{}\"\nmodels = [\"gpt-4o-mini\"]\n",
            provider.base_url, provider.api_key
        ),
    )
    .unwrap();
    config
}

/// Starts instance `n` (its own index folder and log), without waiting for it.
fn launch(dir: &std::path::Path, db: &TestDb, config: &std::path::Path, n: usize, port: u16) -> Child {
    let child = arbor(dir)
        .args(["--config"])
        .arg(config)
        .args(["serve", "--bind", &format!("127.0.0.1:{port}"), "--data-dir"])
        .arg(&db.data_dir)
        .env("ARBOR_DATABASE_URL", &db.url)
        .env("ARBOR_MASTER_KEY", MASTER_KEY)
        .env("ARBOR_SEARCH__INDEX_DIR", dir.join(format!("index-{n}")))
        .env("RUST_LOG", "info")
        .stdout(Stdio::null())
        .stderr(std::fs::File::create(dir.join(format!("instance-{n}.log"))).unwrap())
        .spawn()
        .unwrap();
    Child(child)
}

impl Cluster {
    /// `count` instances started one after the other, a member and a chat session.
    pub(crate) async fn start(count: usize, extra_config: &str) -> Cluster {
        Self::start_on(count, extra_config, &redis_url()).await
    }

    pub(crate) async fn start_on(count: usize, extra_config: &str, bus_url: &str) -> Cluster {
        init_crypto();
        let mock = mock_upstream::start().await.unwrap();
        let db = TestDb::fresh_postgres().await;
        let dir = tempfile::tempdir().unwrap();
        let config = write_config(dir.path(), &db, &mock, bus_url, extra_config);
        let mut instances = Vec::new();
        for n in 0..count {
            let port = free_port();
            let child = launch(dir.path(), &db, &config, n, port);
            let up = wait_healthy(&format!("http://127.0.0.1:{port}/readyz"), Duration::from_secs(30)).await;
            assert!(up, "instance {n} did not start:\n{}", log_of(dir.path(), n));
            instances.push((port, child));
        }
        let conn = sea_orm::Database::connect(db.url.as_str()).await.unwrap();
        let probe = crate::support::test_config(&db);
        let seeded =
            crate::support::seed_person(&conn, &probe.auth, "ada@example.com", Role::Member, "Cluster").await;
        Cluster {
            mock,
            _db: db,
            dir,
            instances,
            conn,
            user: seeded.user,
            workspace: seeded.workspace,
            session: seeded.session,
            cookie: seeded.cookie,
            csrf: seeded.csrf,
        }
    }

    /// A second person, an administrator, signed in: their cookie and CSRF token.
    pub(crate) async fn admin(&self) -> (String, String) {
        let probe = crate::support::test_config(&self._db);
        let admin = arbor::storage::repos::users::insert(
            &self.conn,
            "root@example.com",
            "Root",
            Role::Admin,
            UserStatus::Active,
        )
        .await
        .unwrap();
        let issued = arbor::auth::sessions::issue(&self.conn, &probe.auth, admin.id, Some("tests"), None)
            .await
            .unwrap();
        (format!("arbor_session={}", issued.token), issued.csrf_secret)
    }

    /// A form POST to instance `n` with another person's cookie and CSRF token.
    pub(crate) async fn post_as(
        &self,
        n: usize,
        who: &(String, String),
        path: &str,
        body: &str,
    ) -> reqwest::Response {
        let origin = self.origin(n);
        reqwest::Client::builder()
            .redirect(reqwest::redirect::Policy::none())
            .build()
            .unwrap()
            .post(format!("{origin}{path}"))
            .header("Origin", &origin)
            .header("Cookie", &who.0)
            .header("X-CSRF-Token", &who.1)
            .header("Content-Type", "application/x-www-form-urlencoded")
            .body(body.to_string())
            .send()
            .await
            .unwrap()
    }

    pub(crate) fn origin(&self, n: usize) -> String {
        format!("http://127.0.0.1:{}", self.instances[n].0)
    }

    /// A form POST to instance `n` as the signed-in browser.
    pub(crate) async fn post(&self, n: usize, path: &str, body: &str) -> reqwest::Response {
        self.post_as(n, &(self.cookie.clone(), self.csrf.clone()), path, body).await
    }

    /// A GET on instance `n` as the signed-in browser.
    pub(crate) async fn get(&self, n: usize, path: &str) -> reqwest::Response {
        reqwest::Client::new()
            .get(format!("{}{path}", self.origin(n)))
            .header("Cookie", &self.cookie)
            .send()
            .await
            .unwrap()
    }

    /// Sends a message through instance `n`; returns the answer's id (still streaming, or
    /// already whole when the mock was faster than the page).
    pub(crate) async fn send(&self, n: usize, text: &str) -> Uuid {
        let res = self.send_with(n, text, "openai/gpt-4o-mini").await;
        assert_eq!(res.status(), 200);
        let html = res.text().await.unwrap();
        let at = ["is-streaming\" id=\"m-", "msg-assistant\" id=\"m-"]
            .iter()
            .find_map(|marker| html.rfind(marker).map(|at| at + marker.len()))
            .unwrap_or_else(|| panic!("an answer: {html}"));
        Uuid::parse_str(&html[at..at + 36]).unwrap()
    }

    /// Sends a message for `model` through instance `n`; the response as it is.
    pub(crate) async fn send_with(&self, n: usize, text: &str, model: &str) -> reqwest::Response {
        let body = format!(
            "message={}&client_id={}&model={}",
            crate::support::urlencode(text),
            Uuid::new_v4().simple(),
            crate::support::urlencode(model)
        );
        self.post(n, &format!("/s/{}/messages", self.session), &body).await
    }

    /// Waits until `answer` is no longer streaming in the database (at most `within`).
    pub(crate) async fn settled(&self, answer: Uuid, within: Duration) -> arbor::model::messages::Message {
        let began = Instant::now();
        loop {
            let m = messages::find_message(&self.conn, self.session, answer).await.unwrap().unwrap();
            if m.status != MessageStatus::Streaming {
                return m;
            }
            assert!(began.elapsed() < within, "still streaming after {within:?}:\n{}", self.logs());
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    }

    pub(crate) fn logs(&self) -> String {
        (0..self.instances.len())
            .map(|n| format!("--- instance {n}\n{}", log_of(self.dir.path(), n)))
            .collect()
    }

    /// A slow answer (about 120 pieces, one every `delay_ms`) queued at the mock.
    pub(crate) fn queue_slow(&self, delay_ms: u64) {
        self.mock.enqueue(
            Provider::OpenAi,
            Reply::Fixture {
                path: "openai/many_small_chunks.sse".into(),
                chunk_delay_ms: delay_ms,
                first_byte_delay_ms: 0,
            },
        );
    }
}

impl Drop for Cluster {
    fn drop(&mut self) {
        // The processes first: the database is dropped after them.
        self.instances.clear();
    }
}

fn log_of(dir: &std::path::Path, n: usize) -> String {
    let log = std::fs::read_to_string(dir.join(format!("instance-{n}.log"))).unwrap_or_default();
    log[log.len().saturating_sub(4000)..].to_string()
}

/// Reads the browser's event stream of the session until `done`: the frames' names and data.
async fn follow(reader: &mut SseReader, within: Duration) -> Vec<(String, String)> {
    let mut got = Vec::new();
    let deadline = Instant::now() + within;
    while let Ok(Some(frame)) = tokio::time::timeout_at(deadline.into(), reader.next()).await {
        if let Frame::Event { name, data } = frame {
            let done = name == "done";
            got.push((name, data));
            if done {
                break;
            }
        }
    }
    got
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_run_executed_by_one_instance_streams_live_on_another_and_stops_from_it() {
    let c = Cluster::start(2, "").await;
    // Completes: followed on B from its first event to its end (about 4 s of reply).
    c.queue_slow(30);
    let answer = c.send(0, "Tell me a story").await;
    let res = c.get(1, &format!("/s/{}/events", c.session)).await;
    assert_eq!(res.status(), 200);
    let mut reader = SseReader::new(res);
    let got = follow(&mut reader, Duration::from_secs(30)).await;
    let names: Vec<&str> = got.iter().map(|(n, _)| n.as_str()).collect();
    assert_eq!(names.first(), Some(&"snapshot"), "{names:?}\n{}", c.logs());
    assert_eq!(names.last(), Some(&"done"), "{names:?}\n{}", c.logs());
    let deltas = names.iter().filter(|n| **n == "delta").count();
    assert!(deltas >= 10, "B streamed the run live, piece by piece: {names:?}");
    let done = c.settled(answer, Duration::from_secs(20)).await;
    assert_eq!(done.status, MessageStatus::Complete);
    // What B streamed is the answer, once: the snapshot's text, then the deltas, in order.
    let deltas: String =
        got.iter().filter(|(n, _)| n == "delta").map(|(_, d)| html_unescape(&strip_tags(d))).collect();
    let text = done.text();
    assert!(text.ends_with(&deltas), "nothing lost or repeated on the way:\n{deltas:?}\n{text:?}");
    let before = &text[..text.len() - deltas.len()];
    assert!(html_unescape(&strip_tags(&got[0].1)).contains(before), "the snapshot holds the rest");

    // Stop pressed on B stops the run A executes.
    c.queue_slow(80);
    let answer = c.send(0, "Another one").await;
    let mut reader = SseReader::new(c.get(1, &format!("/s/{}/events", c.session)).await);
    // Wait for some text to arrive on B before stopping.
    let began = Instant::now();
    loop {
        match tokio::time::timeout(Duration::from_secs(10), reader.next()).await {
            Ok(Some(Frame::Event { name, .. })) if name == "delta" => break,
            Ok(Some(_)) => {}
            other => panic!("no delta on B: {other:?}\n{}", c.logs()),
        }
        assert!(began.elapsed() < Duration::from_secs(15));
    }
    let res = c.post(1, &format!("/s/{}/stop", c.session), "").await;
    assert!(res.status().is_success(), "{}", res.status());
    let stopped = c.settled(answer, Duration::from_secs(10)).await;
    assert_eq!(stopped.status, MessageStatus::Stopped, "{:?}\n{}", stopped.error, c.logs());
    let rest = follow(&mut reader, Duration::from_secs(10)).await;
    assert_eq!(rest.last().map(|(n, _)| n.as_str()), Some("done"), "B's stream ends too: {rest:?}");
}

fn strip_tags(html: &str) -> String {
    let mut out = String::new();
    let mut in_tag = false;
    for ch in html.chars() {
        match ch {
            '<' => in_tag = true,
            '>' => in_tag = false,
            c if !in_tag => out.push(c),
            _ => {}
        }
    }
    out
}

fn html_unescape(s: &str) -> String {
    s.replace("&lt;", "<")
        .replace("&gt;", ">")
        .replace("&quot;", "\"")
        .replace("&#x27;", "'")
        .replace("&#39;", "'")
        .replace("&amp;", "&")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn kill_9_of_the_executing_instance_leaves_its_run_interrupted_with_its_text_on_the_other() {
    let mut c = Cluster::start(2, "").await;
    c.queue_slow(60);
    let answer = c.send(0, "Tell me a story").await;
    // B follows it, and some text has been flushed.
    let mut reader = SseReader::new(c.get(1, &format!("/s/{}/events", c.session)).await);
    let began = Instant::now();
    let flushed = loop {
        let m = messages::find_message(&c.conn, c.session, answer).await.unwrap().unwrap();
        if m.text().len() > 10 {
            break m.text();
        }
        assert!(began.elapsed() < Duration::from_secs(15), "nothing was flushed");
        tokio::time::sleep(Duration::from_millis(50)).await;
    };
    let (_, mut a) = c.instances.remove(0);
    a.0.kill().unwrap();
    wait_exit(&mut a.0, Duration::from_secs(10)).expect("killed");
    let killed = Instant::now();
    let m = c.settled(answer, Duration::from_secs(10)).await;
    assert!(killed.elapsed() < Duration::from_secs(10));
    assert_eq!(m.status, MessageStatus::Interrupted, "{}", c.logs());
    assert!(m.text().starts_with(&flushed), "the partial text is kept");
    // The watcher on B sees the reply end.
    let rest = follow(&mut reader, Duration::from_secs(10)).await;
    assert_eq!(rest.last().map(|(n, _)| n.as_str()), Some("done"), "{rest:?}");
    assert!(rest.iter().any(|(n, d)| n == "error" && d.contains("stopped")), "{rest:?}");
    // B's page offers Continue, and Continue on B completes it.
    let page = c.get(0, &format!("/s/{}", c.session)).await.text().await.unwrap();
    assert!(page.contains("btn-continue"), "{page}");
    c.mock.enqueue(Provider::OpenAi, Reply::fixture("openai/text.sse"));
    let res = c.post(0, &format!("/s/{}/messages/{answer}/continue", c.session), "").await;
    assert_eq!(res.status(), 200);
    let done = c.settled(answer, Duration::from_secs(15)).await;
    assert_eq!(done.status, MessageStatus::Complete, "{}", c.logs());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn instances_starting_together_migrate_once_and_redis_down_at_start_is_a_clear_error() {
    init_crypto();
    let mock = mock_upstream::start().await.unwrap();
    let db = TestDb::fresh_postgres().await;
    let dir = tempfile::tempdir().unwrap();
    let config = write_config(dir.path(), &db, &mock, &redis_url(), "");
    let ports = [free_port(), free_port(), free_port()];
    let children: Vec<Child> = (0..3).map(|n| launch(dir.path(), &db, &config, n, ports[n])).collect();
    let conn = sea_orm::Database::connect(db.url.as_str()).await.unwrap();
    use migration::MigratorTrait;
    use sea_orm::{ConnectionTrait, Statement};
    for (n, port) in ports.iter().enumerate() {
        let up = wait_healthy(&format!("http://127.0.0.1:{port}/readyz"), Duration::from_secs(60)).await;
        if !up {
            let activity = conn
                .query_all_raw(Statement::from_string(
                    conn.get_database_backend(),
                    "SELECT coalesce(state, '') || ' ' || coalesce(wait_event_type, '') || ' ' || \
                     coalesce(wait_event, '') || ' ' || left(query, 120) FROM pg_stat_activity \
                     WHERE datname = current_database()",
                ))
                .await
                .unwrap()
                .iter()
                .map(|r| r.try_get_by_index::<String>(0).unwrap_or_default())
                .collect::<Vec<_>>()
                .join("\n");
            let logs: String = (0..3)
                .map(|i| {
                    let log = std::fs::read_to_string(dir.path().join(format!("instance-{i}.log")))
                        .unwrap_or_default();
                    let notable: Vec<&str> = log
                        .lines()
                        .filter(|l| !l.contains("sea_orm_migration") || l.contains("ERROR"))
                        .collect();
                    format!("--- {i}\n{}", notable.join("\n"))
                })
                .collect();
            panic!("instance {n} did not start:\n{activity}\n{logs}");
        }
    }
    let applied = conn
        .query_all_raw(Statement::from_string(
            conn.get_database_backend(),
            "SELECT version FROM seaql_migrations",
        ))
        .await
        .unwrap();
    assert_eq!(applied.len(), migration::Migrator::migrations().len(), "every migration, once");
    let leases = conn
        .query_all_raw(Statement::from_string(conn.get_database_backend(), "SELECT id FROM instances"))
        .await
        .unwrap();
    assert_eq!(leases.len(), 3, "each instance holds a lease");
    drop(children);
    conn.close().await.unwrap();

    // Redis configured but not there: exit code 2 and one clear line.
    let closed = free_port();
    let config = write_config(dir.path(), &db, &mock, &format!("redis://127.0.0.1:{closed}"), "");
    let mut child = launch(dir.path(), &db, &config, 9, free_port());
    let status = wait_exit(&mut child.0, Duration::from_secs(20)).expect("exits");
    assert_eq!(status.code(), Some(2), "{}", log_of(dir.path(), 9));
    let log = log_of(dir.path(), 9);
    assert!(log.contains("cannot reach Redis at bus.url"), "{log}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_instance_paused_past_its_lease_loses_its_runs_to_another_and_takes_a_new_lease() {
    let c = Cluster::start(2, "").await;
    c.queue_slow(60);
    let answer = c.send(0, "Tell me a story").await;
    let began = Instant::now();
    while messages::find_message(&c.conn, c.session, answer).await.unwrap().unwrap().text().len() < 10 {
        assert!(began.elapsed() < Duration::from_secs(15), "nothing was flushed");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    let pid = c.instances[0].1.0.id().to_string();
    assert!(std::process::Command::new("kill").args(["-STOP", &pid]).status().unwrap().success());
    let m = c.settled(answer, Duration::from_secs(10)).await;
    assert_eq!(m.status, MessageStatus::Interrupted, "B took the run over: {}", c.logs());
    let kept = m.text();
    assert!(std::process::Command::new("kill").args(["-CONT", &pid]).status().unwrap().success());
    // A notices at its next renewal, stops its run without overwriting what B recorded.
    let began = Instant::now();
    while !log_of(c.dir.path(), 0).contains("lease lapsed") {
        assert!(began.elapsed() < Duration::from_secs(10), "A never noticed:\n{}", c.logs());
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    tokio::time::sleep(Duration::from_millis(500)).await;
    let after = messages::find_message(&c.conn, c.session, answer).await.unwrap().unwrap();
    assert_eq!(after.status, MessageStatus::Interrupted);
    assert_eq!(after.text(), kept, "what B recorded stands: A wrote nothing over it");
    // A serves again: a run on A completes.
    c.mock.enqueue(Provider::OpenAi, Reply::fixture("openai/text.sse"));
    let res = c.post(0, &format!("/s/{}/messages/{answer}/continue", c.session), "").await;
    assert_eq!(res.status(), 200, "{}", c.logs());
    assert_eq!(c.settled(answer, Duration::from_secs(15)).await.status, MessageStatus::Complete);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sign_in_throttles_and_rate_limits_are_counted_once_across_instances() {
    let c = Cluster::start(2, "").await;
    // Five wrong passwords a minute per account (the default), spread over both instances.
    let attempt = |n: usize| {
        let origin = c.origin(n);
        async move {
            reqwest::Client::builder()
                .redirect(reqwest::redirect::Policy::none())
                .build()
                .unwrap()
                .post(format!("{origin}/login"))
                .header("Origin", &origin)
                .header("Content-Type", "application/x-www-form-urlencoded")
                .body("email=ada%40example.com&password=wrong-password")
                .send()
                .await
                .unwrap()
                .status()
                .as_u16()
        }
    };
    let mut statuses = Vec::new();
    for i in 0..5 {
        statuses.push(attempt(i % 2).await);
    }
    assert!(statuses.iter().all(|s| *s != 429), "five attempts are allowed: {statuses:?}");
    assert_eq!(attempt(1).await, 429, "the sixth is refused, whichever instance it reaches");
    assert_eq!(attempt(0).await, 429);

    // The per-member request limit of a provider, counted by two instances' registries.
    let counters = || async {
        arbor::bus::limits::SharedCounters::connect(&redis_url(), &format!("t{}", Uuid::new_v4().simple()))
            .await
            .unwrap()
    };
    let shared = counters().await;
    let a = arbor::domain::providers::key_pool::RateLimits::shared(shared.clone());
    let b = arbor::domain::providers::key_pool::RateLimits::shared(shared);
    let user = Uuid::now_v7();
    assert!(a.admit(user, "p", Some(3), None).await.is_ok());
    assert!(b.admit(user, "p", Some(3), None).await.is_ok());
    assert!(a.admit(user, "p", Some(3), None).await.is_ok());
    let wait = b.admit(user, "p", Some(3), None).await.unwrap_err();
    assert!((1..=60).contains(&wait), "{wait}");
    assert!(a.admit(Uuid::now_v7(), "p", Some(3), None).await.is_ok(), "another member counts alone");
    // Tokens spent through one count against the other.
    b.spend(user, "q", 900);
    let began = Instant::now();
    while a.admit(user, "q", None, Some(500)).await.is_ok() {
        assert!(began.elapsed() < Duration::from_secs(5), "the spent tokens never counted");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

/// Waits until the session has no running run, and returns the status of its latest run.
async fn last_run_settled(c: &Cluster) -> String {
    use sea_orm::{ColumnTrait, EntityTrait, QueryFilter, QueryOrder};
    let began = Instant::now();
    loop {
        let runs = arbor::storage::entities::run::Entity::find()
            .filter(arbor::storage::entities::run::Column::SessionId.eq(c.session))
            .order_by_asc(arbor::storage::entities::run::Column::CreatedAt)
            .all(&c.conn)
            .await
            .unwrap();
        let last = runs.last().map(|r| r.status.clone()).unwrap_or_default();
        if !last.is_empty() && last != "running" {
            return last;
        }
        assert!(began.elapsed() < Duration::from_secs(20), "the run never settled: {last}\n{}", c.logs());
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_dialog_raised_on_one_instance_is_approved_on_the_other_and_the_run_goes_on_there() {
    use crate::agent::{says, write_call};
    let c = Cluster::start(2, "").await;
    let actor = Actor::for_tests(&c.user);
    let form = arbor::domain::sessions::SessionForm {
        model: "openai/gpt-4o-mini".into(),
        exposed_roots: "notes".into(),
        approval_mode: "suggest".into(),
        ..Default::default()
    };
    arbor::domain::sessions::Sessions::new(c.conn.clone())
        .update_session(&actor, c.session, &form)
        .await
        .unwrap();
    c.mock.enqueue(Provider::OpenAi, write_call("notes/cluster.txt", "from B\n"));
    c.mock.enqueue(Provider::OpenAi, says("Written."));
    // The run may pause before the page is rendered: only the status is checked here.
    assert_eq!(c.send_with(0, "Write it", "openai/gpt-4o-mini").await.status(), 200);
    assert_eq!(last_run_settled(&c).await, "awaiting_confirmation");
    let call = arbor::storage::repos::agent::pending_call(&c.conn, c.session)
        .await
        .unwrap()
        .expect("a waiting call");
    // B shows the dialog, and deciding there resumes the run on B.
    let page = c.get(1, &format!("/s/{}", c.session)).await.text().await.unwrap();
    assert!(page.contains(&call.id.to_string()), "B's page shows the waiting call");
    let res =
        c.post(1, &format!("/s/{}/tool-calls/{}/decision", c.session, call.id), "decision=yes&scope=").await;
    assert!(res.status().is_success(), "{}", res.status());
    assert_eq!(last_run_settled(&c).await, "completed", "{}", c.logs());
    let folder = arbor::prompting::workspace_dir(&c._db.data_dir, c.workspace).join("notes");
    assert_eq!(std::fs::read_to_string(folder.join("cluster.txt")).unwrap(), "from B\n");
    // Deciding the same call again on A is harmless.
    let again =
        c.post(0, &format!("/s/{}/tool-calls/{}/decision", c.session, call.id), "decision=no&scope=").await;
    assert!(again.status().is_success() || again.status() == 409, "{}", again.status());
    assert_eq!(last_run_settled(&c).await, "completed");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_admin_change_on_one_instance_reaches_the_others_registry_and_its_limit_is_shared() {
    let c = Cluster::start(2, "").await;
    let admin = c.admin().await;
    let base = crate::support::urlencode(&c.mock.url(Provider::OpenAi));
    let body = format!(
        "name=team&label=Team&kind=openai&base_url={base}&visibility=everyone&models=gpt-4o-mini&enabled=on&rpm=1&tpm="
    );
    let res = c.post_as(0, &admin, "/admin/providers", &body).await;
    assert_eq!(res.status(), 303, "{}", res.text().await.unwrap());
    let location = res.headers()["location"].to_str().unwrap().to_string();
    let res = c.post_as(0, &admin, &format!("{location}/keys"), "label=k&key=sk-team").await;
    assert_eq!(res.status(), 200);
    // B learned of the new provider through the bus: a message for it is answered there.
    c.mock.enqueue(Provider::OpenAi, Reply::fixture("openai/text.sse"));
    let began = Instant::now();
    let res = loop {
        let res = c.send_with(1, "Hello", "team/gpt-4o-mini").await;
        if res.status() == 200 || began.elapsed() > Duration::from_secs(5) {
            break res;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    };
    assert_eq!(res.status(), 200, "{}", res.text().await.unwrap());
    assert_eq!(last_run_settled(&c).await, "completed", "{}", c.logs());
    // One request a minute for that provider, counted across both: A refuses the second.
    let res = c.send_with(0, "Again", "team/gpt-4o-mini").await;
    let status = res.status().as_u16();
    let text = res.text().await.unwrap();
    assert!(text.contains("faster than its limit allows"), "{status}: {text}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn redis_lost_while_running_leaves_each_instance_serving_and_recovers_when_it_returns() {
    let port = free_port();
    let start_redis = || {
        let child = std::process::Command::new("redis-server")
            .args(["--port", &port.to_string(), "--save", "", "--appendonly", "no", "--bind", "127.0.0.1"])
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .expect("redis-server");
        Child(child)
    };
    let mut redis = start_redis();
    let url = format!("redis://127.0.0.1:{port}");
    let began = Instant::now();
    while std::net::TcpStream::connect(("127.0.0.1", port)).is_err() {
        assert!(began.elapsed() < Duration::from_secs(10), "redis-server did not start");
        std::thread::sleep(Duration::from_millis(20));
    }
    let c = Cluster::start_on(2, "", &url).await;
    let c = &c;
    let follow_on_b = |delay: u64| async move {
        c.queue_slow(delay);
        let answer = c.send(0, "Tell me a story").await;
        // A client that came before the run's first frame crossed (right after Redis returned,
        // A's publisher may still be reconnecting) is told `done` at once; like a page, it
        // connects again while the answer is still being written.
        let began = Instant::now();
        loop {
            let mut reader = SseReader::new(c.get(1, &format!("/s/{}/events", c.session)).await);
            let got = follow(&mut reader, Duration::from_secs(30)).await;
            let streaming = messages::find_message(&c.conn, c.session, answer).await.unwrap().unwrap().status
                == MessageStatus::Streaming;
            if got.len() > 1 || !streaming || began.elapsed() > Duration::from_secs(3) {
                break (answer, got);
            }
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
    };
    // About 5 s of reply: B's client connects while it is written, however busy the machine.
    let (answer, got) = follow_on_b(40).await;
    assert_eq!(got.first().map(|(n, _)| n.as_str()), Some("snapshot"), "{got:?}\n{}", c.logs());
    assert_eq!(c.settled(answer, Duration::from_secs(20)).await.status, MessageStatus::Complete);

    // Redis goes away: A still answers its own runs, and says what happened.
    redis.0.kill().unwrap();
    let _ = redis.0.wait();
    c.mock.enqueue(Provider::OpenAi, Reply::fixture("openai/text.sse"));
    let answer = c.send(0, "Are you there?").await;
    assert_eq!(
        c.settled(answer, Duration::from_secs(20)).await.status,
        MessageStatus::Complete,
        "{}",
        c.logs()
    );
    let began = Instant::now();
    while !log_of(c.dir.path(), 0).contains("lost Redis") {
        assert!(began.elapsed() < Duration::from_secs(10), "A never said it lost Redis:\n{}", c.logs());
        tokio::time::sleep(Duration::from_millis(100)).await;
    }

    // Redis is back: both reconnect, and B follows A's runs again.
    let _redis = start_redis();
    let began = Instant::now();
    // A published while Redis was away, so its publisher reconnects too (and says so).
    let back = |n: usize| {
        let log = log_of(c.dir.path(), n);
        log.contains("reaches Redis again: resynchronising")
            && (n == 1 || log.contains("reaches Redis again (publishing)"))
    };
    while !(0..2).all(back) {
        assert!(began.elapsed() < Duration::from_secs(20), "not reconnected:\n{}", c.logs());
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    let (answer, got) = follow_on_b(40).await;
    let names: Vec<&str> = got.iter().map(|(n, _)| n.as_str()).collect();
    assert_eq!(names.first(), Some(&"snapshot"), "{names:?}\n{}", c.logs());
    assert!(names.iter().filter(|n| **n == "delta").count() >= 10, "live again: {names:?}\n{}", c.logs());
    assert_eq!(c.settled(answer, Duration::from_secs(20)).await.status, MessageStatus::Complete);
}

/// A reply of `pieces`, `delay_ms` apart.
fn slow(pieces: &[&str], delay_ms: u64) -> Reply {
    use crate::agent::chunk;
    let mut events = vec![chunk(serde_json::json!({"role": "assistant", "content": ""}), None)];
    events.extend(pieces.iter().map(|p| chunk(serde_json::json!({"content": p}), None)));
    events.push(chunk(serde_json::json!({}), Some("stop")));
    events.push("data: [DONE]\n\n".into());
    Reply::Sse { events, chunk_delay_ms: delay_ms }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_browser_on_one_instance_watches_a_run_another_executes_and_search_there_finds_it() {
    use crate::support::browser::Browser;
    let c = Cluster::start(2, "").await;
    let browser = Browser::start().await.expect("headless Chromium (scripts/test installs it)");
    let page = format!("{}/s/{}", c.origin(1), c.session);
    browser.sign_in(&c.origin(1), &c.cookie, &page).await.unwrap();
    browser.wait_for("#composer-message", Duration::from_secs(15)).await.unwrap();

    // Started on A; the page open on B (its watcher looks every 4 s) shows it while it is
    // written (12 s), then finished.
    let pieces = [
        "Streamed ",
        "from ",
        "the ",
        "other ",
        "instance ",
        "through ",
        "Redis, ",
        "piece ",
        "by ",
        "piece.",
    ];
    c.mock.enqueue(Provider::OpenAi, slow(&pieces, 1200));
    let answer = c.send(0, "Show me").await;
    browser
        .wait_for_text(".msg-assistant.is-streaming", "Streamed from", Duration::from_secs(30))
        .await
        .unwrap_or_else(|e| panic!("B's page never showed the live reply: {e}\n{}", c.logs()));
    let live = messages::find_message(&c.conn, c.session, answer).await.unwrap().unwrap();
    assert_eq!(live.status, MessageStatus::Streaming, "the page showed it while it was being written");
    browser
        .wait_for_text(
            ".msg-assistant[data-status=complete] .markdown",
            "Streamed from the other instance through Redis, piece by piece.",
            Duration::from_secs(30),
        )
        .await
        .unwrap();
    let errors = browser.console_errors().await.unwrap();
    assert!(errors.is_empty(), "console errors: {errors:#?}");
    browser.close().await.unwrap();

    // Search on B finds what was written through A, from B's own index, without a restart.
    // B's feeder reads the database once a second; the bound is generous because these are
    // debug builds on a machine that runs other tests beside them (CI saw more than 2 s). How
    // soon it is found on an idle server is the benchmarks' business, not a test's.
    c.mock.enqueue(Provider::OpenAi, slow(&["The ", "quokka ", "smiles."], 0));
    let answer = c.send(0, "Tell me about marsupials").await;
    c.settled(answer, Duration::from_secs(15)).await;
    let began = Instant::now();
    loop {
        let html = c.get(1, "/search?q=quokka").await.text().await.unwrap();
        if html.contains(&answer.to_string()) {
            break;
        }
        assert!(
            began.elapsed() < Duration::from_secs(20),
            "B's search never found it:\n{html}\n{}",
            c.logs()
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

/// A fresh PostgreSQL database (dropped with the first value), connected and migrated, with one
/// member in it.
async fn member_on_fresh_postgres() -> (TestDb, arbor::storage::Db, Uuid) {
    init_crypto();
    let db = TestDb::fresh_postgres().await;
    let mut config = crate::support::test_config(&db);
    config.database.url = db.url.clone();
    let conn = arbor::storage::connect(&config).await.unwrap();
    arbor::storage::migrate_up(&conn).await.unwrap();
    let member = arbor::storage::repos::users::insert(
        &conn,
        "ada@example.com",
        "Ada",
        Role::Member,
        UserStatus::Active,
    )
    .await
    .unwrap()
    .id;
    (db, conn, member)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn upload_quota_reservations_hold_across_instances() {
    use arbor::domain::files::Reservations;
    let (_db, conn, member) = member_on_fresh_postgres().await;
    let prefix = format!("t{}", Uuid::new_v4().simple());
    let counters = arbor::bus::limits::SharedCounters::connect(&redis_url(), &prefix).await.unwrap();
    // Two instances' reservations: the same member's quota of 100 bytes.
    let (a, b) = (Reservations::shared(counters.clone()), Reservations::shared(counters));
    let on_a = a.reserve(&conn, member, 60, 100).await.expect("60 of 100 fit");
    let refused = b.reserve(&conn, member, 60, 100).await.expect_err("60 more do not, on the other instance");
    assert!(refused.to_string().contains("storage limit"), "{refused}");
    let small = b.reserve(&conn, member, 40, 100).await.expect("40 more fit exactly");
    // Given back on A (the upload stored nothing): B has room again.
    on_a.release().await;
    let again = b.reserve(&conn, member, 60, 100).await.expect("room again after A gave its bytes back");
    // A failed upload's reservation (dropped) is given back too, in the background.
    drop(again);
    drop(small);
    let began = Instant::now();
    while a.reserve(&conn, member, 100, 100).await.is_err() {
        assert!(began.elapsed() < Duration::from_secs(5), "dropped reservations were never given back");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    conn.close().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn token_quota_holds_hold_across_instances() {
    use arbor::domain::admin::quota_holds::{Estimate, QuotaHolds};
    use arbor::domain::admin::quotas;
    let (_db, conn, member) = member_on_fresh_postgres().await;
    let limits = arbor::storage::repos::quotas::Limits { tokens_day: Some(1000), ..Default::default() };
    arbor::storage::repos::quotas::put(&conn, quotas::DEFAULT_SCOPE, limits).await.unwrap();
    let prefix = format!("t{}", Uuid::new_v4().simple());
    let counters = arbor::bus::limits::SharedCounters::connect(&redis_url(), &prefix).await.unwrap();
    // Two instances' holds of the same member's allowance of 1,000 tokens a day.
    let (a, b) = (QuotaHolds::shared(counters.clone()), QuotaHolds::shared(counters));
    let (a, b) = (quotas::QuotaGate::new(conn.clone(), a), quotas::QuotaGate::new(conn.clone(), b));
    let call = || Estimate { tokens: 600, micros: 0 };
    let on_a = a.admit(member, call).await.expect("nothing held yet");
    let on_b = b.admit(member, call).await.expect("600 held of 1,000: room left");
    let refused = a.admit(member, call).await.expect_err("1,200 held: none left");
    assert!(refused.to_string().contains("daily allowance of 1000 tokens"), "{refused}");
    assert!(b.check(member).await.is_err(), "the other instance sees it too");
    // Calls that end give their holds back (in the background, in Redis).
    drop(on_a);
    drop(on_b);
    let began = Instant::now();
    while b.check(member).await.is_err() {
        assert!(began.elapsed() < Duration::from_secs(5), "the holds were never given back");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    conn.close().await.unwrap();
}

/// A quota another instance writes (here: a row written behind this process's back) applies
/// within the 2 s this instance keeps its copy of the quota table.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_quota_written_elsewhere_applies_here_within_two_seconds() {
    use arbor::domain::admin::quota_holds::QuotaHolds;
    use arbor::domain::admin::quotas;
    use sea_orm::ConnectionTrait;
    let (_db, conn, member) = member_on_fresh_postgres().await;
    let gate = quotas::QuotaGate::new(conn.clone(), QuotaHolds::default());
    assert!(gate.check(member).await.is_ok(), "no quota yet");
    let insert = "INSERT INTO quotas (scope, tokens_day, updated_at) VALUES ('default', 0, now())";
    conn.execute_unprepared(insert).await.unwrap();
    let began = Instant::now();
    while gate.check(member).await.is_ok() {
        assert!(began.elapsed() < Duration::from_secs(3), "the written quota never applied");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    conn.close().await.unwrap();
}

/// Each instance answers token checks from memory; a token revoked, and a member disabled, on
/// one instance are refused on the other as soon as the bus has carried the note (well inside
/// the 10 s a copy is kept at most).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_token_revoked_a_browser_signed_out_or_a_member_disabled_on_one_instance_is_refused_on_the_other_at_once()
 {
    use arbor::domain::accounts::api_tokens::{ApiTokens, Scope};
    use arbor::domain::audit::Origin;
    let c = Cluster::start(2, "").await;
    let tokens = ApiTokens::new(c.conn.clone());
    let actor = Actor::for_tests(&c.user);
    // Revoked on A: B, which checked the token a moment ago, refuses it.
    let made = tokens.create(&actor, &Origin::cli(), "one", Scope::Api, None).await.unwrap();
    let token = made.token.expose().to_string();
    assert_eq!(token_status(&c, 1, &token).await, 200);
    assert_eq!(token_status(&c, 1, &token).await, 200, "served from B's memory");
    let res = c.post(0, &format!("/settings/tokens/{}/revoke", made.row.id), "").await;
    assert!(res.status().is_success() || res.status().is_redirection(), "{}", res.status());
    refused_within(|| token_status(&c, 1, &token)).await;

    // Signed out on A: B, which knew the browser session a moment ago, lets it in no more.
    assert_eq!(page_status(&c, 1, &c.cookie).await, 200);
    assert_eq!(page_status(&c, 1, &c.cookie).await, 200, "served from B's memory");
    let res = c.post(0, "/logout", "").await;
    assert!(res.status().is_success() || res.status().is_redirection(), "{}", res.status());
    refused_within(|| page_status(&c, 1, &c.cookie)).await;

    // The member disabled on A: B refuses their other token.
    let made = tokens.create(&actor, &Origin::cli(), "two", Scope::Api, None).await.unwrap();
    let token = made.token.expose().to_string();
    assert_eq!(token_status(&c, 1, &token).await, 200);
    let admin = c.admin().await;
    let res = c.post_as(0, &admin, &format!("/admin/users/{}/status", c.user.id), "active=0").await;
    assert!(res.status().is_success() || res.status().is_redirection(), "{}", res.status());
    refused_within(|| token_status(&c, 1, &token)).await;
}

async fn token_status(c: &Cluster, n: usize, token: &str) -> u16 {
    let url = format!("{}/v1/models", c.origin(n));
    reqwest::Client::new().get(url).bearer_auth(token).send().await.unwrap().status().as_u16()
}

/// A signed-in page of instance `n` with `cookie`: 200, or the way to the sign-in page.
async fn page_status(c: &Cluster, n: usize, cookie: &str) -> u16 {
    let client = reqwest::Client::builder().redirect(reqwest::redirect::Policy::none()).build().unwrap();
    let res = client.get(format!("{}/settings", c.origin(n))).header("Cookie", cookie).send().await.unwrap();
    res.status().as_u16()
}

/// Asks again until the answer is no longer 200, for 2 s at most.
async fn refused_within<F, Fut>(status: F)
where
    F: Fn() -> Fut,
    Fut: std::future::Future<Output = u16>,
{
    let began = Instant::now();
    loop {
        let status = status().await;
        if status != 200 {
            assert!(matches!(status, 401 | 403 | 303 | 302), "refused with {status}");
            return;
        }
        assert!(began.elapsed() < Duration::from_secs(2), "still accepted after 2 s");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}
