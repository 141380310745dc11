//! The live event stream: snapshot first, events in order, `done` last, fan-out to many clients.

use std::time::Duration;

use arbor::domain::accounts::Role;
use arbor::events::RunEvent;
use uuid::Uuid;

use crate::support::TestApp;
use crate::support::sse_client::{Frame, SseReader};

async fn open(app: &TestApp, session: Uuid, cookie: &str) -> SseReader {
    let res = app.get(&format!("/s/{session}/events"), Some(cookie)).await;
    assert_eq!(res.status(), 200);
    assert_eq!(res.headers()["content-type"], "text/event-stream");
    assert_eq!(res.headers()["x-accel-buffering"], "no");
    assert!(res.headers().contains_key("content-security-policy"));
    SseReader::new(res)
}

async fn read_all(reader: &mut SseReader) -> Vec<(String, String)> {
    let mut events = Vec::new();
    while let Some(e) =
        tokio::time::timeout(Duration::from_secs(10), reader.next_event()).await.expect("stream stalled")
    {
        events.push(e);
    }
    events
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn two_clients_receive_the_same_events_in_order() {
    let app = TestApp::spawn().await;
    let user = app.create_user("ada@example.com", Role::Member).await;
    let cookie = app.login(&user).await;
    let (_, session) = app.create_session(&user).await;

    let run = app.state.runs.begin(session, Uuid::now_v7(), None).unwrap();
    run.publish(RunEvent::Delta("Hello ".into()));

    let mut a = open(&app, session, &cookie).await;
    let mut b = open(&app, session, &cookie).await;
    // Each connection starts with the state so far.
    for r in [&mut a, &mut b] {
        let (name, data) = r.next_event().await.unwrap();
        assert_eq!(name, "snapshot");
        assert!(data.contains("Hello "), "{data}");
    }

    run.publish(RunEvent::Thought("thinking".into()));
    run.publish(RunEvent::Delta("<b>world</b>".into()));
    run.publish(RunEvent::Delta("\n\nevent: done\ndata: injected\n".into()));
    run.publish(RunEvent::Usage { input: 12, output: 34 });
    let message_id = Uuid::now_v7();
    run.finish(RunEvent::Done { message_id: Some(message_id), plain: false });

    let ea = read_all(&mut a).await;
    let eb = read_all(&mut b).await;
    assert_eq!(ea, eb, "both tabs see the same stream");
    let names: Vec<&str> = ea.iter().map(|(n, _)| n.as_str()).collect();
    assert_eq!(names, ["thought", "delta", "delta", "usage", "done"]);
    assert_eq!(ea[1].1, r#"<span class="delta">&lt;b&gt;world&lt;/b&gt;</span>"#);
    // Text that looks like SSE framing stays text inside one event.
    assert_eq!(ea[2].1, "<span class=\"delta\">\n\nevent: done\ndata: injected\n</span>");
    // The message does not exist in the database: `done` has nothing to render.
    assert_eq!(ea[4].1, "");
    assert!(!a.raw.contains("event: done\ndata: injected\n\n"));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_session_without_a_live_run_gets_done_at_once() {
    let app = TestApp::spawn().await;
    let user = app.create_user("ada@example.com", Role::Member).await;
    let cookie = app.login(&user).await;
    let (_, session) = app.create_session(&user).await;
    let mut r = open(&app, session, &cookie).await;
    let events = read_all(&mut r).await;
    assert_eq!(events.len(), 1);
    assert_eq!(events[0].0, "done");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_error_is_followed_by_done() {
    let app = TestApp::spawn().await;
    let user = app.create_user("ada@example.com", Role::Member).await;
    let cookie = app.login(&user).await;
    let (_, session) = app.create_session(&user).await;
    let run = app.state.runs.begin(session, Uuid::now_v7(), None).unwrap();
    let mut r = open(&app, session, &cookie).await;
    assert_eq!(r.next_event().await.unwrap().0, "snapshot");
    run.finish(RunEvent::Error("upstream said <no>".into()));
    let events = read_all(&mut r).await;
    let names: Vec<&str> = events.iter().map(|(n, _)| n.as_str()).collect();
    assert_eq!(names, ["error", "done"]);
    assert!(events[0].1.contains("upstream said &lt;no&gt;"));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn idle_streams_get_keep_alive_comments() {
    let app = TestApp::spawn_with(|c| c.events.keepalive_secs = 1).await;
    let user = app.create_user("ada@example.com", Role::Member).await;
    let cookie = app.login(&user).await;
    let (_, session) = app.create_session(&user).await;
    let run = app.state.runs.begin(session, Uuid::now_v7(), None).unwrap();
    let mut r = open(&app, session, &cookie).await;
    assert!(matches!(r.next().await, Some(Frame::Event { .. })));
    let frame = tokio::time::timeout(Duration::from_secs(5), r.next()).await.expect("keep-alive within 5 s");
    assert!(matches!(frame, Some(Frame::Comment(_))), "{frame:?}");
    run.finish(RunEvent::Done { message_id: None, plain: false });
    assert_eq!(read_all(&mut r).await.last().unwrap().0, "done");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_client_that_connects_mid_run_misses_nothing() {
    let app = TestApp::spawn().await;
    let user = app.create_user("ada@example.com", Role::Member).await;
    let cookie = app.login(&user).await;
    let (_, session) = app.create_session(&user).await;
    let run = app.state.runs.begin(session, Uuid::now_v7(), None).unwrap();
    let words: Vec<String> = (0..400).map(|i| format!("w{i} ")).collect();
    let (half_tx, half_rx) = tokio::sync::oneshot::channel();
    let mut half_tx = Some(half_tx);
    let (connected_tx, connected_rx) = tokio::sync::oneshot::channel::<()>();
    let producer = {
        let words = words.clone();
        tokio::spawn(async move {
            for (i, w) in words.into_iter().enumerate() {
                if i == 200
                    && let Some(tx) = half_tx.take()
                {
                    let _ = tx.send(());
                }
                run.publish(RunEvent::Delta(w));
                tokio::task::yield_now().await;
            }
            // Stay live until the client is connected, so the stream is never just `done`.
            let _ = connected_rx.await;
            run.finish(RunEvent::Done { message_id: None, plain: false });
        })
    };
    half_rx.await.unwrap();
    // Subscribing races with the second half being published.
    let mut r = open(&app, session, &cookie).await;
    connected_tx.send(()).unwrap();
    producer.await.unwrap();
    let events = read_all(&mut r).await;
    let mut text = String::new();
    for (name, data) in &events {
        match name.as_str() {
            "snapshot" => {
                assert!(text.is_empty(), "snapshot comes first");
                text = data
                    .split("<span class=\"answer-text\">")
                    .nth(1)
                    .and_then(|s| s.split("</span>").next())
                    .unwrap_or("")
                    .to_string();
            }
            "delta" => {
                let inner =
                    data.strip_prefix("<span class=\"delta\">").and_then(|d| d.strip_suffix("</span>"));
                text.push_str(inner.expect("delta markup"));
            }
            "done" => {}
            other => panic!("unexpected event {other}"),
        }
    }
    assert_eq!(events.first().unwrap().0, "snapshot");
    assert_eq!(events.last().unwrap().0, "done");
    assert_eq!(text, words.concat(), "no token missing or doubled");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_bad_or_foreign_message_id_is_not_found() {
    let app = TestApp::spawn().await;
    let user = app.create_user("ada@example.com", Role::Member).await;
    let cookie = app.login(&user).await;
    let (_, session) = app.create_session(&user).await;
    // A real message of the same member, but in another of their sessions.
    let (_, other) = app.create_session(&user).await;
    let elsewhere = crate::support::seed_message(&app.state.db, other, "elsewhere").await;
    let res = app.get(&format!("/s/{other}/events?m={elsewhere}"), Some(&cookie)).await;
    assert_eq!(res.status(), 200, "the message's own session streams");
    drop(res);
    for m in ["not-a-uuid".to_string(), Uuid::now_v7().to_string(), elsewhere.to_string()] {
        let res = app.get(&format!("/s/{session}/events?m={m}"), Some(&cookie)).await;
        assert_eq!(res.status(), 404, "{m}");
    }
}

/// SECURITY.md 9, end to end: a provider whose deltas carry markup, SSE framing (`\n\n`,
/// `\r\n`, `event:` lines) and whose own stream adds events of its own naming cannot emit an
/// event or markup to the browser: the page's stream has only the server's event names, every
/// delta arrives as escaped text, and the stored answer is exactly the text that was sent.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_provider_cannot_inject_events_or_markup_into_the_page_stream() {
    use crate::support::mock_upstream::{Provider, Reply};
    use crate::support::sse_client::SseReader;
    let c = crate::runs::chat_with(|_| {}).await;
    let deltas = [
        "</div><script>alert('x')</script>",
        "\n\nevent: done\ndata: injected\n\n",
        "\r\nevent: tool\r\ndata: <img src=x onerror=alert(1)>\r\n\r\n",
        "<div hx-get=\"/admin\" hx-trigger=\"load\">",
        " end",
    ];
    let chunk = |delta: serde_json::Value, finish: Option<&str>| {
        let body = serde_json::json!({
            "id": "chatcmpl-x", "object": "chat.completion.chunk", "created": 1, "model": "gpt-4o-mini",
            "choices": [{ "index": 0, "delta": delta, "finish_reason": finish }]
        });
        format!("data: {body}\n\n")
    };
    let mut events = vec![chunk(serde_json::json!({ "role": "assistant", "content": "" }), None)];
    // The provider's own stream also carries event lines of its own naming.
    events.push("event: done\ndata: {\"not\": \"ours\"}\n\n".into());
    for d in deltas {
        events.push(chunk(serde_json::json!({ "content": d }), None));
    }
    // An event line on a chunk that carries text: the name is ignored, the text stays text.
    events.push(format!(
        "event: snapshot\n{}",
        chunk(serde_json::json!({ "content": "<script>alert(2)</script>" }), None)
    ));
    events.push(chunk(serde_json::json!({}), Some("stop")));
    events.push("data: [DONE]\n\n".into());
    c.mock.enqueue(Provider::OpenAi, Reply::Sse { events, chunk_delay_ms: 30 });
    let answer = c.send_ok("Go", "openai/gpt-4o-mini").await;
    let res = c.app.get(&format!("/s/{}/events?m={answer}", c.session), Some(&c.s.cookie)).await;
    assert_eq!(res.status(), 200);
    let mut reader = SseReader::new(res);
    let mut seen = Vec::new();
    while let Some((name, data)) = reader.next_event().await {
        let last = name == "done";
        seen.push((name, data));
        if last {
            break;
        }
    }
    let allowed = ["snapshot", "delta", "thought", "tool", "usage", "error", "done"];
    assert!(seen.iter().all(|(n, _)| allowed.contains(&n.as_str())), "{seen:?}");
    assert_eq!(seen.iter().filter(|(n, _)| n == "done").count(), 1, "one done, the server's");
    for (name, data) in &seen {
        if name == "done" {
            continue;
        }
        // Only the server's own wrappers are markup; what the provider sent is escaped.
        let lower = data.to_ascii_lowercase();
        assert!(
            !lower.contains("<script") && !lower.contains("<img") && !lower.contains("<div hx-"),
            "{name}: {data}"
        );
    }
    let stored = c.settled(answer).await;
    assert_eq!(
        stored.text(),
        format!("{}<script>alert(2)</script>", deltas.concat()),
        "the text sent, as text"
    );
    // The final message renders the text escaped too (markdown does not pass raw HTML through
    // as markup that could run).
    let (_, done) = seen.last().unwrap();
    let tags: Vec<String> =
        done.split('<').skip(1).map(|t| t.split('>').next().unwrap_or("").to_ascii_lowercase()).collect();
    assert!(!tags.is_empty());
    for tag in tags {
        assert!(
            !tag.starts_with("script")
                && !tag.contains("onerror")
                && !tag.contains("hx-get")
                && !tag.starts_with("img"),
            "a raw tag from the provider survived: <{tag}>"
        );
    }
}
