//! The real binary: configuration errors, `serve` in an empty directory, SIGTERM, `migrate`.

use migration::MigratorTrait;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use crate::support::{TestDb, free_port, init_crypto};

const BIN: &str = env!("CARGO_BIN_EXE_arbor");

/// A command with no inherited Arbor settings, run in `dir`.
pub(crate) fn arbor(dir: &std::path::Path) -> Command {
    let mut cmd = Command::new(BIN);
    cmd.current_dir(dir);
    for (k, _) in std::env::vars() {
        if k.starts_with("ARBOR_") || k == "RUST_LOG" {
            cmd.env_remove(k);
        }
    }
    cmd
}

#[test]
fn help_explains_every_command() {
    let dir = tempfile::tempdir().unwrap();
    let out = arbor(dir.path()).arg("--help").output().unwrap();
    assert!(out.status.success());
    let text = String::from_utf8_lossy(&out.stdout);
    for cmd in ["serve", "migrate", "check-config", "healthcheck", "backup", "restore", "--config"] {
        assert!(text.contains(cmd), "--help lacks {cmd}: {text}");
    }
    let out = arbor(dir.path()).args(["serve", "--help"]).output().unwrap();
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(text.contains("--bind") && text.contains("--data-dir"));
}

#[test]
fn a_bad_value_is_one_line_naming_the_key_and_exit_code_2() {
    let dir = tempfile::tempdir().unwrap();
    let out = arbor(dir.path()).arg("serve").env("ARBOR_SERVER__BIND", "localhost:http").output().unwrap();
    assert_eq!(out.status.code(), Some(2));
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(err.trim_end().lines().count(), 1, "{err}");
    assert!(err.contains("server.bind") && err.contains("ARBOR_SERVER__BIND"), "{err}");
    assert!(!dir.path().join("data").exists(), "nothing is written on a config error");
}

#[test]
fn an_unknown_key_in_the_file_is_exit_code_2() {
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("arbor.toml");
    std::fs::write(&file, "[server]\nbind = \"127.0.0.1:9\"\nworkerz = 3\n").unwrap();
    let out = arbor(dir.path()).arg("--config").arg(&file).arg("check-config").output().unwrap();
    assert_eq!(out.status.code(), Some(2));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("server.workerz") && err.contains("arbor.toml"), "{err}");
}

#[test]
fn check_config_redacts_secrets_and_warns_about_unknown_variables() {
    let dir = tempfile::tempdir().unwrap();
    let out = arbor(dir.path())
        .arg("check-config")
        .env("ARBOR_DATABASE_URL", "postgres://arbor:hunter2@db.internal/arbor")
        .env("ARBOR_SERVER__BINDD", "x")
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let stdout = String::from_utf8_lossy(&out.stdout);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(stdout.contains("db.internal") && !stdout.contains("hunter2"), "{stdout}");
    assert!(stdout.contains("[server]") && stdout.contains("bind = \"127.0.0.1:8080\""));
    assert!(stderr.contains("ARBOR_SERVER__BINDD"), "{stderr}");
    assert!(!stderr.contains("hunter2"));
}

pub(crate) struct Child(pub(crate) std::process::Child);

impl Drop for Child {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

pub(crate) async fn wait_healthy(url: &str, deadline: Duration) -> bool {
    let client = reqwest::Client::new();
    let start = Instant::now();
    while start.elapsed() < deadline {
        if let Ok(r) = client.get(url).send().await
            && r.status().is_success()
        {
            return true;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    false
}

pub(crate) fn sigterm(child: &std::process::Child) {
    let status = Command::new("kill").args(["-TERM", &child.id().to_string()]).status().unwrap();
    assert!(status.success());
}

pub(crate) fn wait_exit(
    child: &mut std::process::Child,
    within: Duration,
) -> Option<std::process::ExitStatus> {
    let start = Instant::now();
    while start.elapsed() < within {
        if let Some(status) = child.try_wait().unwrap() {
            return Some(status);
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    None
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn serve_in_an_empty_directory_creates_sqlite_and_stops_on_sigterm() {
    init_crypto();
    let dir = tempfile::tempdir().unwrap();
    let port = free_port();
    let child = arbor(dir.path())
        .args(["serve", "--bind", &format!("127.0.0.1:{port}")])
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let mut child = Child(child);
    assert!(wait_healthy(&format!("http://127.0.0.1:{port}/healthz"), Duration::from_secs(20)).await);
    assert!(dir.path().join("data/arbor.db").exists(), "SQLite database created in ./data");
    let ready = reqwest::get(format!("http://127.0.0.1:{port}/readyz")).await.unwrap();
    assert_eq!(ready.status(), 200);

    // The healthcheck subcommand agrees.
    let hc = arbor(dir.path())
        .args(["healthcheck", "--url", &format!("http://127.0.0.1:{port}/healthz")])
        .status()
        .unwrap();
    assert!(hc.success());

    sigterm(&child.0);
    let status = wait_exit(&mut child.0, Duration::from_secs(15)).expect("exits after SIGTERM");
    assert!(status.success(), "graceful shutdown exits 0, got {status:?}");
    let hc = arbor(dir.path())
        .args(["healthcheck", "--url", &format!("http://127.0.0.1:{port}/healthz")])
        .status()
        .unwrap();
    assert!(!hc.success(), "healthcheck fails when nothing listens");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn serve_uses_the_database_url_from_the_environment() {
    init_crypto();
    // On the PostgreSQL run this is a fresh PostgreSQL database; on SQLite an explicit file URL.
    let db = TestDb::fresh().await;
    let dir = tempfile::tempdir().unwrap();
    let port = free_port();
    let child = arbor(dir.path())
        .args(["serve", "--bind", &format!("127.0.0.1:{port}"), "--data-dir"])
        .arg(&db.data_dir)
        .env("ARBOR_DATABASE_URL", &db.url)
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let mut child = Child(child);
    assert!(wait_healthy(&format!("http://127.0.0.1:{port}/readyz"), Duration::from_secs(20)).await);
    if TestDb::is_postgres() {
        assert!(!dir.path().join("data").exists(), "no SQLite file when PostgreSQL is configured");
    }
    sigterm(&child.0);
    assert!(wait_exit(&mut child.0, Duration::from_secs(15)).is_some_and(|s| s.success()));
}

#[test]
fn migrate_status_down_and_up() {
    let dir = tempfile::tempdir().unwrap();
    let run = |args: &[&str]| {
        let out = arbor(dir.path()).args(args).output().unwrap();
        assert!(out.status.success(), "{args:?}: {}", String::from_utf8_lossy(&out.stderr));
        String::from_utf8_lossy(&out.stdout).to_string()
    };
    assert!(run(&["migrate", "status"]).contains("pending m20261123_000001_base_tables"));
    run(&["migrate", "up"]);
    let status = run(&["migrate", "status"]);
    assert!(
        status.contains("applied m20261123_000001_base_tables") && !status.contains("pending"),
        "{status}"
    );
    let applied = status.matches("applied ").count();
    assert!(applied >= 2, "{status}");
    run(&["migrate", "down"]);
    let status = run(&["migrate", "status"]);
    assert!(status.contains("applied m20261123_000001_base_tables"), "{status}");
    let newest = migration::Migrator::migrations().last().map(|m| m.name().to_string()).unwrap_or_default();
    assert!(status.contains(&format!("pending {newest}")), "only the newest is rolled back: {status}");
    assert_eq!(status.matches("applied ").count(), applied - 1, "{status}");
    let rest = (applied - 1).to_string();
    run(&["migrate", "down", "--steps", &rest]);
    assert!(!run(&["migrate", "status"]).contains("applied"));
    run(&["migrate", "up"]);
    assert!(!run(&["migrate", "status"]).contains("pending"));
}

/// `arbor serve` in `dir` with stderr (the log) going to `dir/server.log` and stdout to
/// `dir/server.out`, once it answers /healthz.
async fn serve_logging_to_file(
    dir: &std::path::Path,
    env: &[(&str, &str)],
) -> (u16, std::path::PathBuf, Child) {
    init_crypto();
    let port = free_port();
    let log = dir.join("server.log");
    let mut cmd = arbor(dir);
    cmd.args(["serve", "--bind", &format!("127.0.0.1:{port}")])
        .envs(env.iter().copied())
        .stdout(std::fs::File::create(dir.join("server.out")).unwrap())
        .stderr(std::fs::File::create(&log).unwrap());
    let child = Child(cmd.spawn().unwrap());
    assert!(wait_healthy(&format!("http://127.0.0.1:{port}/healthz"), Duration::from_secs(20)).await);
    (port, log, child)
}

/// SECURITY.md 60 (tokens): the first start prints a one-time setup link on standard output;
/// neither it nor an invitation token reaches the log, also when the links are opened.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn first_start_prints_a_one_time_setup_link_and_the_log_never_holds_a_token() {
    let dir = tempfile::tempdir().unwrap();
    let (port, log, mut child) = serve_logging_to_file(dir.path(), &[]).await;
    let out = std::fs::read_to_string(dir.path().join("server.out")).unwrap();
    let marker = format!("http://127.0.0.1:{port}/setup/");
    let at = out.find(&marker).unwrap_or_else(|| panic!("no setup link on standard output: {out}"));
    let token: String = out[at + marker.len()..]
        .chars()
        .take_while(|c| c.is_ascii_alphanumeric() || *c == '-' || *c == '_')
        .collect();
    assert_eq!(token.len(), 43, "{token}");
    // Open the links, as a browser (and an invitee with a made-up token) would.
    let invite = "i".repeat(43);
    let client = reqwest::Client::builder().redirect(reqwest::redirect::Policy::none()).build().unwrap();
    for path in [format!("/setup/{token}"), format!("/invite/{invite}"), format!("/setup/{token}?x=1")] {
        let res = client.get(format!("http://127.0.0.1:{port}{path}")).send().await.unwrap();
        assert!(res.status().as_u16() < 500, "{path}: {}", res.status());
    }
    sigterm(&child.0);
    wait_exit(&mut child.0, Duration::from_secs(15)).expect("stops");
    let text = std::fs::read_to_string(&log).unwrap();
    assert!(text.contains("setup link is printed on standard output"), "{text}");
    assert!(text.contains("/setup/…") && text.contains("/invite/…"), "the requests are logged: {text}");
    assert!(!text.contains(&token), "the setup token is in the log: {text}");
    assert!(!text.contains(&invite), "the invitation token is in the log: {text}");
}

#[test]
fn admin_create_and_promote() {
    let dir = tempfile::tempdir().unwrap();
    let run = |args: &[&str], stdin: &str| {
        use std::io::Write;
        let mut child = arbor(dir.path())
            .args(args)
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap();
        child.stdin.take().unwrap().write_all(stdin.as_bytes()).unwrap();
        child.wait_with_output().unwrap()
    };
    let out =
        run(&["admin", "create", "--email", "Root@Example.com", "--name", "Root"], "correct horse battery\n");
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    assert!(String::from_utf8_lossy(&out.stdout).contains("created administrator root@example.com"));

    let out = run(&["admin", "create", "--email", "short@example.com"], "short\n");
    assert!(!out.status.success());
    assert!(String::from_utf8_lossy(&out.stderr).contains("at least 12 characters"));

    let out = run(&["admin", "promote", "--email", "nobody@example.com"], "");
    assert!(!out.status.success());
    assert!(String::from_utf8_lossy(&out.stderr).contains("no user with the email nobody@example.com"));

    let pw = dir.path().join("pw");
    std::fs::write(&pw, "another long password\n").unwrap();
    let out =
        run(&["admin", "create", "--email", "root@example.com", "--password-file", pw.to_str().unwrap()], "");
    assert!(!out.status.success(), "the email is taken");

    let out = run(&["admin", "promote", "--email", "root@example.com"], "");
    assert!(out.status.success());
    assert!(String::from_utf8_lossy(&out.stdout).contains("root@example.com is now an administrator"));

    // An API token for scripts: printed once, and it authenticates.
    let out = run(&["admin", "token", "--email", "root@example.com", "--name", "ci", "--days", "30"], "");
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let token = String::from_utf8_lossy(&out.stdout).trim().to_string();
    assert!(token.starts_with("arb_"), "{token}");
    for bad in [
        &["admin", "token", "--email", "nobody@example.com"][..],
        &["admin", "token", "--email", "root@example.com", "--scope", "root"],
    ] {
        let out = run(bad, "");
        assert!(!out.status.success(), "{bad:?}");
    }
    let rt = tokio::runtime::Runtime::new().unwrap();
    rt.block_on(async {
        let url = format!("sqlite://{}?mode=rw", dir.path().join("data/arbor.db").display());
        let db = sea_orm::Database::connect(url.as_str()).await.unwrap();
        let caller = arbor::domain::accounts::api_tokens::ApiTokens::new(db.clone())
            .authenticate(&token)
            .await
            .unwrap()
            .expect("valid");
        assert_eq!(caller.user.email, "root@example.com");
        assert_eq!(caller.scope, arbor::domain::accounts::api_tokens::Scope::Api);
        db.close().await.unwrap();
    });
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn json_logs_carry_the_request_id_and_never_the_query_string() {
    let dir = tempfile::tempdir().unwrap();
    let (port, log, mut child) = serve_logging_to_file(dir.path(), &[("ARBOR_LOG__FORMAT", "json")]).await;
    let res = reqwest::get(format!("http://127.0.0.1:{port}/healthz?token=sk-query-secret")).await.unwrap();
    let request_id = res.headers()["x-request-id"].to_str().unwrap().to_string();
    sigterm(&child.0);
    wait_exit(&mut child.0, Duration::from_secs(15)).expect("stops");
    let text = std::fs::read_to_string(&log).unwrap();
    assert!(!text.contains("sk-query-secret"), "query strings are not logged");
    let served: Vec<serde_json::Value> = text
        .lines()
        .map(|l| {
            serde_json::from_str::<serde_json::Value>(l).unwrap_or_else(|e| panic!("not JSON ({e}): {l}"))
        })
        .filter(|v| v["message"] == "served")
        .collect();
    assert!(
        served.iter().any(|v| v["span"]["id"] == request_id.as_str() && v["status"] == 200),
        "a `served` line with the request id {request_id}: {text}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn reindex_rebuilds_the_search_index_and_blobs_gc_collects() {
    use arbor::domain::accounts::{Actor, Role, UserStatus};
    use arbor::domain::sessions::tree::{MessageStatus, Role as R};
    use arbor::providers::types::Part;
    use arbor::storage::repos::messages::{NewMessage, NewRun, insert_turn};
    let dir = tempfile::tempdir().unwrap();
    let run = |args: &[&str]| {
        let out = arbor(dir.path()).args(args).output().unwrap();
        assert!(out.status.success(), "{args:?}: {}", String::from_utf8_lossy(&out.stderr));
        (String::from_utf8_lossy(&out.stdout).to_string(), String::from_utf8_lossy(&out.stderr).to_string())
    };
    run(&["migrate", "up"]);
    // Three messages written straight into the database, as if the index had never seen them.
    let mut config = arbor::config::load(&arbor::config::CliOverrides::default(), &[]).unwrap().config;
    config.data_dir = dir.path().join("data");
    let db = arbor::storage::connect(&config).await.unwrap();
    let user =
        arbor::storage::repos::users::insert(&db, "ada@example.com", "Ada", Role::Member, UserStatus::Active)
            .await
            .unwrap();
    let actor = Actor::for_tests(&user);
    let ws = arbor::domain::sessions::Sessions::new(db.clone()).create_workspace(&actor, "W").await.unwrap();
    let session =
        arbor::domain::sessions::Sessions::new(db.clone()).create_session(&actor, ws.id, "S").await.unwrap();
    let (q, a) = (uuid::Uuid::now_v7(), uuid::Uuid::now_v7());
    let question = [Part::Text { text: "where do otters sleep".into() }];
    let answer = [Part::Text { text: "otters sleep holding hands".into() }];
    let user_msg = NewMessage {
        id: q,
        parent_id: None,
        role: R::User,
        parts: &question,
        model: None,
        status: MessageStatus::Complete,
        client_id: None,
        author_id: None,
    };
    let reply = NewMessage {
        id: a,
        parent_id: Some(q),
        role: R::Assistant,
        parts: &answer,
        model: Some("x/y"),
        status: MessageStatus::Complete,
        client_id: None,
        author_id: None,
    };
    let new_run =
        NewRun { id: uuid::Uuid::now_v7(), owner_id: user.id, leaf_message_id: q, assistant_message_id: a };
    insert_turn(&db, session.id, &user_msg, &reply, &new_run).await.unwrap();
    db.close().await.unwrap();

    let (out, err) = run(&["reindex"]);
    assert!(out.contains("search index rebuilt: 2 messages indexed"), "{out}");
    assert!(err.contains("2/2 messages"), "a progress bar: {err}");
    let (index, _) = arbor::index::SearchIndex::open(&dir.path().join("data/index")).unwrap();
    let query = arbor::index::SearchQuery::parse("otters", None).unwrap();
    assert_eq!(index.search(user.id, &query, 0, 10).unwrap().total, 2);
    // The rebuilt index's watermarks are stored under the directory's own id, as the server
    // reads them (several instances share the database, each with its own index).
    let id = arbor::index::IndexId::of_dir(&dir.path().join("data/index")).unwrap();
    drop(index);
    let db = arbor::storage::connect(&config).await.unwrap();
    let cursors = arbor::domain::search::Cursors::of(id);
    use arbor::storage::repos::search::load_watermark;
    assert!(load_watermark(&db, &cursors.messages).await.unwrap().is_some());
    assert!(load_watermark(&db, &cursors.tombstones).await.unwrap().is_some());
    assert_eq!(load_watermark(&db, "messages").await.unwrap(), None, "no shared watermark");
    db.close().await.unwrap();
    let (out, _) = run(&["blobs", "gc"]);
    assert!(out.contains("removed 0 unreferenced files"), "{out}");
}
