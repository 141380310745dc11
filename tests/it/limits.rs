//! SECURITY.md 54: one member's runs, live streams and uploads are capped (429 with a message
//! saying which), storage is reserved before it is spent, and other members are not affected.

use std::time::Duration;

use arbor::domain::accounts::Role;
use uuid::Uuid;

use crate::runs::{Chat, chat_with, form, streaming_id};
use crate::support::mock_upstream::{Provider, Reply};
use crate::support::{TestApp, TestSession};

const MODEL: &str = "openai/gpt-4o-mini";

/// A reply that takes a while to start, so a run stays live during the test.
fn slow_reply() -> Reply {
    Reply::Fixture { path: "openai/text.sse".into(), chunk_delay_ms: 50, first_byte_delay_ms: 3000 }
}

async fn send_in(app: &TestApp, s: &TestSession, session: Uuid, text: &str) -> reqwest::Response {
    let client_id = Uuid::new_v4().simple().to_string();
    app.post_form(&format!("/s/{session}/messages"), &form(text, &client_id, MODEL), Some(s)).await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_member_may_write_only_so_many_answers_at_once() {
    let c: Chat = chat_with(|c| c.limits.runs_per_member = 1).await;
    for _ in 0..3 {
        c.mock.enqueue(Provider::OpenAi, slow_reply());
    }
    let first = send_in(&c.app, &c.s, c.session, "One").await;
    assert_eq!(first.status(), 200);
    let answer = streaming_id(&first.text().await.unwrap());
    // A second session of the same member: refused while the first answer is written.
    let (_, second) = c.app.create_session(&c.user).await;
    let refused = send_in(&c.app, &c.s, second, "Two").await;
    assert_eq!(refused.status(), 429);
    assert!(refused.headers().contains_key("retry-after"));
    assert!(refused.text().await.unwrap().contains("replies being written at once"));
    // Another member is not affected.
    let bob = c.app.create_user("bob@example.com", Role::Member).await;
    let bob_s = c.app.login_full(&bob).await;
    let (_, bobs) = c.app.create_session(&bob).await;
    assert_eq!(send_in(&c.app, &bob_s, bobs, "Mine").await.status(), 200);
    // Once the first answer is done, the member may start another.
    c.settled(answer).await;
    assert_eq!(send_in(&c.app, &c.s, second, "Two again").await.status(), 200);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_member_may_hold_only_so_many_live_streams() {
    let c = chat_with(|c| c.limits.streams_per_member = 2).await;
    c.mock.enqueue(Provider::OpenAi, slow_reply());
    let answer = c.send_ok("Stream", MODEL).await;
    let path = format!("/s/{}/events?m={answer}", c.session);
    let held = [c.app.get(&path, Some(&c.s.cookie)).await, c.app.get(&path, Some(&c.s.cookie)).await];
    assert!(held.iter().all(|r| r.status() == 200));
    let third = c.app.get(&path, Some(&c.s.cookie)).await;
    assert_eq!(third.status(), 429);
    assert!(third.text().await.unwrap().contains("live pages open"));
    assert_eq!(c.app.state.streams.held(c.user.id), 2);
    // Another member's stream of their own session is served meanwhile.
    let bob = c.app.create_user("bob@example.com", Role::Member).await;
    let bob_s = c.app.login_full(&bob).await;
    let (_, bobs) = c.app.create_session(&bob).await;
    let res = c.app.get(&format!("/s/{bobs}/events"), Some(&bob_s.cookie)).await;
    assert_eq!(res.status(), 200);
    drop(held);
    // Closing a page gives its slot back.
    let start = std::time::Instant::now();
    while c.app.state.streams.held(c.user.id) > 0 {
        assert!(start.elapsed() < Duration::from_secs(10), "the slots were not given back");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    assert_eq!(c.app.get(&path, Some(&c.s.cookie)).await.status(), 200);
}

fn upload_request(c: &Chat, body: reqwest::Body) -> reqwest::RequestBuilder {
    c.app
        .client
        .post(c.app.url("/uploads?name=a.bin"))
        .header("Origin", c.app.origin())
        .header("Cookie", &c.s.cookie)
        .header("X-CSRF-Token", &c.s.csrf)
        .body(body)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn uploads_are_capped_per_member_and_checked_before_the_body() {
    let c = chat_with(|c| {
        c.limits.uploads_per_member = 1;
        c.files.user_quota_mb = 1;
    })
    .await;
    // An upload whose body is still on its way holds the member's one slot.
    let (tx, rx) = tokio::sync::mpsc::channel::<Result<Vec<u8>, std::io::Error>>(1);
    tx.send(Ok(vec![b'x'; 1024])).await.unwrap();
    let body = reqwest::Body::wrap_stream(tokio_stream_from(rx));
    let pending = tokio::spawn(upload_request(&c, body).send());
    let start = std::time::Instant::now();
    while c.app.state.uploads.held(c.user.id) == 0 {
        assert!(start.elapsed() < Duration::from_secs(10), "the upload never started");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    let refused = upload_request(&c, reqwest::Body::from(vec![b'y'; 10])).send().await.unwrap();
    assert_eq!(refused.status(), 429);
    assert!(refused.text().await.unwrap().contains("sending 1 files already"));
    drop(tx);
    assert_eq!(pending.await.unwrap().unwrap().status(), 200);

    // A declared length over the quota is refused before the body is read: the server answers
    // while the body is still being held back.
    let (tx, rx) = tokio::sync::mpsc::channel::<Result<Vec<u8>, std::io::Error>>(1);
    let huge = upload_request(&c, reqwest::Body::wrap_stream(tokio_stream_from(rx)))
        .header("Content-Length", (2 * 1024 * 1024).to_string());
    let answer = tokio::time::timeout(Duration::from_secs(10), huge.send()).await.expect("answered at once");
    let answer = answer.unwrap();
    assert_eq!(answer.status(), 413);
    assert!(answer.text().await.unwrap().contains("storage limit"));
    drop(tx);

    // Reservations: while one upload holds 600 KiB of a 1 MiB quota, another cannot take 600 KiB.
    let files = c.app.state.files.settings();
    let db = &c.app.state.db;
    let held = files.reservations.reserve(db, c.user.id, 600 * 1024, files.user_quota_bytes).await.unwrap();
    let refused = files.reservations.reserve(db, c.user.id, 600 * 1024, files.user_quota_bytes).await;
    assert!(refused.unwrap_err().to_string().contains("storage limit"));
    let other = c.app.create_user("bob@example.com", Role::Member).await;
    assert!(files.reservations.reserve(db, other.id, 600 * 1024, files.user_quota_bytes).await.is_ok());
    drop(held);
    assert!(files.reservations.reserve(db, c.user.id, 600 * 1024, files.user_quota_bytes).await.is_ok());
}

/// A stream of the channel's chunks (for a request body sent at the test's pace).
fn tokio_stream_from(
    mut rx: tokio::sync::mpsc::Receiver<Result<Vec<u8>, std::io::Error>>,
) -> impl futures_util::Stream<Item = Result<Vec<u8>, std::io::Error>> {
    futures_util::stream::poll_fn(move |cx| rx.poll_recv(cx))
}

/// Bytes in the blob store's temp files (uploads on their way).
fn temp_bytes(c: &Chat) -> u64 {
    let config = &c.app.state.config;
    let tmp = config.files.blob_dir(&config.data_dir).join("tmp");
    std::fs::read_dir(tmp).unwrap().flatten().filter_map(|e| e.metadata().ok()).map(|m| m.len()).sum()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_upload_without_a_length_goes_to_disk_as_it_comes_and_stops_at_the_quota() {
    let c = chat_with(|c| c.files.user_quota_mb = 2).await;
    let chunk = vec![b'x'; 64 * 1024];
    // A body of unknown length: what has arrived is on disk already, not held in memory.
    let (tx, rx) = tokio::sync::mpsc::channel::<Result<Vec<u8>, std::io::Error>>(1);
    let pending = tokio::spawn(upload_request(&c, reqwest::Body::wrap_stream(tokio_stream_from(rx))).send());
    for _ in 0..16 {
        tx.send(Ok(chunk.clone())).await.unwrap();
    }
    let start = std::time::Instant::now();
    while temp_bytes(&c) < 15 * 64 * 1024 {
        assert!(start.elapsed() < Duration::from_secs(10), "the body was not written as it came");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    drop(tx);
    let stored = pending.await.unwrap().unwrap();
    assert_eq!(stored.status(), 200);
    assert!(stored.text().await.unwrap().contains("upload-chip"));
    assert_eq!(temp_bytes(&c), 0, "the temp file became the blob");
    // The member's file is the bytes sent, under their hash.
    let hash = arbor::blobs::hash_of(&vec![b'x'; 16 * 64 * 1024]);
    let served = c.app.get(&format!("/blobs/{hash}"), Some(&c.s.cookie)).await;
    assert_eq!(served.status(), 200);
    assert_eq!(served.bytes().await.unwrap(), vec![b'x'; 16 * 64 * 1024]);

    // 1 MiB of the 2 MiB is used: a second body of unknown length is refused once its running
    // count passes the quota; the server never writes past it, and nothing of it is kept.
    let (tx, rx) = tokio::sync::mpsc::channel::<Result<Vec<u8>, std::io::Error>>(1);
    let pending = tokio::spawn(upload_request(&c, reqwest::Body::wrap_stream(tokio_stream_from(rx))).send());
    let mut most_on_disk = 0;
    for n in 0..40u8 {
        let mut distinct = chunk.clone();
        distinct[0] = n;
        // The server stops reading once it refuses: a send may then find the channel full.
        let _ = tx.send_timeout(Ok(distinct), Duration::from_millis(100)).await;
        most_on_disk = most_on_disk.max(temp_bytes(&c));
    }
    drop(tx);
    let refused = pending.await.unwrap().unwrap();
    assert_eq!(refused.status(), 413);
    assert!(refused.text().await.unwrap().contains("storage limit"));
    assert!(most_on_disk <= 1024 * 1024, "{most_on_disk} bytes written past a 1 MiB room");
    let start = std::time::Instant::now();
    while temp_bytes(&c) > 0 {
        assert!(start.elapsed() < Duration::from_secs(10), "the refused body's temp file stayed");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    let files = c.app.state.files.settings();
    let db = &c.app.state.db;
    // Nothing of it counts: the other 1 MiB is still free.
    assert!(files.reservations.reserve(db, c.user.id, 1024 * 1024, files.user_quota_bytes).await.is_ok());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn answers_written_at_once_cannot_spend_the_same_quota() {
    let c = chat_with(|_| {}).await;
    let admin = c.app.create_user("root@example.com", Role::Admin).await;
    let admin = c.app.login_full(&admin).await;
    // An answer may write 4,096 tokens unless it says otherwise: while one is being written,
    // it holds more than this whole allowance.
    assert_eq!(c.app.post_form("/admin/quotas", "tokens_day=4000", Some(&admin)).await.status(), 200);
    c.mock.enqueue(Provider::OpenAi, slow_reply());
    let first = send_in(&c.app, &c.s, c.session, "One").await;
    assert_eq!(first.status(), 200);
    let answer = streaming_id(&first.text().await.unwrap());
    let start = std::time::Instant::now();
    while c.mock.requests().is_empty() {
        assert!(start.elapsed() < Duration::from_secs(10), "the first answer never called its model");
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    let (_, second) = c.app.create_session(&c.user).await;
    let refused = send_in(&c.app, &c.s, second, "Two").await;
    assert_eq!(refused.status(), 429);
    assert!(refused.text().await.unwrap().contains("daily allowance of 4000 tokens"));
    assert_eq!(c.mock.requests().len(), 1, "the refused answer reached the provider");
    // Written, the first answer spent a few tokens: the rest of the allowance is free again.
    c.settled(answer).await;
    c.mock.enqueue(Provider::OpenAi, Reply::fixture("openai/text.sse"));
    assert_eq!(send_in(&c.app, &c.s, second, "Two again").await.status(), 200);
}
