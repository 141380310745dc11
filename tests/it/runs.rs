//! Replies end to end over HTTP: submit, stream, store; stop, continue, retry; idempotent
//! submits; reconnects and second tabs; retries before (and never after) the first token.

use std::time::{Duration, Instant};

use arbor::config::{Config, ProviderConfig, ProviderKind};
use arbor::domain::accounts::{Role, User};
use arbor::domain::sessions::tree::{Message, MessageStatus};
use arbor::providers::sse::SseParser;
use arbor::providers::types::ProviderEvent;
use uuid::Uuid;

use crate::support::mock_upstream::{self, MockUpstream, Provider, Reply};
use crate::support::sse_client::SseReader;
use arbor::storage::repos::messages::NewMessage;

use crate::support::{TestApp, TestSession};

/// The three configured providers, pointed at the mock, with fixed model lists (no discovery).
/// Titles are not proposed (that extra call would take a scripted reply); `tree.rs` tests them.
pub fn use_mock(c: &mut Config, mock: &MockUpstream) {
    c.llm.detect_local_ollama = false;
    c.llm.infer_titles = false;
    let mut add = |name: &str, kind, p: Provider, model: &str| {
        c.llm.providers.insert(
            name.into(),
            ProviderConfig {
                kind,
                base_url: mock.url(p),
                api_key: format!("sk-test-{name}-SECRETKEY"),
                models: vec![model.into()],
                label: String::new(),
            },
        );
    };
    add("openai", ProviderKind::OpenAi, Provider::OpenAi, "gpt-4o-mini");
    add("anthropic", ProviderKind::Anthropic, Provider::Anthropic, "claude-sonnet-4-5");
    add("gemini", ProviderKind::Gemini, Provider::Gemini, "gemini-2.5-flash");
}

pub(crate) struct Chat {
    pub(crate) app: TestApp,
    pub(crate) mock: MockUpstream,
    pub(crate) user: User,
    pub(crate) s: TestSession,
    pub(crate) session: Uuid,
}

pub(crate) async fn chat_with(adjust: impl FnOnce(&mut Config)) -> Chat {
    let mock = mock_upstream::start().await.unwrap();
    let app = TestApp::spawn_with(|c| {
        use_mock(c, &mock);
        adjust(c);
    })
    .await;
    let user = app.create_user("ada@example.com", Role::Member).await;
    let s = app.login_full(&user).await;
    let (_, session) = app.create_session(&user).await;
    Chat { app, mock, user, s, session }
}

async fn chat() -> Chat {
    chat_with(|_| {}).await
}

pub(crate) fn form(text: &str, client_id: &str, model: &str) -> String {
    let enc = |v: &str| -> String {
        v.bytes()
            .map(|b| match b {
                b'A'..=b'Z' | b'a'..=b'z' | b'0'..=b'9' | b'-' | b'_' | b'.' => (b as char).to_string(),
                _ => format!("%{b:02X}"),
            })
            .collect()
    };
    format!("message={}&client_id={}&model={}", enc(text), enc(client_id), enc(model))
}

impl Chat {
    async fn send(&self, text: &str, client_id: &str, model: &str) -> reqwest::Response {
        self.app
            .post_form(&format!("/s/{}/messages", self.session), &form(text, client_id, model), Some(&self.s))
            .await
    }

    /// Sends and returns the id of the answer being written.
    pub(crate) async fn send_ok(&self, text: &str, model: &str) -> Uuid {
        let res = self.send(text, &Uuid::new_v4().simple().to_string(), model).await;
        assert_eq!(res.status(), 200);
        streaming_id(&res.text().await.unwrap())
    }

    pub(crate) async fn events(&self, message: Uuid) -> SseReader {
        let res =
            self.app.get(&format!("/s/{}/events?m={message}", self.session), Some(&self.s.cookie)).await;
        assert_eq!(res.status(), 200);
        SseReader::new(res)
    }

    pub(crate) async fn message(&self, id: Uuid) -> Message {
        arbor::storage::repos::messages::find_message(&self.app.state.db, self.session, id)
            .await
            .unwrap()
            .unwrap()
    }

    /// Waits until the message is no longer streaming.
    pub(crate) async fn settled(&self, id: Uuid) -> Message {
        let start = Instant::now();
        loop {
            let m = self.message(id).await;
            if m.status != MessageStatus::Streaming && !self.app.state.runs.is_active(self.session) {
                return m;
            }
            assert!(start.elapsed() < Duration::from_secs(20), "reply never ended: {m:?}");
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    }

    pub(crate) async fn messages(&self) -> Vec<Message> {
        arbor::storage::repos::messages::session_messages(&self.app.state.db, self.session).await.unwrap()
    }

    pub(crate) async fn post(&self, path: &str) -> reqwest::Response {
        self.app.post_form(path, "", Some(&self.s)).await
    }
}

/// The id of the (last) answer in a fragment: the live skeleton, or the final message when the
/// reply already ended before the fragment was rendered.
pub(crate) fn streaming_id(html: &str) -> Uuid {
    let at =
        html.rfind("<article class=\"msg msg-assistant").unwrap_or_else(|| panic!("no answer in {html}"));
    let rest = &html[at..];
    let start = rest.find("id=\"m-").unwrap() + "id=\"m-".len();
    Uuid::parse_str(&rest[start..start + 36]).unwrap()
}

fn unescape(s: &str) -> String {
    s.replace("&lt;", "<")
        .replace("&gt;", ">")
        .replace("&quot;", "\"")
        .replace("&#39;", "'")
        .replace("&amp;", "&")
}

/// The text inside every `<span class="{class}">…</span>` of an event, joined.
fn spans(html: &str, class: &str) -> String {
    let open = format!("<span class=\"{class}\">");
    let mut out = String::new();
    let mut rest = html;
    while let Some(at) = rest.find(&open) {
        let body = &rest[at + open.len()..];
        let end = body.find("</span>").unwrap();
        out.push_str(&unescape(&body[..end]));
        rest = &body[end..];
    }
    out
}

/// What one connection showed: the answer text as a browser would assemble it, event names,
/// and the final message HTML of `done`.
pub(crate) struct Seen {
    pub(crate) text: String,
    pub(crate) names: Vec<String>,
    pub(crate) done: String,
}

pub(crate) async fn follow(reader: &mut SseReader, stop_after: Option<usize>) -> Seen {
    let mut seen = Seen { text: String::new(), names: Vec::new(), done: String::new() };
    loop {
        let next =
            tokio::time::timeout(Duration::from_secs(20), reader.next_event()).await.expect("stream stalled");
        let Some((name, data)) = next else { break };
        match name.as_str() {
            "snapshot" => seen.text = spans(&data, "answer-text"),
            "delta" => seen.text.push_str(&spans(&data, "delta")),
            "done" => seen.done = data.clone(),
            _ => {}
        }
        seen.names.push(name);
        if stop_after.is_some_and(|n| seen.names.len() >= n) {
            break;
        }
    }
    seen
}

/// The answer text a fixture holds, decoded by Arbor's own decoder.
pub(crate) fn fixture_text(mock: &MockUpstream, path: &str) -> String {
    let raw = mock.fixture_text(path).unwrap();
    let mut parser = SseParser::new();
    let mut events = Vec::new();
    let format = path.split('/').next().unwrap();
    let mut openai = arbor::providers::openai::StreamDecoder::new();
    let mut anthropic = arbor::providers::anthropic::StreamDecoder::new();
    let mut gemini = arbor::providers::gemini::StreamDecoder::new();
    for ev in parser.push(raw.as_bytes()).into_iter().chain(parser.finish()) {
        events.extend(match format {
            "openai" => openai.on_event(&ev).unwrap(),
            "anthropic" => anthropic.on_event(&ev).unwrap(),
            _ => gemini.on_event(&ev).unwrap(),
        });
    }
    events
        .into_iter()
        .filter_map(|e| match e {
            ProviderEvent::TextDelta(t) => Some(t),
            _ => None,
        })
        .collect()
}

fn slow(path: &str, chunk_delay_ms: u64) -> Reply {
    Reply::Fixture { path: path.into(), chunk_delay_ms, first_byte_delay_ms: 0 }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn each_provider_streams_a_reply_that_is_stored_with_usage() {
    let c = chat().await;
    for (provider, model, fixture) in [
        (Provider::OpenAi, "openai/gpt-4o-mini", "openai/text.sse"),
        (Provider::Anthropic, "anthropic/claude-sonnet-4-5", "anthropic/text.sse"),
        (Provider::Gemini, "gemini/gemini-2.5-flash", "gemini/text.sse"),
    ] {
        // The first byte waits, so the answer is still live when the fragment is rendered.
        c.mock.enqueue(
            provider,
            Reply::Fixture { path: fixture.into(), chunk_delay_ms: 5, first_byte_delay_ms: 300 },
        );
        let res = c.send(&format!("Hello <{model}>"), &Uuid::new_v4().simple().to_string(), model).await;
        assert_eq!(res.status(), 200);
        let html = res.text().await.unwrap();
        // The user's text is escaped; a fresh composer comes out of band.
        assert!(html.contains(&format!("Hello &lt;{model}&gt;")), "{html}");
        assert!(html.contains("id=\"composer\" hx-swap-oob=\"true\""), "{html}");
        let id = streaming_id(&html);
        assert!(html.contains(&format!("sse-connect=\"/s/{}/events?m={id}\"", c.session)));
        let seen = follow(&mut c.events(id).await, None).await;
        assert_eq!(seen.names.last().map(String::as_str), Some("done"));
        let m = c.settled(id).await;
        let expected = fixture_text(&c.mock, fixture);
        assert!(!expected.is_empty());
        assert_eq!(m.text(), expected, "{model}: stored text");
        assert_eq!(m.status, MessageStatus::Complete);
        assert_eq!(m.model.as_deref(), Some(model));
        let usage = m.usage.expect("usage recorded");
        assert!(usage.input > 0 && usage.output > 0 && !usage.estimated, "{model}: {usage:?}");
        assert!(usage.cost_micros.is_some(), "{model}: the catalog knows its price");
        // The stream showed every token once, and `done` carries the final rendered message.
        if seen.names.iter().any(|n| n == "snapshot" || n == "delta") {
            assert_eq!(seen.text, expected, "{model}: streamed text");
        }
        assert!(
            seen.done.contains(&format!("id=\"m-{id}\"")) && seen.done.contains("data-status=\"complete\"")
        );
        assert!(seen.done.contains("hx-swap-oob"), "session totals are refreshed");
        let used = format!("latest exchange: {} of", usage.input + usage.output);
        assert!(seen.done.contains(&used), "{model}: the context gauge counts this answer: {}", seen.done);
    }
    // The requests carried the conversation so far, keys in headers only.
    let reqs = c.mock.requests();
    let last = reqs.iter().rev().find(|r| r.provider == Some(Provider::Gemini)).unwrap();
    assert_eq!(last.header("x-goog-api-key"), Some("sk-test-gemini-SECRETKEY"));
    assert!(!last.path.contains("SECRETKEY"));
    let body = last.body_text();
    assert!(body.contains("Hello <openai/gpt-4o-mini>") && body.contains("Hello <gemini/gemini-2.5-flash>"));
    // One usage row per provider call.
    use sea_orm::{EntityTrait, PaginatorTrait};
    let rows = arbor::storage::entities::usage::Entity::find().count(&c.app.state.db).await.unwrap();
    assert_eq!(rows, 3);
    // The page shows the path and the session totals.
    let page = c.app.get(&format!("/s/{}", c.session), Some(&c.s.cookie)).await.text().await.unwrap();
    assert!(page.contains("Hello &lt;gemini/gemini-2.5-flash&gt;"));
    assert!(page.contains("id=\"session-stats\"") && page.contains("% of context"), "{page}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn two_tabs_see_the_same_stream_and_a_reconnect_loses_nothing() {
    let c = chat().await;
    let fixture = "openai/many_small_chunks.sse";
    c.mock.enqueue(Provider::OpenAi, slow(fixture, 15));
    let id = c.send_ok("Count for me", "openai/gpt-4o-mini").await;
    let mut tab_a = c.events(id).await;
    let mut tab_b = c.events(id).await;
    // Tab B drops its connection after a few events and comes back, as the browser does.
    let first = follow(&mut tab_b, Some(4)).await;
    assert_eq!(first.names[0], "snapshot");
    drop(tab_b);
    tokio::time::sleep(Duration::from_millis(150)).await;
    let mut tab_b = c.events(id).await;
    let (a, b) = tokio::join!(follow(&mut tab_a, None), follow(&mut tab_b, None));
    let expected = fixture_text(&c.mock, fixture);
    assert_eq!(a.text, expected, "the first tab");
    assert_eq!(b.text, expected, "the reconnected tab: nothing missing or doubled");
    assert!(a.names.iter().filter(|n| *n == "delta").count() >= 2, "{:?}", a.names);
    assert_eq!(c.settled(id).await.text(), expected);
}

/// The page's stream for a live run's own message opens on the run's word that the message is
/// the session's and whose the session is, without a database lookup; someone who cannot see the
/// session, and another session's stream, still get 404 for that message.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_live_runs_message_opens_its_own_sessions_stream_only() {
    let c = chat().await;
    let fixture = "openai/many_small_chunks.sse";
    c.mock.enqueue(Provider::OpenAi, slow(fixture, 15));
    let id = c.send_ok("Count for me", "openai/gpt-4o-mini").await;
    assert!(
        c.app.state.runs.snapshot(c.session).is_some_and(|s| s.message_id == Some(id)),
        "the run is live"
    );
    // Opened while the run is live (the checks below take a while on a busy machine).
    let mut tab = c.events(id).await;
    // The owner's stream reads nothing (the least of a few tries: the search feeder shares the
    // connection).
    let mut least = u64::MAX;
    for _ in 0..5 {
        let before = c.app.state.queries.count();
        drop(c.events(id).await);
        least = least.min(c.app.state.queries.count() - before);
    }
    assert_eq!(least, 0, "opening the live run's stream read something");
    let eve = c.app.create_user("eve@example.com", Role::Member).await;
    let eve_cookie = c.app.login(&eve).await;
    let res = c.app.get(&format!("/s/{}/events?m={id}", c.session), Some(&eve_cookie)).await;
    assert_eq!(res.status(), 404, "a stranger");
    let (_, other) = c.app.create_session(&c.user).await;
    let res = c.app.get(&format!("/s/{other}/events?m={id}"), Some(&c.s.cookie)).await;
    assert_eq!(res.status(), 404, "the member's other session");
    let seen = follow(&mut tab, None).await;
    assert_eq!(seen.text, fixture_text(&c.mock, fixture));
    assert_eq!(seen.names.last().map(String::as_str), Some("done"));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn deltas_are_coalesced() {
    let c = chat().await;
    let fixture = "anthropic/many_small_chunks.sse";
    c.mock.enqueue(Provider::Anthropic, slow(fixture, 2));
    let id = c.send_ok("Go", "anthropic/claude-sonnet-4-5").await;
    let seen = follow(&mut c.events(id).await, None).await;
    let deltas = seen.names.iter().filter(|n| *n == "delta").count();
    let chunks = fixture_text(&c.mock, fixture);
    assert_eq!(seen.text, chunks);
    // ~126 events over ~250 ms, sent at most every 40 ms: far fewer updates than chunks.
    assert!(deltas < 40, "{deltas} deltas for {} events", 126);
}

/// Text held back by the coalescing window is sent when the window ends, not with the next
/// chunk: here the provider pauses for a second after two chunks that came together.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn held_back_text_is_sent_when_the_window_ends_even_if_the_provider_pauses() {
    use crate::agent::chunk;
    use serde_json::json;
    let c = chat().await;
    let piece = |t: &str| chunk(json!({ "content": t }), None);
    let end = format!("{}data: [DONE]\n\n", chunk(json!({}), Some("stop")));
    // At once "one"; a second later "two" and "three" in one read; a second after that the end.
    let events = vec![
        piece("one "),
        format!("{}{}", piece("two "), piece("three ")),
        format!("{}{end}", piece("four")),
    ];
    c.mock.enqueue(Provider::OpenAi, Reply::Sse { events, chunk_delay_ms: 1000 });
    let id = c.send_ok("Go", "openai/gpt-4o-mini").await;
    let mut reader = c.events(id).await;
    let mut text = String::new();
    let (mut three_at, mut four_at) = (None, None);
    loop {
        let next =
            tokio::time::timeout(Duration::from_secs(20), reader.next_event()).await.expect("stream stalled");
        let Some((name, data)) = next else { break };
        match name.as_str() {
            "snapshot" => text = spans(&data, "answer-text"),
            "delta" => text.push_str(&spans(&data, "delta")),
            "done" => break,
            _ => {}
        }
        if three_at.is_none() && text.contains("three") {
            three_at = Some(Instant::now());
        }
        if four_at.is_none() && text.contains("four") {
            four_at = Some(Instant::now());
        }
    }
    assert_eq!(text, "one two three four");
    let (Some(three), Some(four)) = (three_at, four_at) else { panic!("both seen: {text:?}") };
    // "three" is held for the window (tens of milliseconds), then sent: well before "four".
    assert!(four.duration_since(three) > Duration::from_millis(500), "{:?}", four.duration_since(three));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn stop_keeps_the_partial_answer_and_continue_completes_it() {
    let c = chat().await;
    c.mock.enqueue(Provider::OpenAi, slow("openai/many_small_chunks.sse", 50));
    let id = c.send_ok("Write a lot", "openai/gpt-4o-mini").await;
    let mut tab = c.events(id).await;
    let start = follow(&mut tab, Some(3)).await;
    assert_eq!(start.names.len(), 3, "three events seen before Stop");
    assert_eq!(c.post(&format!("/s/{}/stop", c.session)).await.status(), 204);
    let rest = follow(&mut tab, None).await;
    assert_eq!(rest.names.last().map(String::as_str), Some("done"));
    let m = c.settled(id).await;
    assert_eq!(m.status, MessageStatus::Stopped);
    let partial = m.text();
    let full = fixture_text(&c.mock, "openai/many_small_chunks.sse");
    assert!(!partial.is_empty() && full.starts_with(&partial) && partial.len() < full.len(), "{partial:?}");
    assert!(rest.done.contains("btn-continue"), "{}", rest.done);
    // Stopping when nothing runs is harmless.
    assert_eq!(c.post(&format!("/s/{}/stop", c.session)).await.status(), 204);

    c.mock.enqueue(Provider::OpenAi, Reply::fixture("openai/text.sse"));
    let res = c.post(&format!("/s/{}/messages/{id}/continue", c.session)).await;
    assert_eq!(res.status(), 200);
    assert_eq!(streaming_id(&res.text().await.unwrap()), id, "the same message goes on");
    let m = c.settled(id).await;
    assert_eq!(m.status, MessageStatus::Complete);
    assert_eq!(m.text(), format!("{partial}{}", fixture_text(&c.mock, "openai/text.sse")));
    let last = c.mock.requests_for(Provider::OpenAi).pop().unwrap().body_text();
    assert!(
        last.contains(&partial.replace('\n', "\\n")[..partial.len().min(20)]),
        "the partial answer is sent"
    );
    assert!(last.contains("was cut off"), "{last}");
    // Continuing something complete is refused.
    assert_eq!(c.post(&format!("/s/{}/messages/{id}/continue", c.session)).await.status(), 409);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_same_submit_twice_makes_one_message_and_one_run() {
    let c = chat().await;
    c.mock.enqueue(Provider::OpenAi, slow("openai/text.sse", 20));
    let body = form("Only once", "double-click-1", "openai/gpt-4o-mini");
    let path = format!("/s/{}/messages", c.session);
    let (a, b) =
        tokio::join!(c.app.post_form(&path, &body, Some(&c.s)), c.app.post_form(&path, &body, Some(&c.s)));
    assert_eq!((a.status().as_u16(), b.status().as_u16()), (200, 200));
    let (a, b) = (a.text().await.unwrap(), b.text().await.unwrap());
    let id = streaming_id(&a);
    // The repeat renders the same answer (live or finished).
    assert!(b.contains(&format!("id=\"m-{id}\"")), "{b}");
    c.settled(id).await;
    // A retried POST after the answer finished still changes nothing.
    assert_eq!(c.app.post_form(&path, &body, Some(&c.s)).await.status(), 200);
    let all = c.messages().await;
    assert_eq!(all.len(), 2, "{all:?}");
    assert_eq!(c.mock.requests_for(Provider::OpenAi).len(), 1);
    use sea_orm::{EntityTrait, PaginatorTrait};
    assert_eq!(arbor::storage::entities::run::Entity::find().count(&c.app.state.db).await.unwrap(), 1);
    // The same id in another session is another submit.
    let (_, other) = c.app.create_session(&c.user).await;
    c.mock.enqueue(Provider::OpenAi, Reply::fixture("openai/text.sse"));
    let res = c.app.post_form(&format!("/s/{other}/messages"), &body, Some(&c.s)).await;
    assert_eq!(res.status(), 200);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_second_message_while_one_is_written_is_refused() {
    let c = chat().await;
    c.mock.enqueue(Provider::OpenAi, slow("openai/many_small_chunks.sse", 30));
    let id = c.send_ok("First", "openai/gpt-4o-mini").await;
    let res = c.send("Second", "second-1", "openai/gpt-4o-mini").await;
    assert_eq!(res.status(), 409);
    assert_eq!(res.headers()["hx-retarget"], "#composer-error");
    assert!(res.text().await.unwrap().contains("still being written"));
    c.post(&format!("/s/{}/stop", c.session)).await;
    c.settled(id).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn failures_before_the_first_token_are_retried() {
    let c = chat().await;
    c.mock
        .enqueue(Provider::OpenAi, Reply::json(500, r#"{"error":{"message":"boom","type":"server_error"}}"#));
    c.mock.enqueue(
        Provider::OpenAi,
        Reply::Json {
            status: 429,
            headers: vec![("retry-after".into(), "1".into())],
            body: c.mock.fixture_text("openai/error_429.json").unwrap(),
        },
    );
    c.mock.enqueue(Provider::OpenAi, Reply::fixture("openai/text.sse"));
    let started = Instant::now();
    let id = c.send_ok("Hi", "openai/gpt-4o-mini").await;
    let m = c.settled(id).await;
    assert_eq!(m.status, MessageStatus::Complete, "{m:?}");
    assert_eq!(m.text(), fixture_text(&c.mock, "openai/text.sse"));
    assert_eq!(c.mock.requests_for(Provider::OpenAi).len(), 3);
    assert!(started.elapsed() >= Duration::from_secs(1), "retry-after was honoured");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_failure_after_the_first_token_is_shown_with_retry_and_never_retried() {
    let c = chat().await;
    c.mock.enqueue(
        Provider::Anthropic,
        Reply::ResetAfterEvents { path: "anthropic/many_small_chunks.sse".into(), events: 8 },
    );
    let id = c.send_ok("Hi", "anthropic/claude-sonnet-4-5").await;
    let m = c.settled(id).await;
    assert_eq!(m.status, MessageStatus::Error);
    assert!(!m.text().is_empty(), "the partial text is kept");
    assert!(m.error.as_deref().unwrap_or_default().contains("could not be used"), "{m:?}");
    assert_eq!(c.mock.requests_for(Provider::Anthropic).len(), 1, "no retry after the first token");
    let page = c.app.get(&format!("/s/{}", c.session), Some(&c.s.cookie)).await.text().await.unwrap();
    assert!(page.contains("btn-retry"), "{page}");

    // Retry grows a sibling answer; the failed one stays in the tree.
    c.mock.enqueue(Provider::Anthropic, Reply::fixture("anthropic/text.sse"));
    let res = c.post(&format!("/s/{}/messages/{id}/retry", c.session)).await;
    assert_eq!(res.status(), 200);
    let new_id = streaming_id(&res.text().await.unwrap());
    assert_ne!(new_id, id);
    let fresh = c.settled(new_id).await;
    assert_eq!(fresh.status, MessageStatus::Complete);
    assert_eq!(fresh.parent_id, m.parent_id);
    assert_eq!(c.message(id).await.status, MessageStatus::Error);
    let conv = c
        .app
        .state
        .sessions
        .conversation(&arbor::domain::accounts::Actor::for_tests(&c.user), c.session)
        .await
        .unwrap();
    assert_eq!(conv.path.last().map(|m| m.id), Some(new_id), "the new answer is on the active path");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn provider_errors_are_shown_without_secrets() {
    let c = chat().await;
    c.mock.enqueue(
        Provider::OpenAi,
        Reply::json(
            401,
            r#"{"error":{"message":"Incorrect API key provided: sk-test-openai-SECRETKEY.","type":"invalid_request_error","code":"invalid_api_key"}}"#,
        ),
    );
    let id = c.send_ok("Hi", "openai/gpt-4o-mini").await;
    let seen = follow(&mut c.events(id).await, None).await;
    let m = c.settled(id).await;
    assert_eq!(m.status, MessageStatus::Error);
    let error = m.error.unwrap();
    assert!(error.contains("401") && error.contains("Incorrect API key"), "{error}");
    assert!(!error.contains("SECRETKEY"), "{error}");
    assert!(!seen.done.contains("SECRETKEY") && seen.done.contains("btn-retry"), "{}", seen.done);
    assert_eq!(c.mock.requests_for(Provider::OpenAi).len(), 1, "401 is not retried");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn missing_keys_models_and_bad_input_get_clear_answers() {
    let c = chat_with(|c| {
        if let Some(p) = c.llm.providers.get_mut("anthropic") {
            p.api_key = String::new();
        }
    })
    .await;
    let check = |res: reqwest::Response, status: u16, text: &'static str| async move {
        assert_eq!(res.status(), status);
        let body = res.text().await.unwrap();
        assert!(body.contains(text), "{body}");
    };
    check(c.send("Hi", "k1", "anthropic/claude-sonnet-4-5").await, 400, "no API key").await;
    check(c.send("Hi", "k2", "nope/model").await, 400, "no provider").await;
    check(c.send("   ", "k3", "openai/gpt-4o-mini").await, 400, "Write a message").await;
    check(c.send("Hi", "bad id!", "openai/gpt-4o-mini").await, 400, "reload the page").await;
    let long = "x".repeat(arbor::domain::runs::MAX_MESSAGE_CHARS + 1);
    check(c.send(&long, "k4", "openai/gpt-4o-mini").await, 400, "longer than").await;
    assert!(c.messages().await.is_empty(), "nothing half-written");
    assert!(c.mock.requests().is_empty());
    // The picker offers only providers with a key.
    let page = c.app.get(&format!("/s/{}", c.session), Some(&c.s.cookie)).await.text().await.unwrap();
    assert!(page.contains("value=\"openai/gpt-4o-mini\"") && !page.contains("value=\"anthropic/"), "{page}");
    // Another user's session, or a message that is not there, does not exist.
    let other = c.app.create_user("bob@example.com", Role::Member).await;
    let bob = c.app.login_full(&other).await;
    let res = c
        .app
        .post_form(&format!("/s/{}/messages", c.session), &form("Hi", "b1", "openai/gpt-4o-mini"), Some(&bob))
        .await;
    assert_eq!(res.status(), 404);
    let res = c.post(&format!("/s/{}/messages/{}/retry", c.session, Uuid::now_v7())).await;
    assert_eq!(res.status(), 404);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_new_session_starts_with_its_first_message() {
    let c = chat().await;
    c.mock.enqueue(Provider::OpenAi, Reply::fixture("openai/text.sse"));
    let body = form("Plan a trip to Lisbon\nwith details", "new-1", "openai/gpt-4o-mini");
    let res = c
        .app
        .client
        .post(c.app.url("/sessions"))
        .header("Origin", c.app.origin())
        .header("Cookie", &c.s.cookie)
        .header("X-CSRF-Token", &c.s.csrf)
        .header("HX-Request", "true")
        .header("Content-Type", "application/x-www-form-urlencoded")
        .body(body.clone())
        .send()
        .await
        .unwrap();
    assert_eq!(res.status(), 200);
    let to = res.headers()["hx-redirect"].to_str().unwrap().to_string();
    assert!(to.starts_with("/s/"), "{to}");
    let session = Uuid::parse_str(&to[3..]).unwrap();
    let page = c.app.get(&to, Some(&c.s.cookie)).await.text().await.unwrap();
    assert!(page.contains("Plan a trip to Lisbon</h1>"), "the title comes from the first line");
    // The same form again goes to the same session.
    let again = c.app.post_form("/sessions", &body, Some(&c.s)).await;
    assert_eq!(again.status(), 303);
    assert_eq!(again.headers()["location"], to.as_str());
    let sessions = c
        .app
        .state
        .sessions
        .recent_sessions(&arbor::domain::accounts::Actor::for_tests(&c.user), 10)
        .await
        .unwrap();
    assert_eq!(sessions.iter().filter(|s| s.id == session).count(), 1);
    assert_eq!(sessions.len(), 2, "the new one and the fixture's");
}

/// A new submit's fragment is drawn from what the submit wrote, not read back: the session (its
/// version, model and active root), the role and the two messages equal what reading them
/// afterwards gives, for a first turn and a later one, and the page runs no statement for them.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_new_turns_fragment_is_what_the_submit_wrote_and_reads_nothing_back() {
    let c = chat().await;
    let actor = arbor::domain::accounts::Actor::for_tests(&c.user);
    let state = &c.app.state;
    for question in ["The first question", "A second one"] {
        // The answer waits a second: until it ends, nothing but the submit has touched the session.
        let reply =
            Reply::Fixture { path: "openai/text.sse".into(), chunk_delay_ms: 0, first_byte_delay_ms: 1000 };
        c.mock.enqueue(Provider::OpenAi, reply);
        let client_id = Uuid::new_v4().simple().to_string();
        let started = state
            .engine
            .submit(&actor, c.session, question, &client_id, Some("openai/gpt-4o-mini"))
            .await
            .unwrap();
        let drawn = state.pages.turn(&actor, c.session, &started, false).await.unwrap();
        // Read back, as the page of a repeated post is.
        let read_back = arbor::domain::runs::Started { written: None, ..started.clone() };
        let read = state.pages.turn(&actor, c.session, &read_back, false).await.unwrap();
        let row = arbor::storage::repos::workspaces::find_session_by_id(&state.db, c.session)
            .await
            .unwrap()
            .unwrap();
        assert!(state.runs.is_active(c.session), "the answer ended too soon to compare");
        assert_eq!(drawn.session, row, "the session as the submit left it");
        assert_eq!(drawn.session, read.session);
        assert_eq!(drawn.role, read.role);
        assert_eq!(drawn.selected_model.as_deref(), Some("openai/gpt-4o-mini"));
        assert_eq!(drawn.selected_model, read.selected_model);
        assert_eq!(drawn.messages.len(), 2);
        for (d, r) in drawn.messages.iter().zip(&read.messages) {
            assert_eq!((d.id, d.parent_id, d.chosen_child_id), (r.id, r.parent_id, r.chosen_child_id));
            assert_eq!((d.role, d.kind, d.status, &d.model), (r.role, r.kind, r.status, &r.model));
            assert_eq!((&d.parts, &d.client_id, d.author_id), (&r.parts, &r.client_id, r.author_id));
        }
        assert_eq!(drawn.messages[0].text(), question);
        assert_eq!(drawn.messages[1].status, MessageStatus::Streaming);
        assert_eq!(
            row.active_root_id,
            c.messages().await.first().map(|m| m.id),
            "the first turn roots the tree"
        );
        c.settled(started.assistant_message_id).await;
        // No statement of its own (the search feeder shares the connection: the least of a few
        // tries is taken).
        let mut least = u64::MAX;
        for _ in 0..5 {
            let before = state.queries.count();
            state.pages.turn(&actor, c.session, &started, false).await.unwrap();
            least = least.min(state.queries.count() - before);
        }
        assert_eq!(least, 0, "the new turn's page read something back");
    }
}

/// A question by `c`'s member under `parent` and the placeholder of its streaming answer, to
/// write straight to the database.
pub(crate) fn turn_messages<'a>(
    c: &Chat,
    text: &'a [arbor::providers::types::Part],
    question: Uuid,
    answer: Uuid,
    parent: Option<Uuid>,
) -> (NewMessage<'a>, NewMessage<'a>) {
    use arbor::domain::sessions::tree::Role as R;
    let new = |id, parent_id, role, status, model| NewMessage {
        id,
        parent_id,
        role,
        parts: text,
        model,
        status,
        client_id: None,
        author_id: Some(c.user.id),
    };
    let user = new(question, parent, R::User, MessageStatus::Complete, None);
    let reply =
        new(answer, Some(question), R::Assistant, MessageStatus::Streaming, Some("openai/gpt-4o-mini"));
    (user, reply)
}

/// A reply's end and the usage row of its last call are one write: the message carries its cost
/// exactly when the ledger does. When another instance already ended the run as interrupted, what
/// it recorded stands, and the call is still in the ledger (it was made and is paid for); that
/// holds for an end this instance writes as interrupted too (it is going down), whose status
/// alone cannot tell the two apart.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_replys_end_and_its_usage_row_are_one_write_and_an_ended_runs_call_still_counts() {
    use arbor::domain::sessions::tree::MessageUsage;
    use arbor::providers::types::Part;
    use arbor::storage::entities::usage;
    use arbor::storage::repos::messages::{self, NewRun, Outcome, UsageRow};
    use sea_orm::{ColumnTrait, EntityTrait, QueryFilter};
    let c = chat().await;
    let db = &c.app.state.db;
    let text = [Part::Text { text: "the answer".into() }];
    let cost = MessageUsage { input: 12, output: 34, cached: 0, cost_micros: Some(56), estimated: false };
    let mut parent = None;
    let combinations =
        [("completed", false), ("completed", true), ("interrupted", false), ("interrupted", true)];
    for (own_end, interrupted_elsewhere) in combinations {
        let (question, answer, run) = (Uuid::now_v7(), Uuid::now_v7(), Uuid::now_v7());
        let (user, reply) = turn_messages(&c, &text, question, answer, parent);
        let new_run =
            NewRun { id: run, owner_id: c.user.id, leaf_message_id: question, assistant_message_id: answer };
        messages::insert_turn(db, c.session, &user, &reply, &new_run).await.unwrap();
        if interrupted_elsewhere {
            assert_eq!(messages::interrupt_orphans(db).await.unwrap(), 1);
        }
        let own_status =
            if own_end == "completed" { MessageStatus::Complete } else { MessageStatus::Interrupted };
        let outcome =
            Outcome { parts: &text, status: own_status, run_status: own_end, error: None, usage: Some(cost) };
        let row = UsageRow {
            user_id: c.user.id,
            session_id: Some(c.session),
            message_id: Some(answer),
            provider: "openai",
            model: "gpt-4o-mini",
            usage: cost,
            latency_ms: 7,
            via: "ui",
        };
        let version = || async {
            use arbor::storage::entities::chat_session;
            chat_session::Entity::find_by_id(c.session).one(db).await.unwrap().unwrap().updated_at
        };
        let before = version().await;
        tokio::time::sleep(std::time::Duration::from_millis(2)).await;
        messages::finish(db, answer, run, &outcome, Some(&messages::StampedUsage::of(&row))).await.unwrap();
        let stored = c.message(answer).await;
        let run_row = arbor::storage::entities::run::Entity::find_by_id(run).one(db).await.unwrap().unwrap();
        assert_eq!(run_row.status, if interrupted_elsewhere { "interrupted" } else { own_end });
        let rows = usage::Entity::find().filter(usage::Column::MessageId.eq(answer)).all(db).await.unwrap();
        assert_eq!(rows.len(), 1, "one usage row for the call");
        assert_eq!((rows[0].tokens_in, rows[0].tokens_out, rows[0].cost_micros), (12, 34, Some(56)));
        match interrupted_elsewhere {
            false => {
                assert_eq!(stored.status, own_status, "{own_end}");
                assert_eq!(stored.usage, Some(cost), "the message carries the same cost");
                assert!(version().await > before, "{own_end}: the session's version moves");
            }
            true => {
                assert_eq!(stored.status, MessageStatus::Interrupted, "the other instance's end stands");
                assert_eq!(stored.usage, None, "{own_end}");
                assert_eq!(version().await, before, "{own_end}: nothing of the session is written");
            }
        }
        parent = Some(answer);
    }
}
