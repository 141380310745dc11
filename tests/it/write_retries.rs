//! Writes nobody waits on, refused by the database for a moment, are written once it accepts
//! again: a reply's end (the answer exists nowhere else once its run is over) and an API call's
//! usage row. The real server runs against a database whose `usage` table is renamed away until
//! the server's `/metrics` shows that an attempt failed, then renamed back.

use std::time::{Duration, Instant};

use arbor::domain::sessions::tree::MessageStatus;
use arbor::storage::repos::messages;
use sea_orm::ConnectionTrait;

use crate::crash::{CrashServer, crash_server};
use crate::support::mock_upstream::{Provider, Reply};

const TOKEN: &str = "scrape-secret-0123456789";

async fn started() -> CrashServer {
    crash_server(&format!("[metrics]\nenabled = true\ntoken = \"{TOKEN}\"\n")).await
}

async fn rename(s: &CrashServer, from: &str, to: &str) {
    s.conn.execute_unprepared(&format!("ALTER TABLE {from} RENAME TO {to}")).await.unwrap();
}

/// Waits until the server has counted a failed attempt at `write`.
async fn until_an_attempt_failed(s: &CrashServer, write: &str) {
    let http = reqwest::Client::new();
    let url = format!("http://127.0.0.1:{}/metrics", s.port);
    let label = format!("write=\"{write}\"");
    let began = Instant::now();
    loop {
        let (status, text) = crate::metrics::scrape(&http, &url, Some(TOKEN)).await;
        assert_eq!(status, 200, "{text}");
        if crate::metrics::sample(&text, "arbor_db_write_failures_total", &[&label]).is_some_and(|n| n >= 1.0)
        {
            return;
        }
        assert!(began.elapsed() < Duration::from_secs(30), "no failed {write} write:\n{}", s.log());
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_replys_end_refused_for_a_moment_is_written_when_the_database_accepts_again() {
    let s = started().await;
    // The end of a reply writes its usage row in the same transaction: with no table for it,
    // the whole end is refused.
    rename(&s, "usage", "usage_away").await;
    s.mock.enqueue(Provider::OpenAi, Reply::fixture("openai/text.sse"));
    let answer = s.send_message("Hello", "retry-1").await;
    until_an_attempt_failed(&s, "reply_end").await;
    let m = messages::find_message(&s.conn, s.session, answer).await.unwrap().unwrap();
    assert_eq!(m.status, MessageStatus::Streaming, "nothing of the end was written");
    rename(&s, "usage_away", "usage").await;
    let began = Instant::now();
    let m = loop {
        let m = messages::find_message(&s.conn, s.session, answer).await.unwrap().unwrap();
        if m.status != MessageStatus::Streaming {
            break m;
        }
        assert!(began.elapsed() < Duration::from_secs(30), "the end was never written:\n{}", s.log());
        tokio::time::sleep(Duration::from_millis(20)).await;
    };
    assert_eq!(m.status, MessageStatus::Complete, "{}", s.log());
    assert_eq!(m.text(), "Hello! How can I help you today? 👋");
    let rows = s.usage_rows().await;
    assert_eq!(rows.len(), 1, "{rows:?}");
    assert_eq!((rows[0].via.as_str(), rows[0].message_id), ("ui", Some(answer)));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_api_calls_usage_row_refused_for_a_moment_is_written_when_the_database_accepts_again() {
    let s = started().await;
    let token = s.api_token();
    rename(&s, "usage", "usage_away").await;
    s.mock.enqueue(Provider::OpenAi, Reply::fixture("openai/text.sse"));
    s.streamed_api_call(&token).await;
    until_an_attempt_failed(&s, "usage").await;
    rename(&s, "usage_away", "usage").await;
    let began = Instant::now();
    let rows = loop {
        let rows = s.usage_rows().await;
        if !rows.is_empty() {
            break rows;
        }
        assert!(began.elapsed() < Duration::from_secs(30), "the row was never written:\n{}", s.log());
        tokio::time::sleep(Duration::from_millis(20)).await;
    };
    assert_eq!(rows.len(), 1, "{rows:?}");
    assert_eq!(rows[0].via, "api");
    assert!(rows[0].tokens_out > 0, "{:?}", rows[0]);
}
