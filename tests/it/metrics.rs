//! `/metrics` scraped from the real server after some work: with the token on the main address,
//! and without one on a separate address.

use std::time::{Duration, Instant};

use arbor::domain::sessions::tree::MessageStatus;
use arbor::storage::repos::messages;

use crate::crash::{SlowReply, serve, slow_reply};
use crate::support::{TestDb, free_port, init_crypto};

const TOKEN: &str = "scrape-secret-0123456789";

/// The value of the first sample of `name` whose labels include every one of `labels`.
pub(crate) fn sample(text: &str, name: &str, labels: &[&str]) -> Option<f64> {
    text.lines()
        .filter(|l| !l.starts_with('#'))
        .filter(|l| l.starts_with(&format!("{name}{{")) || l.starts_with(&format!("{name} ")))
        .find(|l| labels.iter().all(|want| l.contains(want)))
        .and_then(|l| l.rsplit(' ').next())
        .and_then(|v| v.parse().ok())
}

pub(crate) async fn scrape(http: &reqwest::Client, url: &str, token: Option<&str>) -> (u16, String) {
    let mut req = http.get(url);
    if let Some(t) = token {
        req = req.bearer_auth(t);
    }
    let res = req.send().await.unwrap();
    let status = res.status().as_u16();
    let content_type = res.headers().get("content-type").map(|v| v.to_str().unwrap().to_string());
    let body = res.text().await.unwrap();
    if status == 200 {
        assert!(content_type.unwrap_or_default().starts_with("text/plain; version=0.0.4"));
    }
    (status, body)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn metrics_are_scraped_from_the_real_server_after_some_work() {
    // `mock` stays bound: dropping it would cut the reply's stream.
    let SlowReply { mock, db, port, mut server, conn, session, answer, .. } =
        slow_reply(&format!("[metrics]\nenabled = true\ntoken = \"{TOKEN}\"\n")).await;
    let http = reqwest::Client::new();
    let url = format!("http://127.0.0.1:{port}/metrics");

    // Only a scraper with the token reads them.
    assert_eq!(scrape(&http, &url, None).await.0, 401);
    assert_eq!(scrape(&http, &url, Some("scrape-secret-wrong")).await.0, 401);

    // While the reply is being written.
    let (status, live) = scrape(&http, &url, Some(TOKEN)).await;
    assert_eq!(status, 200, "{live}");
    assert_eq!(sample(&live, "arbor_runs", &["state=\"running\""]), Some(1.0), "{live}");
    assert_eq!(sample(&live, "arbor_runs", &["state=\"awaiting_confirmation\""]), Some(0.0));
    assert_eq!(sample(&live, "arbor_runs_live", &[]), Some(1.0));
    assert!(sample(&live, "arbor_sse_connections", &[]).is_some());
    assert_eq!(
        sample(
            &live,
            "arbor_provider_requests_total",
            &["provider=\"openai\"", "model=\"gpt-4o-mini\"", "outcome=\"ok\""]
        ),
        Some(1.0),
        "{live}"
    );
    assert!(live.contains("arbor_provider_request_duration_seconds_bucket{"));
    // Requests by route pattern, never by raw path (a session id would make a series each).
    assert_eq!(
        sample(
            &live,
            "arbor_http_requests_total",
            &["route=\"/s/{session_id}/messages\"", "method=\"POST\"", "status=\"200\""]
        ),
        Some(1.0),
        "{live}"
    );
    assert!(!live.contains(&session.to_string()), "no raw ids in labels");
    assert!(live.contains("arbor_http_request_duration_seconds_bucket{"));
    assert!(sample(&live, "arbor_db_statements_total", &[]).is_some_and(|n| n > 0.0));
    assert!(sample(&live, "arbor_db_pool_connections", &["state=\"idle\""]).is_some());
    assert!(sample(&live, "arbor_queue_depth", &["queue=\"search_indexer\""]).is_some(), "{live}");
    // The allocator's own figures: live memory within the pages it holds.
    let allocator = |kind: &str| sample(&live, "arbor_allocator_bytes", &[&format!("kind=\"{kind}\"")]);
    let (allocated, active, resident) = (allocator("allocated"), allocator("active"), allocator("resident"));
    assert!(allocated.is_some_and(|n| n > 1e6), "{live}");
    assert!(active >= allocated && resident >= active, "{allocated:?} {active:?} {resident:?}");
    assert!(allocator("retained").is_some() && allocator("metadata").is_some_and(|n| n > 0.0));

    // After it finished: nothing running, and its tokens counted.
    let began = Instant::now();
    while messages::find_message(&conn, session, answer).await.unwrap().unwrap().status
        == MessageStatus::Streaming
    {
        assert!(began.elapsed() < Duration::from_secs(30), "the reply never finished");
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    let began = Instant::now();
    let done = loop {
        let (_, text) = scrape(&http, &url, Some(TOKEN)).await;
        if sample(&text, "arbor_runs_live", &[]) == Some(0.0) {
            break text;
        }
        assert!(began.elapsed() < Duration::from_secs(10), "the run never left the registry: {text}");
        tokio::time::sleep(Duration::from_millis(100)).await;
    };
    assert_eq!(sample(&done, "arbor_runs", &["state=\"running\""]), Some(0.0), "{done}");
    let output = sample(
        &done,
        "arbor_provider_tokens_total",
        &["provider=\"openai\"", "direction=\"output\"", "via=\"ui\""],
    );
    assert!(output.is_some_and(|n| n > 0.0), "{done}");
    assert!(sample(&done, "arbor_http_requests_total", &["route=\"/metrics\"", "status=\"401\""]).is_some());

    crate::cli::sigterm(&server.0);
    crate::cli::wait_exit(&mut server.0, Duration::from_secs(15));
    conn.close().await.unwrap();
    drop((db, mock));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn metrics_on_their_own_address_ask_no_token_and_are_not_on_the_main_one() {
    init_crypto();
    let db = TestDb::fresh().await;
    let dir = tempfile::tempdir().unwrap();
    let metrics_port = free_port();
    let config = dir.path().join("arbor.toml");
    std::fs::write(
        &config,
        format!("[metrics]\nenabled = true\nbind = \"127.0.0.1:{metrics_port}\"\n[llm]\ndetect_local_ollama = false\n"),
    )
    .unwrap();
    let port = free_port();
    let mut server = serve(dir.path(), &db, &config, port).await;
    let http = reqwest::Client::new();
    let (status, _) = scrape(&http, &format!("http://127.0.0.1:{port}/metrics"), Some("anything")).await;
    assert_eq!(status, 404, "not on the main address");
    let (status, text) = scrape(&http, &format!("http://127.0.0.1:{metrics_port}/metrics"), None).await;
    assert_eq!(status, 200, "{text}");
    assert_eq!(sample(&text, "arbor_runs", &["state=\"running\""]), Some(0.0), "{text}");
    // The metrics address serves nothing else.
    let other = http.get(format!("http://127.0.0.1:{metrics_port}/healthz")).send().await.unwrap();
    assert_eq!(other.status(), 404);
    crate::cli::sigterm(&server.0);
    crate::cli::wait_exit(&mut server.0, Duration::from_secs(15));
    drop(db);
}
