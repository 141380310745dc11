//! The real binary is killed mid-reply: after a restart the answer holds the text written up to
//! the last flush, is `interrupted`, and "Continue" completes it.

use std::process::Stdio;
use std::time::{Duration, Instant};

use arbor::domain::accounts::{Actor, Role};
use arbor::domain::sessions::tree::MessageStatus;
use arbor::storage::repos::messages;
use uuid::Uuid;

use crate::cli::{Child, arbor, wait_exit, wait_healthy};
use crate::runs::use_mock;
use crate::support::mock_upstream::{self, Provider, Reply};
use crate::support::{TestDb, free_port, init_crypto};

pub(crate) async fn serve(dir: &std::path::Path, db: &TestDb, config: &std::path::Path, port: u16) -> Child {
    let child = arbor(dir)
        .args(["--config"])
        .arg(config)
        .args(["serve", "--bind", &format!("127.0.0.1:{port}"), "--data-dir"])
        .arg(&db.data_dir)
        .env("ARBOR_DATABASE_URL", &db.url)
        .stdout(Stdio::null())
        // Kept beside the data, for a failing test to show.
        .stderr(std::fs::File::create(dir.join("server.log")).unwrap())
        .spawn()
        .unwrap();
    let child = Child(child);
    assert!(wait_healthy(&format!("http://127.0.0.1:{port}/readyz"), Duration::from_secs(30)).await);
    child
}

/// The real server on a fresh database, with a user, a browser session and a chat session.
pub(crate) struct CrashServer {
    pub(crate) mock: crate::support::mock_upstream::MockUpstream,
    pub(crate) db: TestDb,
    pub(crate) dir: tempfile::TempDir,
    pub(crate) config: std::path::PathBuf,
    pub(crate) port: u16,
    pub(crate) server: Child,
    pub(crate) conn: sea_orm::DatabaseConnection,
    pub(crate) user: arbor::domain::accounts::User,
    pub(crate) session: Uuid,
    pub(crate) cookie: String,
    pub(crate) csrf: String,
}

impl CrashServer {
    /// An API token of the seeded user, made with the CLI as an operator would.
    pub(crate) fn api_token(&self) -> String {
        let made = arbor(self.dir.path())
            .arg("--config")
            .arg(&self.config)
            .args(["admin", "token", "--email", "ada@example.com", "--name", "usage", "--data-dir"])
            .arg(&self.db.data_dir)
            .env("ARBOR_DATABASE_URL", &self.db.url)
            .output()
            .unwrap();
        assert!(made.status.success(), "{}", String::from_utf8_lossy(&made.stderr));
        String::from_utf8(made.stdout).unwrap().trim().to_string()
    }

    /// Sends `message` (form-encoded) from the session page; the answer's id.
    pub(crate) async fn send_message(&self, message: &str, client_id: &str) -> Uuid {
        let res = self
            .post(
                &format!("/s/{}/messages", self.session),
                format!("message={message}&client_id={client_id}&model=openai%2Fgpt-4o-mini"),
            )
            .send()
            .await
            .unwrap();
        assert_eq!(res.status(), 200);
        let html = res.text().await.unwrap();
        let at = html.find("is-streaming\" id=\"m-").unwrap() + "is-streaming\" id=\"m-".len();
        Uuid::parse_str(&html[at..at + 36]).unwrap()
    }

    /// A streamed chat completion through the gateway, read to its end.
    pub(crate) async fn streamed_api_call(&self, token: &str) {
        let reply = reqwest::Client::new()
            .post(format!("http://127.0.0.1:{}/v1/chat/completions", self.port))
            .bearer_auth(token)
            .json(&serde_json::json!({
                "model": "gpt-4o-mini",
                "stream": true,
                "messages": [{ "role": "user", "content": "hello" }],
            }))
            .send()
            .await
            .unwrap();
        assert_eq!(reply.status(), 200);
        let body = reply.text().await.unwrap();
        assert!(body.contains("data: [DONE]"), "{body}");
    }

    /// The seeded user's usage rows.
    pub(crate) async fn usage_rows(&self) -> Vec<arbor::storage::entities::usage::Model> {
        use arbor::storage::entities::usage;
        use sea_orm::{ColumnTrait, EntityTrait, QueryFilter};
        usage::Entity::find().filter(usage::Column::UserId.eq(self.user.id)).all(&self.conn).await.unwrap()
    }

    /// What the server logged so far.
    pub(crate) fn log(&self) -> String {
        std::fs::read_to_string(self.dir.path().join("server.log")).unwrap_or_default()
    }

    /// A form POST as the signed-in browser.
    pub(crate) fn post(&self, path: &str, body: String) -> reqwest::RequestBuilder {
        let origin = format!("http://127.0.0.1:{}", self.port);
        reqwest::Client::builder()
            .redirect(reqwest::redirect::Policy::none())
            .build()
            .unwrap()
            .post(format!("{origin}{path}"))
            .header("Origin", &origin)
            .header("Cookie", &self.cookie)
            .header("X-CSRF-Token", &self.csrf)
            .header("Content-Type", "application/x-www-form-urlencoded")
            .body(body)
    }

    /// A page, as the signed-in browser.
    pub(crate) async fn page(&self, path: &str) -> String {
        reqwest::Client::new()
            .get(format!("http://127.0.0.1:{}{path}", self.port))
            .header("Cookie", &self.cookie)
            .send()
            .await
            .unwrap()
            .text()
            .await
            .unwrap()
    }
}

/// Starts the real server with `extra_config` before the provider settings (which point at a
/// fresh mock upstream), and signs a user in.
pub(crate) async fn crash_server(extra_config: &str) -> CrashServer {
    init_crypto();
    let mock = mock_upstream::start().await.unwrap();
    let db = TestDb::fresh().await;
    let dir = tempfile::tempdir().unwrap();
    // The provider settings as an operator writes them, pointing at the mock.
    let mut probe = crate::support::test_config(&db);
    use_mock(&mut probe, &mock);
    let provider = &probe.llm.providers["openai"];
    let config = dir.path().join("arbor.toml");
    std::fs::write(
        &config,
        format!(
            "{extra_config}[llm]\ndetect_local_ollama = false\nflush_ms = 300\n[llm.providers.openai]\nkind = \"openai\"\n\
             base_url = \"{}\"\napi_key = \"{}\"\nmodels = [\"gpt-4o-mini\"]\n",
            provider.base_url, provider.api_key
        ),
    )
    .unwrap();
    let port = free_port();
    let server = serve(dir.path(), &db, &config, port).await;

    // A user, a browser session and a chat session, written next to the running server.
    let conn = sea_orm::Database::connect(db.url.as_str()).await.unwrap();
    let seeded =
        crate::support::seed_person(&conn, &probe.auth, "ada@example.com", Role::Member, "Crash").await;
    let crate::support::Seeded { user, cookie, csrf, session, .. } = seeded;
    CrashServer { mock, db, dir, config, port, server, conn, user, session, cookie, csrf }
}

/// The real server with a slow reply being written, and some of its text flushed.
pub(crate) struct SlowReply {
    pub(crate) mock: crate::support::mock_upstream::MockUpstream,
    pub(crate) db: TestDb,
    pub(crate) dir: tempfile::TempDir,
    pub(crate) config: std::path::PathBuf,
    pub(crate) port: u16,
    pub(crate) server: Child,
    pub(crate) conn: sea_orm::DatabaseConnection,
    pub(crate) session: Uuid,
    pub(crate) answer: Uuid,
    pub(crate) flushed: String,
    pub(crate) cookie: String,
    pub(crate) csrf: String,
}

pub(crate) async fn slow_reply(extra_config: &str) -> SlowReply {
    let started = crash_server(extra_config).await;
    let CrashServer { ref mock, ref conn, session, .. } = started;
    // A slow stream: ~120 events, one every 60 ms.
    mock.enqueue(
        Provider::OpenAi,
        Reply::Fixture {
            path: "openai/many_small_chunks.sse".into(),
            chunk_delay_ms: 60,
            first_byte_delay_ms: 0,
        },
    );
    let answer = started.send_message("Tell+me+a+story", "crash-1").await;

    // Wait until some text has been flushed, then kill the process without warning.
    let began = Instant::now();
    let flushed = loop {
        let m = messages::find_message(conn, session, answer).await.unwrap().unwrap();
        if m.text().len() > 10 {
            break m.text();
        }
        assert!(began.elapsed() < Duration::from_secs(15), "nothing was flushed");
        tokio::time::sleep(Duration::from_millis(50)).await;
    };
    let CrashServer { mock, db, dir, config, port, server, conn, cookie, csrf, .. } = started;
    SlowReply { mock, db, dir, config, port, server, conn, session, answer, flushed, cookie, csrf }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_reply_cut_off_by_sigkill_is_interrupted_with_its_text_and_can_be_continued() {
    let SlowReply { mock, db, dir, config, port, mut server, conn, session, answer, flushed, cookie, csrf } =
        slow_reply("").await;
    let http = reqwest::Client::builder().redirect(reqwest::redirect::Policy::none()).build().unwrap();
    let origin = format!("http://127.0.0.1:{port}");
    let post = |path: String, body: &'static str| {
        http.post(format!("{origin}{path}"))
            .header("Origin", &origin)
            .header("Cookie", &cookie)
            .header("X-CSRF-Token", &csrf)
            .header("Content-Type", "application/x-www-form-urlencoded")
            .body(body)
            .send()
    };
    // A write load runs while the server is killed (SECURITY 49): renames of the session,
    // committed one after another as fast as the server takes them.
    let written = std::sync::atomic::AtomicU32::new(0);
    let load = async {
        while post(format!("/s/{session}/rename"), "title=Written+under+load").await.is_ok() {
            written.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        }
    };
    let kill = async {
        let began = Instant::now();
        while written.load(std::sync::atomic::Ordering::Relaxed) < 20
            && began.elapsed() < Duration::from_secs(20)
        {
            tokio::time::sleep(Duration::from_millis(5)).await;
        }
        server.0.kill().unwrap();
        wait_exit(&mut server.0, Duration::from_secs(10)).expect("killed");
    };
    tokio::join!(load, kill);
    assert!(written.into_inner() >= 20, "writes were running when the server died");
    if db.url.starts_with("sqlite") {
        // Reopened after the kill, the file is whole.
        assert_eq!(arbor::storage::snapshot::sqlite_integrity(&conn).await.unwrap(), "ok");
    }
    let full = {
        let raw = mock.fixture_text("openai/many_small_chunks.sse").unwrap();
        let mut parser = arbor::providers::sse::SseParser::new();
        let mut decoder = arbor::providers::openai::StreamDecoder::new();
        let mut text = String::new();
        for ev in parser.push(raw.as_bytes()) {
            for e in decoder.on_event(&ev).unwrap() {
                if let arbor::providers::types::ProviderEvent::TextDelta(t) = e {
                    text.push_str(&t);
                }
            }
        }
        text
    };

    // Restart: the answer is interrupted, its flushed text kept.
    let mut server = serve(dir.path(), &db, &config, port).await;
    let m = messages::find_message(&conn, session, answer).await.unwrap().unwrap();
    let log = std::fs::read_to_string(dir.path().join("server.log")).unwrap_or_default();
    let log = &log[log.len().saturating_sub(3000)..];
    assert_eq!(m.status, MessageStatus::Interrupted, "{:?}\n{log}", m.error);
    let kept = m.text();
    assert!(kept.starts_with(&flushed) && full.starts_with(&kept) && kept.len() < full.len(), "{kept:?}");
    let page = http
        .get(format!("{origin}/s/{session}"))
        .header("Cookie", &cookie)
        .send()
        .await
        .unwrap()
        .text()
        .await
        .unwrap();
    assert!(page.contains("btn-continue") && page.contains("The server stopped"), "{page}");

    // Continue completes it from the partial text.
    mock.enqueue(Provider::OpenAi, Reply::fixture("openai/text.sse"));
    let res = post(format!("/s/{session}/messages/{answer}/continue"), "").await.unwrap();
    assert_eq!(res.status(), 200);
    let began = Instant::now();
    let done = loop {
        let m = messages::find_message(&conn, session, answer).await.unwrap().unwrap();
        if m.status != MessageStatus::Streaming {
            break m;
        }
        assert!(began.elapsed() < Duration::from_secs(15), "continue never finished");
        tokio::time::sleep(Duration::from_millis(50)).await;
    };
    assert_eq!(done.status, MessageStatus::Complete);
    assert_eq!(done.text(), format!("{kept}{}", crate::runs::fixture_text(&mock, "openai/text.sse")));
    server.0.kill().unwrap();
    wait_exit(&mut server.0, Duration::from_secs(10));
    // Closed inside the runtime: a pool left to the runtime's shutdown can spin in sqlx's
    // maintenance task and hang the test process.
    conn.close().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sigterm_with_a_live_reply_leaves_nothing_streaming_and_keeps_its_text() {
    let SlowReply { mock: _upstream_stays_up, db, dir, mut server, conn, session, answer, flushed, .. } =
        slow_reply("[server]\nshutdown_timeout_secs = 1\n").await;
    crate::cli::sigterm(&server.0);
    let status = wait_exit(&mut server.0, Duration::from_secs(15)).expect("exits after SIGTERM");
    assert!(status.success(), "{status:?}");
    // Without a restart: the reply was ended by its own task before the workers stopped, so it
    // reads "interrupted" (Continue picks it up), keeps its text, and no run is left running.
    let m = messages::find_message(&conn, session, answer).await.unwrap().unwrap();
    let log = std::fs::read_to_string(dir.path().join("server.log")).unwrap_or_default();
    let log = &log[log.len().saturating_sub(3000)..];
    assert_eq!(m.status, MessageStatus::Interrupted, "{:?}\n{log}", m.error);
    assert!(m.status.can_continue());
    assert!(m.text().starts_with(&flushed), "{:?}", m.text());
    use sea_orm::{ColumnTrait, EntityTrait, PaginatorTrait, QueryFilter};
    let running = arbor::storage::entities::run::Entity::find()
        .filter(arbor::storage::entities::run::Column::Status.eq("running"))
        .count(&conn)
        .await
        .unwrap();
    assert_eq!(running, 0, "no run is left running");
    let interrupted = arbor::storage::entities::run::Entity::find()
        .filter(arbor::storage::entities::run::Column::Status.eq("interrupted"))
        .count(&conn)
        .await
        .unwrap();
    assert_eq!(interrupted, 1, "the run says how it ended");
    conn.close().await.unwrap();
    drop(db);
}

/// Usage rows of API calls are written in batches a moment after the call (BENCHMARKS step
/// 27): a SIGTERM right after a call still leaves its row.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sigterm_right_after_an_api_call_still_writes_its_usage_row() {
    let mut started = crash_server("[server]\nshutdown_timeout_secs = 1\n").await;
    let token = started.api_token();
    started.mock.enqueue(Provider::OpenAi, Reply::fixture("openai/text.sse"));
    started.streamed_api_call(&token).await;
    crate::cli::sigterm(&started.server.0);
    let status = wait_exit(&mut started.server.0, Duration::from_secs(15)).expect("exits after SIGTERM");
    assert!(status.success(), "{status:?}");
    let rows = started.usage_rows().await;
    assert_eq!(rows.len(), 1, "{rows:?}\nthe server's log:\n{}", started.log());
    assert_eq!(rows[0].via, "api");
    assert!(rows[0].tokens_out > 0, "{:?}", rows[0]);
    let CrashServer { conn, db, .. } = started;
    conn.close().await.unwrap();
    drop(db);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_server_killed_during_a_tool_call_offers_the_call_again_after_the_restart() {
    // A page that never answers, so the call is running when the server dies.
    let (hang, hang_port) = crate::agent::hanging_server().await;
    let mut s = crash_server("[agent]\nfetch_allow = [\"127.0.0.0/8\"]\n").await;
    let actor = Actor::for_tests(&s.user);
    let form = arbor::domain::sessions::SessionForm {
        model: "openai/gpt-4o-mini".into(),
        approval_mode: "full-auto".into(),
        ..Default::default()
    };
    arbor::domain::sessions::Sessions::new(s.conn.clone())
        .update_session(&actor, s.session, &form)
        .await
        .unwrap();
    let url = format!("http://127.0.0.1:{hang_port}/slow");
    s.mock.enqueue(
        Provider::OpenAi,
        crate::agent::calls(&[("f1", "web_fetch", serde_json::json!({ "url": url }))]),
    );
    let body = "message=Fetch+it&client_id=crash-tool&model=openai%2Fgpt-4o-mini".to_string();
    assert_eq!(s.post(&format!("/s/{}/messages", s.session), body).send().await.unwrap().status(), 200);
    let began = Instant::now();
    loop {
        let all = messages::session_messages(&s.conn, s.session).await.unwrap();
        if all.iter().any(|m| {
            m.role == arbor::domain::sessions::tree::Role::Tool && m.status == MessageStatus::Streaming
        }) {
            break;
        }
        assert!(began.elapsed() < Duration::from_secs(15), "the tool never started: {all:?}");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    s.server.0.kill().unwrap();
    wait_exit(&mut s.server.0, Duration::from_secs(10)).expect("killed");

    // After the restart the page says truthfully how far the call got and offers it again.
    s.server = serve(s.dir.path(), &s.db, &s.config, s.port).await;
    let page = s.page(&format!("/s/{}", s.session)).await;
    assert!(page.contains("The server stopped while this call was running"), "{page}");
    assert!(page.contains("may or may not have had its effects") && page.contains("/resume"), "{page}");
    let call = arbor::storage::repos::agent::calls_of_session(&s.conn, s.session).await.unwrap()[0].id;

    // Skip: the model is told, the run goes on and completes.
    s.mock.enqueue(Provider::OpenAi, crate::agent::says("The page did not load; moving on."));
    let res = s
        .post(&format!("/s/{}/tool-calls/{call}/resume", s.session), "decision=no_continue".into())
        .send()
        .await
        .unwrap();
    assert_eq!(res.status(), 200);
    let began = Instant::now();
    let last = loop {
        let all = messages::session_messages(&s.conn, s.session).await.unwrap();
        let session = arbor::storage::repos::workspaces::find_session(&s.conn, s.user.id, s.session)
            .await
            .unwrap()
            .unwrap();
        let path = arbor::domain::sessions::tree::active_path(&all, session.active_root_id);
        let last = path.last().cloned().unwrap();
        if last.status == MessageStatus::Complete && last.text() == "The page did not load; moving on." {
            break path;
        }
        assert!(began.elapsed() < Duration::from_secs(15), "the run never went on: {path:?}");
        tokio::time::sleep(Duration::from_millis(50)).await;
    };
    let sent = s.mock.requests_for(Provider::OpenAi).last().unwrap().json().unwrap();
    assert!(sent["messages"].to_string().contains("The user declined this call"), "{sent}");
    // The interrupted result stays in the tree beside the new one.
    let all = messages::session_messages(&s.conn, s.session).await.unwrap();
    assert!(all.iter().any(|m| m.status == MessageStatus::Interrupted && !last.iter().any(|p| p.id == m.id)));
    let page = s.page(&format!("/s/{}", s.session)).await;
    assert!(!page.contains("/resume\""), "nothing is left to resume");
    s.server.0.kill().unwrap();
    wait_exit(&mut s.server.0, Duration::from_secs(10));
    hang.abort();
    s.conn.close().await.unwrap();
}
