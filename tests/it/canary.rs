//! SECURITY.md test 42: canary keys saved through the settings page and as shared keys in the
//! admin console never appear in any response body or header, SSE event, log line (at trace
//! level), or the database file, even when the provider echoes the key in an error; while the
//! provider does receive them.

use std::time::Duration;

use arbor::domain::accounts::{Role, UserStatus};
use uuid::Uuid;

use crate::admin::enc;
use crate::cli::{Child, arbor, wait_exit, wait_healthy};
use crate::support::mock_upstream::{self, Provider, Reply};
use crate::support::{free_port, init_crypto};

/// Everything a client saw: status line, headers and body of each response.
#[derive(Default)]
struct Seen(Vec<String>);

impl Seen {
    async fn keep(&mut self, what: &str, res: reqwest::Response) -> (u16, String) {
        let status = res.status().as_u16();
        let headers: Vec<String> = res.headers().iter().map(|(k, v)| format!("{k}: {v:?}")).collect();
        let body = res.text().await.unwrap_or_default();
        self.0.push(format!("{what} {status}\n{}\n\n{body}", headers.join("\n")));
        (status, body)
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn canary_keys_never_leave_the_vault_except_to_the_provider() {
    init_crypto();
    let mock = mock_upstream::start().await.unwrap();
    let dir = tempfile::tempdir().unwrap();
    let data = dir.path().join("data");
    let shared_canary = format!("sk-ARBOR-CANARY-{}", Uuid::new_v4().simple());
    let own_canary = format!("sk-ARBOR-CANARY-{}", Uuid::new_v4().simple());
    let config = dir.path().join("arbor.toml");
    std::fs::write(
        &config,
        "[llm]\ndetect_local_ollama = false\ninfer_titles = false\nmember_base_url_allow = [\"127.0.0.0/8\"]\n",
    )
    .unwrap();
    let port = free_port();
    let log = dir.path().join("server.log");
    let mut server = Child(
        arbor(dir.path())
            .args(["--config"])
            .arg(&config)
            .args(["serve", "--bind", &format!("127.0.0.1:{port}"), "--data-dir"])
            .arg(&data)
            .env("RUST_LOG", "trace")
            .stdout(std::fs::File::create(dir.path().join("server.out")).unwrap())
            .stderr(std::fs::File::create(&log).unwrap())
            .spawn()
            .unwrap(),
    );
    assert!(wait_healthy(&format!("http://127.0.0.1:{port}/readyz"), Duration::from_secs(30)).await);

    // An admin and a member with browser sessions, written next to the running server.
    let url = format!("sqlite://{}?mode=rw", data.join("arbor.db").display());
    let conn = sea_orm::Database::connect(url.as_str()).await.unwrap();
    let cfg = arbor::config::load(&arbor::config::CliOverrides::default(), &[]).unwrap().config;
    let mut sessions = Vec::new();
    for (email, role) in [("root@example.com", Role::Admin), ("ada@example.com", Role::Member)] {
        let user = arbor::storage::repos::users::insert(&conn, email, email, role, UserStatus::Active)
            .await
            .unwrap();
        let issued =
            arbor::auth::sessions::issue(&conn, &cfg.auth, user.id, Some("tests"), None).await.unwrap();
        sessions.push((user, format!("arbor_session={}", issued.token), issued.csrf_secret));
    }
    let actor = arbor::domain::accounts::Actor::for_tests(&sessions[1].0);
    let ws =
        arbor::domain::sessions::Sessions::new(conn.clone()).create_workspace(&actor, "Work").await.unwrap();
    let session = arbor::domain::sessions::Sessions::new(conn.clone())
        .create_session(&actor, ws.id, "Canary")
        .await
        .unwrap()
        .id;

    let http = reqwest::Client::builder().redirect(reqwest::redirect::Policy::none()).build().unwrap();
    let origin = format!("http://127.0.0.1:{port}");
    let post = |who: usize, path: String, body: String| {
        http.post(format!("{origin}{path}"))
            .header("Origin", &origin)
            .header("Cookie", &sessions[who].1)
            .header("X-CSRF-Token", &sessions[who].2)
            .header("Content-Type", "application/x-www-form-urlencoded")
            .body(body)
            .send()
    };
    let get = |who: usize, path: String| {
        http.get(format!("{origin}{path}")).header("Cookie", &sessions[who].1).send()
    };
    let mut seen = Seen::default();

    // The admin adds a provider and the shared canary key; the member adds their own.
    let body = format!(
        "name=team&kind=openai&base_url={}&visibility=everyone&models=gpt-4o-mini&enabled=on",
        enc(&mock.url(Provider::OpenAi))
    );
    let res = post(0, "/admin/providers".into(), body).await.unwrap();
    let location = res.headers()["location"].to_str().unwrap().to_string();
    seen.keep("create provider", res).await;
    let res = post(0, format!("{location}/keys"), format!("label=canary&key={}", enc(&shared_canary)))
        .await
        .unwrap();
    assert_eq!(seen.keep("add shared key", res).await.0, 200);
    let body = format!(
        "kind=openai_compatible&name=mine&base_url={}&label=Mine&key={}",
        enc(&mock.url(Provider::OpenAi)),
        enc(&own_canary)
    );
    assert_eq!(seen.keep("add own key", post(1, "/settings/keys".into(), body).await.unwrap()).await.0, 200);

    // The provider refuses the shared key and echoes it in its error; then both keys work.
    let echo = format!(
        "{{\"error\":{{\"message\":\"Incorrect API key provided: {shared_canary}.\",\"type\":\"invalid_request_error\",\"code\":\"invalid_api_key\"}}}}"
    );
    mock.enqueue(Provider::OpenAi, Reply::Json { status: 401, headers: vec![], body: echo });
    mock.enqueue(Provider::OpenAi, Reply::fixture("openai/text.sse"));
    mock.enqueue(Provider::OpenAi, Reply::fixture("openai/text.sse"));
    for (i, model) in ["team/gpt-4o-mini", "team/gpt-4o-mini", "mine/gpt-4o-mini"].iter().enumerate() {
        let body = format!("message=Hello+{i}&client_id=canary-{i}&model={}", enc(model));
        let res = post(1, format!("/s/{session}/messages"), body).await.unwrap();
        let (status, html) = seen.keep("send", res).await;
        assert_eq!(status, 200, "{html}");
        let answer = crate::runs::streaming_id(&html);
        let res = get(1, format!("/s/{session}/events?m={answer}")).await.unwrap();
        // The stream ends with the answer; read it whole.
        let (_, events) = tokio::time::timeout(Duration::from_secs(30), seen.keep("events", res))
            .await
            .expect("the stream ends");
        assert!(events.contains("event:") || events.contains("data:"), "{events}");
    }
    let requests = mock.requests_for(Provider::OpenAi);
    let auth: Vec<&str> = requests.iter().filter_map(|r| r.header("authorization")).collect();
    assert!(auth.contains(&format!("Bearer {shared_canary}").as_str()), "the shared key was sent: {auth:?}");
    assert!(auth.contains(&format!("Bearer {own_canary}").as_str()), "the own key was sent: {auth:?}");

    // Every page that shows keys, errors, usage or the audit log.
    for (who, path) in [
        (1, "/settings".to_string()),
        (1, format!("/s/{session}")),
        (0, location.clone()),
        (0, "/admin/providers".into()),
        (0, "/admin/audit".into()),
        (0, "/admin/usage".into()),
        (0, "/admin/usage.csv".into()),
        (0, "/admin/users".into()),
    ] {
        let res = get(who, path.clone()).await.unwrap();
        assert_eq!(seen.keep(&path, res).await.0, 200, "{path}");
    }
    // The chat exports, unpacked: the member's own and an admin's export of the member's data.
    let own = get(1, "/settings/export".into()).await.unwrap();
    let admins = post(0, format!("/admin/users/{}/export", sessions[1].0.id), String::new()).await.unwrap();
    for (what, res) in [("own export", own), ("admin's export", admins)] {
        assert_eq!(res.status(), 200, "{what}");
        let bytes = res.bytes().await.unwrap();
        let mut archive = tar::Archive::new(flate2::read::GzDecoder::new(bytes.as_ref()));
        let mut unpacked = String::new();
        for entry in archive.entries().unwrap() {
            let mut raw = Vec::new();
            std::io::Read::read_to_end(&mut entry.unwrap(), &mut raw).unwrap();
            unpacked.push_str(&String::from_utf8_lossy(&raw));
        }
        assert!(unpacked.contains("\"title\":\"Canary\""), "{what}: the session is in it");
        seen.0.push(format!("{what}\n{unpacked}"));
    }
    let page = seen.0.iter().find(|p| p.starts_with(&format!("/s/{session}"))).unwrap();
    assert!(page.contains("Incorrect API key provided"), "the refusal is shown, redacted");
    conn.close().await.unwrap();
    crate::cli::sigterm(&server.0);
    wait_exit(&mut server.0, Duration::from_secs(15)).expect("stops");

    for canary in [&shared_canary, &own_canary] {
        for response in &seen.0 {
            assert!(!response.contains(canary.as_str()), "a response carried the key:\n{response}");
        }
        let logged = std::fs::read_to_string(&log).unwrap()
            + &std::fs::read_to_string(dir.path().join("server.out")).unwrap();
        assert!(logged.contains("TRACE") || logged.contains("DEBUG"), "logs were written at trace level");
        assert!(!logged.contains(canary.as_str()), "a log line carried the key");
        for file in ["arbor.db", "arbor.db-wal"] {
            if let Ok(bytes) = std::fs::read(data.join(file)) {
                assert!(
                    !bytes.windows(canary.len()).any(|w| w == canary.as_bytes()),
                    "{file} holds the key in clear"
                );
            }
        }
    }
}
