//! The sessions API: a session driven entirely over `/v1/workspaces` and `/v1/sessions` with a
//! token of scope `sessions` — sending, streaming JSON events, branching, approvals, stopping,
//! resuming a stream with `Last-Event-ID` — and what it refuses.

use std::time::{Duration, Instant};

use arbor::domain::accounts::Role;
use serde_json::{Value, json};
use uuid::Uuid;

use crate::agent::{agent, chunk, says, write_call};
use crate::runs::{Chat, chat_with};
use crate::support::TestSession;
use crate::support::mock_upstream::{Provider, Reply};

const MODEL: &str = "openai/gpt-4o-mini";

/// A token of `scope`, made on the settings page.
pub(crate) async fn token(c: &Chat, s: &TestSession, scope: &str) -> String {
    let res = c
        .app
        .post_form("/settings/tokens", &format!("name=t-{scope}&scope={scope}&expires_days="), Some(s))
        .await;
    assert_eq!(res.status(), 200);
    let html = res.text().await.unwrap();
    let at =
        html.find("class=\"token-value\">").expect("the token is shown") + "class=\"token-value\">".len();
    html[at..].split('<').next().unwrap().to_string()
}

pub(crate) async fn call(
    c: &Chat,
    method: &str,
    path: &str,
    token: &str,
    body: Option<Value>,
) -> (u16, Value) {
    let mut req = c
        .app
        .client
        .request(method.parse().unwrap(), c.app.url(path))
        .header("Authorization", format!("Bearer {token}"));
    if let Some(b) = body {
        req = req.json(&b);
    }
    let res = req.send().await.unwrap();
    let status = res.status().as_u16();
    let text = res.text().await.unwrap();
    (status, serde_json::from_str(&text).unwrap_or(Value::String(text)))
}

/// One SSE event: its name, JSON data and id.
#[derive(Debug, Clone)]
struct Event {
    name: String,
    data: Value,
    id: Option<String>,
}

/// Reads the session's events until `done`, or `stop_after` events when given (then drops the
/// connection).
async fn events(
    c: &Chat,
    token: &str,
    session: Uuid,
    last_id: Option<&str>,
    stop_after: Option<usize>,
) -> Vec<Event> {
    use futures_util::StreamExt;
    let mut req = c
        .app
        .client
        .get(c.app.url(&format!("/v1/sessions/{session}/events")))
        .header("Authorization", format!("Bearer {token}"));
    if let Some(id) = last_id {
        req = req.header("Last-Event-ID", id);
    }
    let res = req.send().await.unwrap();
    assert_eq!(res.status(), 200);
    assert_eq!(res.headers()["content-type"], "text/event-stream");
    let mut body = res.bytes_stream();
    let mut buf = String::new();
    let mut out = Vec::new();
    let deadline = Instant::now() + Duration::from_secs(30);
    while let Some(chunk) =
        tokio::time::timeout_at(deadline.into(), body.next()).await.expect("the stream ends")
    {
        buf.push_str(&String::from_utf8_lossy(&chunk.unwrap()));
        while let Some(end) = buf.find("\n\n") {
            let frame: String = buf.drain(..end + 2).collect();
            let (mut name, mut data, mut id) = (String::new(), String::new(), None);
            for line in frame.lines() {
                if let Some(v) = line.strip_prefix("event: ") {
                    name = v.to_string();
                } else if let Some(v) = line.strip_prefix("data: ") {
                    data.push_str(v);
                } else if let Some(v) = line.strip_prefix("id: ") {
                    id = Some(v.to_string());
                }
            }
            if name.is_empty() {
                continue;
            }
            let done = name == "done";
            out.push(Event { name, data: serde_json::from_str(&data).unwrap_or(Value::Null), id });
            if done || stop_after.is_some_and(|n| out.len() >= n) {
                return out;
            }
        }
    }
    out
}

fn names(events: &[Event]) -> Vec<&str> {
    events.iter().map(|e| e.name.as_str()).collect()
}

fn text_of(events: &[Event]) -> String {
    events
        .iter()
        .map(|e| match e.name.as_str() {
            "snapshot" => e.data["text"].as_str().unwrap_or_default().to_string(),
            "delta" => e.data["text"].as_str().unwrap_or_default().to_string(),
            _ => String::new(),
        })
        .collect()
}

/// A slow answer: `pieces` deltas `delay_ms` apart.
fn slow(pieces: &[&str], delay_ms: u64) -> Reply {
    let mut events = vec![chunk(json!({"role": "assistant", "content": ""}), None)];
    events.extend(pieces.iter().map(|p| chunk(json!({"content": p}), None)));
    events.push(chunk(json!({}), Some("stop")));
    events.push("data: [DONE]\n\n".into());
    Reply::Sse { events, chunk_delay_ms: delay_ms }
}

async fn wait_idle(c: &Chat, session: Uuid) {
    let start = Instant::now();
    while c.app.state.runs.is_active(session) {
        assert!(start.elapsed() < Duration::from_secs(20), "the run never ended");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_session_driven_through_the_api_streams_branches_and_is_managed() {
    let c = chat_with(|_| {}).await;
    let t = token(&c, &c.s, "sessions").await;
    let (status, ws) = call(&c, "POST", "/v1/workspaces", &t, Some(json!({"name": "Bots"}))).await;
    assert_eq!(status, 201, "{ws}");
    let (status, session) = call(
        &c,
        "POST",
        &format!("/v1/workspaces/{}/sessions", ws["id"].as_str().unwrap()),
        &t,
        Some(json!({"title": "Driven"})),
    )
    .await;
    assert_eq!(status, 201, "{session}");
    let sid: Uuid = session["id"].as_str().unwrap().parse().unwrap();

    // Send; the answer streams as JSON and ends with `done` carrying the stored message.
    c.mock.enqueue(Provider::OpenAi, slow(&["Hello", " from", " the", " model."], 30));
    let (status, started) = call(
        &c,
        "POST",
        &format!("/v1/sessions/{sid}/messages"),
        &t,
        Some(json!({"text": "Hi", "model": MODEL, "client_id": "k1"})),
    )
    .await;
    assert_eq!(status, 202, "{started}");
    let got = events(&c, &t, sid, None, None).await;
    assert_eq!(names(&got).last(), Some(&"done"), "{got:?}");
    assert_eq!(text_of(&got), "Hello from the model.", "{got:?}");
    let done = &got.last().unwrap().data["message"];
    assert_eq!(
        (done["text"].as_str(), done["status"].as_str()),
        (Some("Hello from the model."), Some("complete"))
    );
    assert_eq!(done["id"], started["assistant_message_id"]);
    // The same client id again sends nothing new.
    let (status, again) = call(
        &c,
        "POST",
        &format!("/v1/sessions/{sid}/messages"),
        &t,
        Some(json!({"text": "Hi", "model": MODEL, "client_id": "k1"})),
    )
    .await;
    assert_eq!((status, again["created"].as_bool()), (202, Some(false)));

    // Regenerate and edit grow branches; children and select walk them.
    c.mock.enqueue(Provider::OpenAi, says("Second take."));
    let answer = started["assistant_message_id"].as_str().unwrap();
    let (status, _) =
        call(&c, "POST", &format!("/v1/sessions/{sid}/messages/{answer}/regenerate"), &t, None).await;
    assert_eq!(status, 202);
    wait_idle(&c, sid).await;
    let question = started["user_message_id"].as_str().unwrap();
    let (status, kids) =
        call(&c, "GET", &format!("/v1/sessions/{sid}/messages/{question}/children"), &t, None).await;
    assert_eq!(status, 200);
    let texts: Vec<&str> =
        kids["data"].as_array().unwrap().iter().map(|m| m["text"].as_str().unwrap()).collect();
    assert_eq!(texts, ["Hello from the model.", "Second take."]);
    c.mock.enqueue(Provider::OpenAi, says("Edited answer."));
    let (status, edited) = call(
        &c,
        "POST",
        &format!("/v1/sessions/{sid}/messages/{question}/edit"),
        &t,
        Some(json!({"text": "Hi again"})),
    )
    .await;
    assert_eq!(status, 202, "{edited}");
    wait_idle(&c, sid).await;
    let (_, view) = call(&c, "GET", &format!("/v1/sessions/{sid}"), &t, None).await;
    let path: Vec<&str> =
        view["path"].as_array().unwrap().iter().map(|m| m["text"].as_str().unwrap()).collect();
    assert_eq!(path, ["Hi again", "Edited answer."]);
    assert_eq!(view["path"][0]["siblings"]["count"], 2);
    assert_eq!(view["message_count"], 5);
    let (status, _) =
        call(&c, "POST", &format!("/v1/sessions/{sid}/messages/{answer}/select"), &t, None).await;
    assert_eq!(status, 200);
    let (_, view) = call(&c, "GET", &format!("/v1/sessions/{sid}"), &t, None).await;
    assert_eq!(view["path"][1]["text"], "Hello from the model.");

    // The browser sees the same session.
    let page = c.app.get(&format!("/s/{sid}"), Some(&c.s.cookie)).await.text().await.unwrap();
    assert!(page.contains("Hello from the model.") && page.contains("Driven"), "{page}");

    // Stop keeps what was written; continue picks it up.
    c.mock.enqueue(Provider::OpenAi, slow(&["One", " two", " three", " four", " five", " six"], 200));
    let (_, started) = call(
        &c,
        "POST",
        &format!("/v1/sessions/{sid}/messages"),
        &t,
        Some(json!({"text": "Count", "model": MODEL})),
    )
    .await;
    let first = events(&c, &t, sid, None, Some(2)).await;
    assert!(names(&first).contains(&"snapshot"), "{first:?}");
    let (status, stopped) = call(&c, "POST", &format!("/v1/sessions/{sid}/stop"), &t, None).await;
    assert_eq!((status, stopped["stopped"].as_bool()), (200, Some(true)));
    wait_idle(&c, sid).await;
    let id = started["assistant_message_id"].as_str().unwrap();
    let (_, view) = call(&c, "GET", &format!("/v1/sessions/{sid}"), &t, None).await;
    assert_eq!(view["path"].as_array().unwrap().last().unwrap()["status"], "stopped");
    c.mock.enqueue(Provider::OpenAi, says(" and the rest."));
    let (status, _) = call(&c, "POST", &format!("/v1/sessions/{sid}/messages/{id}/continue"), &t, None).await;
    assert_eq!(status, 202);
    let rest = events(&c, &t, sid, None, None).await;
    assert!(
        rest.last().unwrap().data["message"]["text"].as_str().unwrap().ends_with(" and the rest."),
        "{rest:?}"
    );

    // Rename, archive, list, delete.
    let (status, renamed) = call(
        &c,
        "PATCH",
        &format!("/v1/sessions/{sid}"),
        &t,
        Some(json!({"title": "Renamed", "archived": true})),
    )
    .await;
    assert_eq!(
        (status, renamed["title"].as_str(), renamed["archived"].as_bool()),
        (200, Some("Renamed"), Some(true))
    );
    let ws_id = ws["id"].as_str().unwrap();
    let (_, listed) =
        call(&c, "GET", &format!("/v1/workspaces/{ws_id}/sessions?archived=true"), &t, None).await;
    assert_eq!(listed["data"][0]["id"], sid.to_string());
    let (_, all) = call(&c, "GET", "/v1/workspaces", &t, None).await;
    assert!(all["data"].as_array().unwrap().iter().any(|w| w["name"] == "Bots"));
    let (status, _) = call(&c, "DELETE", &format!("/v1/sessions/{sid}"), &t, None).await;
    assert_eq!(status, 200);
    assert_eq!(call(&c, "GET", &format!("/v1/sessions/{sid}"), &t, None).await.0, 404);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_stream_resumed_with_last_event_id_misses_nothing_and_repeats_nothing() {
    let c = chat_with(|_| {}).await;
    let t = token(&c, &c.s, "sessions").await;
    let pieces = ["alpha ", "beta ", "gamma ", "delta ", "epsilon ", "zeta ", "eta ", "theta"];
    c.mock.enqueue(Provider::OpenAi, slow(&pieces, 120));
    let (status, _) = call(
        &c,
        "POST",
        &format!("/v1/sessions/{}/messages", c.session),
        &t,
        Some(json!({"text": "Go", "model": MODEL})),
    )
    .await;
    assert_eq!(status, 202);
    // Read a little, go away, come back with the last id seen.
    let first = events(&c, &t, c.session, None, Some(3)).await;
    let last = first.iter().rev().find_map(|e| e.id.clone()).expect("events carry ids");
    tokio::time::sleep(Duration::from_millis(300)).await;
    let rest = events(&c, &t, c.session, Some(&last), None).await;
    assert_ne!(
        rest.first().map(|e| e.name.as_str()),
        Some("snapshot"),
        "a resumed stream sends only what was missed: {rest:?}"
    );
    let joined = text_of(&first) + &text_of(&rest);
    assert_eq!(joined, pieces.concat(), "first: {first:?}\nrest: {rest:?}");
    // Away until the run ended: the stream gives the finished message, never a fragment.
    c.mock.enqueue(Provider::OpenAi, slow(&["one ", "two ", "three ", "four"], 80));
    call(
        &c,
        "POST",
        &format!("/v1/sessions/{}/messages", c.session),
        &t,
        Some(json!({"text": "Once more", "model": MODEL})),
    )
    .await;
    let first = events(&c, &t, c.session, None, Some(2)).await;
    let last = first.iter().rev().find_map(|e| e.id.clone()).expect("events carry ids");
    wait_idle(&c, c.session).await;
    let rest = events(&c, &t, c.session, Some(&last), None).await;
    assert_eq!(names(&rest), ["done"], "{rest:?}");
    assert_eq!(rest[0].data["message"]["text"], "one two three four");
    // A stale or malformed id gets the whole state again, never an error.
    c.mock.enqueue(Provider::OpenAi, slow(&["x", "y", "z"], 100));
    call(
        &c,
        "POST",
        &format!("/v1/sessions/{}/messages", c.session),
        &t,
        Some(json!({"text": "Again", "model": MODEL})),
    )
    .await;
    let fresh = events(&c, &t, c.session, Some("not-an-id"), None).await;
    assert_eq!(text_of(&fresh), "xyz", "{fresh:?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn approvals_are_asked_and_answered_through_the_api() {
    let a = agent("suggest", |_| {}).await;
    let c = &a.c;
    let t = token(c, &c.s, "sessions").await;
    c.mock.enqueue(Provider::OpenAi, write_call("notes/api.txt", "from the api\n"));
    c.mock.enqueue(Provider::OpenAi, says("Written."));
    let (status, _) = call(
        c,
        "POST",
        &format!("/v1/sessions/{}/messages", c.session),
        &t,
        Some(json!({"text": "Write it", "model": MODEL})),
    )
    .await;
    assert_eq!(status, 202);
    let call_id = a.paused().await;
    let got = events(c, &t, c.session, None, None).await;
    let asked = got.iter().find(|e| e.name == "approval_request").unwrap_or_else(|| panic!("{got:?}"));
    assert_eq!(asked.data["call"]["id"], call_id.to_string());
    assert_eq!(asked.data["call"]["tool"], "write_file");
    let (_, view) = call(c, "GET", &format!("/v1/sessions/{}", c.session), &t, None).await;
    assert_eq!(view["pending_approval"]["id"], call_id.to_string());
    // A decision the dialog does not offer is refused and changes nothing.
    let path = format!("/v1/sessions/{}/tool-calls/{call_id}/decision", c.session);
    let (status, err) = call(c, "POST", &path, &t, Some(json!({"decision": "maybe"}))).await;
    assert_eq!((status, err["error"]["param"].as_str()), (400, Some("decision")));
    let (status, decided) = call(c, "POST", &path, &t, Some(json!({"decision": "yes"}))).await;
    assert_eq!((status, decided["outcome"].as_str()), (200, Some("resumed")), "{decided}");
    let after = events(c, &t, c.session, None, None).await;
    assert_eq!(after.last().unwrap().data["message"]["text"], "Written.", "{after:?}");
    assert_eq!(a.ended().await, "completed");
    assert_eq!(std::fs::read_to_string(a.folder.join("api.txt")).unwrap(), "from the api\n");
    let calls = a.calls().await;
    assert_eq!((calls[0].decision.as_deref(), calls[0].decided_by), (Some("yes"), Some(c.user.id)));
    // Deciding again is harmless.
    let (_, again) = call(c, "POST", &path, &t, Some(json!({"decision": "no"}))).await;
    assert_eq!(again["outcome"], "already_decided");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn scopes_other_members_and_bad_input_are_refused_in_json() {
    let c = chat_with(|_| {}).await;
    let sessions_token = token(&c, &c.s, "sessions").await;
    let api_token = token(&c, &c.s, "api").await;
    let full_token = token(&c, &c.s, "full").await;
    let own = format!("/v1/sessions/{}", c.session);
    // Each scope reaches its part of /v1; `full` both.
    assert_eq!(call(&c, "GET", &own, &sessions_token, None).await.0, 200);
    assert_eq!(call(&c, "GET", &own, &full_token, None).await.0, 200);
    let (status, err) = call(&c, "GET", &own, &api_token, None).await;
    assert_eq!(status, 403);
    assert!(err["error"]["message"].as_str().unwrap().contains("sessions scope"), "{err}");
    let (status, err) = call(&c, "GET", "/v1/models", &sessions_token, None).await;
    assert_eq!(status, 403);
    assert!(err["error"]["message"].as_str().unwrap().contains("sessions API"), "{err}");
    assert_eq!(call(&c, "GET", &own, "arb_not_a_token", None).await.0, 401);
    assert_eq!(c.app.get(&own, None).await.status(), 401, "no token, no entry");

    // SECURITY.md 26: every way a token may come hits the same scope check.
    let presented = |path: &str, how: &str, t: &str| {
        let url = if how == "query" { c.app.url(&format!("{path}?key={t}")) } else { c.app.url(path) };
        let req = c.app.client.get(url);
        match how {
            "x-api-key" | "x-goog-api-key" => req.header(how, t),
            _ => req,
        }
    };
    for how in ["x-api-key", "x-goog-api-key", "query"] {
        let status = |r: reqwest::Response| r.status().as_u16();
        assert_eq!(status(presented(&own, how, &sessions_token).send().await.unwrap()), 200, "{how}");
        assert_eq!(status(presented(&own, how, &api_token).send().await.unwrap()), 403, "{how}: api scope");
        assert_eq!(status(presented("/v1/models", how, &sessions_token).send().await.unwrap()), 403, "{how}");
        assert_eq!(status(presented(&own, how, "arb_not_a_token").send().await.unwrap()), 401, "{how}");
    }
    // Headers a proxy would set establish no identity, alone or beside a token.
    let forged = [
        ("X-Forwarded-User", "stranger@example.com"),
        ("X-Remote-User", "stranger@example.com"),
        ("Remote-User", "stranger@example.com"),
        ("X-Auth-Request-Email", "stranger@example.com"),
        ("X-Forwarded-Email", "stranger@example.com"),
    ];
    let mut alone = c.app.client.get(c.app.url(&own));
    for (name, value) in forged {
        alone = alone.header(name, value);
    }
    assert_eq!(alone.send().await.unwrap().status(), 401, "forged headers alone");
    // Beside Ada's token they change nothing: the session is still hers (a stranger gets 404).
    let mut beside = presented(&own, "x-api-key", &sessions_token);
    for (name, value) in forged {
        beside = beside.header(name, value);
    }
    assert_eq!(beside.send().await.unwrap().status(), 200, "forged headers beside a token");
    // A member cannot mint a token of a scope members do not have (directory provisioning).
    let before =
        arbor::storage::repos::api_tokens::list_for_user(&c.app.state.db, c.user.id).await.unwrap().len();
    let res = c.app.post_form("/settings/tokens", "name=t-scim&scope=scim&expires_days=", Some(&c.s)).await;
    assert!(!res.text().await.unwrap().contains("class=\"token-value\""), "a SCIM token was shown");
    let after =
        arbor::storage::repos::api_tokens::list_for_user(&c.app.state.db, c.user.id).await.unwrap().len();
    assert_eq!(before, after, "a SCIM token was stored");

    // Another member's session is not there, whatever the route.
    let stranger = c.app.create_user("stranger@example.com", Role::Member).await;
    let ss = c.app.login_full(&stranger).await;
    let theirs = token(&c, &ss, "sessions").await;
    let m = Uuid::now_v7();
    let s = c.session;
    for (method, path, body) in [
        ("GET", format!("/v1/sessions/{s}"), None),
        ("PATCH", format!("/v1/sessions/{s}"), Some(json!({"title": "x"}))),
        ("DELETE", format!("/v1/sessions/{s}"), None),
        ("GET", format!("/v1/sessions/{s}/events"), None),
        ("POST", format!("/v1/sessions/{s}/messages"), Some(json!({"text": "hi"}))),
        ("GET", format!("/v1/sessions/{s}/messages/{m}/children"), None),
        ("POST", format!("/v1/sessions/{s}/messages/{m}/select"), None),
        ("POST", format!("/v1/sessions/{s}/messages/{m}/edit"), Some(json!({"text": "hi"}))),
        ("POST", format!("/v1/sessions/{s}/messages/{m}/regenerate"), None),
        ("POST", format!("/v1/sessions/{s}/messages/{m}/continue"), None),
        ("POST", format!("/v1/sessions/{s}/stop"), None),
        ("POST", format!("/v1/sessions/{s}/tool-calls/{m}/decision"), Some(json!({"decision": "yes"}))),
        ("GET", format!("/v1/workspaces/{}/sessions", Uuid::now_v7()), None),
        ("POST", format!("/v1/workspaces/{}/sessions", Uuid::now_v7()), Some(json!({}))),
    ] {
        let (status, err) = call(&c, method, &path, &theirs, body).await;
        assert_eq!(status, 404, "{method} {path}: {err}");
        assert!(err["error"]["message"].is_string(), "{method} {path}: {err}");
    }
    // Bad input: a clear JSON error, nothing made.
    for (method, path, body) in [
        ("POST", "/v1/workspaces".to_string(), json!({})),
        ("POST", "/v1/workspaces".to_string(), json!({"name": ""})),
        ("POST", "/v1/workspaces".to_string(), json!({"name": "x".repeat(201)})),
        ("POST", format!("/v1/sessions/{s}/messages"), json!({"text": 5})),
        ("POST", format!("/v1/sessions/{s}/messages"), json!({"text": "hi", "model": "nobody/nothing"})),
        ("PATCH", format!("/v1/sessions/{s}"), json!({"title": "\u{0007}"})),
    ] {
        let (status, err) = call(&c, method, &path, &sessions_token, Some(body.clone())).await;
        assert!(matches!(status, 400 | 404), "{method} {path} {body}: {status} {err}");
        assert!(err["error"]["message"].is_string(), "{err}");
    }
    let res = c
        .app
        .client
        .post(c.app.url("/v1/workspaces"))
        .header("Authorization", format!("Bearer {sessions_token}"))
        .body("{not json")
        .send()
        .await
        .unwrap();
    assert_eq!(res.status(), 400);
    assert_eq!(call(&c, "GET", "/v1/sessions/not-a-uuid", &sessions_token, None).await.0, 404);
    let (_, all) = call(&c, "GET", "/v1/workspaces", &sessions_token, None).await;
    assert_eq!(all["data"].as_array().unwrap().len(), 1, "nothing was made: {all}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_browser_follows_a_run_the_api_started_and_the_api_follows_one_the_browser_started() {
    use crate::support::browser::Browser;
    let c = chat_with(|_| {}).await;
    let t = token(&c, &c.s, "sessions").await;
    let browser = Browser::start().await.expect("headless Chromium (scripts/test installs it)");
    browser.sign_in(&c.app.origin(), &c.s.cookie, &c.app.url(&format!("/s/{}", c.session))).await.unwrap();
    browser.wait_for("#composer-message", Duration::from_secs(15)).await.unwrap();

    // Started over the API: the open page picks the run up and shows it to the end.
    c.mock.enqueue(Provider::OpenAi, slow(&["Written ", "by ", "a ", "program ", "and ", "watched."], 150));
    let (status, _) = call(
        &c,
        "POST",
        &format!("/v1/sessions/{}/messages", c.session),
        &t,
        Some(json!({"text": "From a script", "model": MODEL})),
    )
    .await;
    assert_eq!(status, 202);
    browser
        .wait_for_text(
            ".msg-assistant[data-status=complete] .markdown",
            "Written by a program and watched.",
            Duration::from_secs(30),
        )
        .await
        .unwrap();
    assert!(browser.page_source().await.unwrap().contains("From a script"));

    // Started in the browser: the API's stream follows it to `done`.
    c.mock.enqueue(Provider::OpenAi, slow(&["Typed ", "by ", "a ", "person."], 150));
    browser
        .execute("document.getElementById('composer-model').value = 'openai/gpt-4o-mini'; return true;", &[])
        .await
        .unwrap();
    browser.type_into("#composer-message", "From a person").await.unwrap();
    browser.click("#composer button[type=submit]").await.unwrap();
    let start = Instant::now();
    while !c.app.state.runs.is_active(c.session) {
        assert!(start.elapsed() < Duration::from_secs(15), "the browser's run never started");
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    let got = events(&c, &t, c.session, None, None).await;
    assert_eq!(got.last().unwrap().data["message"]["text"], "Typed by a person.", "{got:?}");
    assert_eq!(text_of(&got), "Typed by a person.");

    // Through the WebSocket protocol, both ways: a socket's run shows in the page...
    c.mock.enqueue(Provider::OpenAi, slow(&["Sent ", "over ", "a ", "socket."], 150));
    let got = ws_client(&c, &t, "From a socket", "YES").await;
    assert_eq!(got.last().unwrap()["type"], "agent_finished");
    browser.wait_for_text("#thread", "Sent over a socket.", Duration::from_secs(30)).await.unwrap();
    // ...and a socket that connects while the browser's run is live follows it to its end.
    c.mock.enqueue(Provider::OpenAi, slow(&["Watched ", "from ", "a ", "socket ", "too."], 300));
    browser.type_into("#composer-message", "Another from a person").await.unwrap();
    browser.click("#composer button[type=submit]").await.unwrap();
    let start = Instant::now();
    while !c.app.state.runs.is_active(c.session) {
        assert!(start.elapsed() < Duration::from_secs(15), "the browser's run never started");
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    let got = ws_client(&c, &t, "", "YES").await;
    let item = got.iter().find(|m| m["type"] == "response_item").unwrap_or_else(|| panic!("{got:#?}"));
    assert_eq!(item["payload"]["content"][0]["text"], "Watched from a socket too.");
    assert_eq!(got.last().unwrap()["type"], "agent_finished");
    let errors = browser.console_errors().await.unwrap();
    assert!(errors.is_empty(), "console errors: {errors:#?}");
    browser.close().await.unwrap();
}

/// Runs the protocol's client (Python `websockets`) against the session; returns what it got.
async fn ws_client(c: &Chat, token: &str, text: &str, review: &str) -> Vec<Value> {
    let python = crate::gateway::sdk_python();
    assert!(python.exists(), "{} is missing: run scripts/test", python.display());
    let script = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/ws/agent_client.py");
    let out = tokio::time::timeout(
        Duration::from_secs(60),
        tokio::process::Command::new(&python)
            .arg(&script)
            .arg(c.app.origin())
            .arg(token)
            .arg(c.session.to_string())
            .arg(text)
            .arg(review)
            .output(),
    )
    .await
    .expect("the client finishes")
    .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(out.status.success(), "{stdout}\n{}", String::from_utf8_lossy(&out.stderr));
    assert_eq!(stdout.lines().last(), Some("finished"), "{stdout}");
    stdout.lines().filter_map(|l| serde_json::from_str(l).ok()).collect()
}

fn kinds(got: &[Value]) -> Vec<&str> {
    got.iter().map(|m| m["type"].as_str().unwrap()).collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_client_of_the_websocket_agent_protocol_works_against_a_session() {
    let a = agent("suggest", |_| {}).await;
    let c = &a.c;
    let t = token(c, &c.s, "sessions").await;
    // A plain exchange.
    c.mock.enqueue(Provider::OpenAi, says("Hello over a socket."));
    let got = ws_client(c, &t, "Say hello", "YES").await;
    assert_eq!(
        kinds(&got),
        ["error", "loading_state", "response_item", "loading_state", "agent_finished"],
        "{got:#?}"
    );
    let item = &got[2]["payload"];
    assert_eq!((item["type"].as_str(), item["role"].as_str()), (Some("message"), Some("assistant")));
    assert_eq!(item["content"][0]["text"], "Hello over a socket.");
    assert_eq!(got[4]["payload"]["responseId"], item["id"]);

    // A tool call that waits: approval_request, YES, the call runs, the answer follows.
    c.mock.enqueue(Provider::OpenAi, write_call("notes/ws.txt", "over the socket\n"));
    c.mock.enqueue(Provider::OpenAi, says("Saved it."));
    let got = ws_client(c, &t, "Save a note", "YES").await;
    let asked = got.iter().find(|m| m["type"] == "approval_request").unwrap_or_else(|| panic!("{got:#?}"));
    assert_eq!(asked["payload"]["tool"], "write_file");
    assert_eq!(asked["payload"]["arguments"]["path"], "notes/ws.txt");
    let items: Vec<&str> = got
        .iter()
        .filter(|m| m["type"] == "response_item")
        .map(|m| m["payload"]["type"].as_str().unwrap())
        .collect();
    assert_eq!(items, ["function_call", "function_call_output", "message"], "{got:#?}");
    assert_eq!(got.last().unwrap()["type"], "agent_finished");
    assert_eq!(std::fs::read_to_string(a.folder.join("ws.txt")).unwrap(), "over the socket\n");
    let calls = a.calls().await;
    assert_eq!((calls[0].decision.as_deref(), calls[0].decided_by), (Some("yes"), Some(c.user.id)));

    // NO refuses it and ends the run.
    c.mock.enqueue(Provider::OpenAi, write_call("notes/no.txt", "never\n"));
    let got = ws_client(c, &t, "Save another", "NO").await;
    assert!(kinds(&got).contains(&"approval_request"), "{got:#?}");
    assert!(!a.folder.join("no.txt").exists());
    assert_eq!(a.calls().await.last().unwrap().decision.as_deref(), Some("no"));

    // The session is Arbor's: the browser shows what the socket did.
    let page = c.app.get(&format!("/s/{}", c.session), Some(&c.s.cookie)).await.text().await.unwrap();
    assert!(page.contains("Hello over a socket.") && page.contains("Saved it."), "{page}");
    // Without a token, or someone else's session: no upgrade.
    let res = c.app.get(&format!("/v1/sessions/{}/ws", c.session), None).await;
    assert_eq!(res.status(), 401);
    let stranger = c.app.create_user("ws-stranger@example.com", Role::Member).await;
    let ss = c.app.login_full(&stranger).await;
    let theirs = token(c, &ss, "sessions").await;
    assert_eq!(call(c, "GET", &format!("/v1/sessions/{}/ws", c.session), &theirs, None).await.0, 404);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_activity_log_keeps_every_event_with_who_and_when_in_the_page_the_download_and_the_api() {
    let a = agent("suggest", |_| {}).await;
    let c = &a.c;
    let t = token(c, &c.s, "sessions").await;
    let sid = c.session;
    // A run with a tool call the person approves.
    c.mock.enqueue(Provider::OpenAi, write_call("notes/log.txt", "logged\n"));
    c.mock.enqueue(Provider::OpenAi, says("Logged."));
    let (_, started) = call(
        c,
        "POST",
        &format!("/v1/sessions/{sid}/messages"),
        &t,
        Some(json!({"text": "Log it", "model": MODEL})),
    )
    .await;
    let call_id = a.paused().await;
    call(
        c,
        "POST",
        &format!("/v1/sessions/{sid}/tool-calls/{call_id}/decision"),
        &t,
        Some(json!({"decision": "yes"})),
    )
    .await;
    assert_eq!(a.ended().await, "completed");
    // A settings change, a regenerated answer, a branch switch back, a compression.
    let res = c
        .app
        .post_form(
            &format!("/s/{sid}/settings"),
            "model=openai%2Fgpt-4o-mini&approval_mode=suggest&exposed_roots=notes",
            Some(&c.s),
        )
        .await;
    assert_eq!(res.status(), 200);
    let answer = started["assistant_message_id"].as_str().unwrap();
    c.mock.enqueue(Provider::OpenAi, says("Another way."));
    call(c, "POST", &format!("/v1/sessions/{sid}/messages/{answer}/regenerate"), &t, None).await;
    wait_idle(c, sid).await;
    call(c, "POST", &format!("/v1/sessions/{sid}/messages/{answer}/select"), &t, None).await;
    c.mock.enqueue(Provider::OpenAi, says("## Goals\nLog things."));
    let body = crate::runs::form("/compress", "cmp-1", MODEL);
    assert_eq!(c.app.post_form(&format!("/s/{sid}/messages"), &body, Some(&c.s)).await.status(), 200);

    // The download: one JSON object per line, oldest first, with who and when.
    let res = c.app.get(&format!("/s/{sid}/activity.jsonl"), Some(&c.s.cookie)).await;
    assert_eq!(res.status(), 200);
    assert!(res.headers()["content-type"].to_str().unwrap().starts_with("application/x-ndjson"));
    let text = res.text().await.unwrap();
    let lines: Vec<Value> = text.lines().map(|l| serde_json::from_str(l).unwrap()).collect();
    let kinds: Vec<&str> = lines.iter().map(|l| l["kind"].as_str().unwrap()).collect();
    for kind in [
        "message",
        "run_started",
        "tool_call",
        "decision",
        "tool_result",
        "answer",
        "run_ended",
        "settings",
        "branch",
        "compression",
    ] {
        assert!(kinds.contains(&kind), "{kind} is missing from {kinds:?}");
    }
    let times: Vec<&str> = lines.iter().map(|l| l["at"].as_str().unwrap()).collect();
    let mut sorted = times.clone();
    sorted.sort();
    assert_eq!(times, sorted, "oldest first");
    let decision = lines.iter().find(|l| l["kind"] == "decision").unwrap();
    assert_eq!(decision["details"]["decision"], "yes");
    assert_eq!(decision["actor_id"], c.user.id.to_string());
    assert_eq!(decision["details"]["call_id"], call_id.to_string());
    let settings = lines.iter().find(|l| l["kind"] == "settings").unwrap();
    assert_eq!(settings["details"]["exposed_roots"], json!(["notes"]));
    // The API gives the same log.
    let res = c
        .app
        .client
        .get(c.app.url(&format!("/v1/sessions/{sid}/activity")))
        .header("Authorization", format!("Bearer {t}"))
        .send()
        .await
        .unwrap();
    assert_eq!(res.status(), 200);
    assert_eq!(res.text().await.unwrap().lines().count(), lines.len());
    // The page's panel says it in words.
    let panel = c.app.get(&format!("/s/{sid}/activity"), Some(&c.s.cookie)).await.text().await.unwrap();
    for words in [
        "decided “yes” on write_file",
        "changed the settings",
        "switched to another branch",
        "compressed the conversation",
    ] {
        assert!(panel.contains(words), "{words}: {panel}");
    }
    let page = c.app.get(&format!("/s/{sid}"), Some(&c.s.cookie)).await.text().await.unwrap();
    assert!(page.contains(&format!("hx-get=\"/s/{sid}/activity\"")), "the session page offers the panel");
    // Nobody else reads it.
    let stranger = c.app.create_user("log-stranger@example.com", Role::Member).await;
    let cookie = c.app.login(&stranger).await;
    assert_eq!(c.app.get(&format!("/s/{sid}/activity.jsonl"), Some(&cookie)).await.status(), 404);
    assert_eq!(c.app.get(&format!("/s/{sid}/activity"), Some(&cookie)).await.status(), 404);
}

/// SECURITY.md 24: another member can neither see, stop nor resume a member's running answer or
/// waiting agent call, by page, stream, socket or API; the run goes on and ends as it would have.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn another_member_cannot_see_stop_or_resume_a_running_answer_or_waiting_call() {
    use arbor::domain::sessions::tree::MessageStatus;
    let a = agent("suggest", |_| {}).await;
    let c = &a.c;
    let bob = c.app.create_user("bob@example.com", Role::Member).await;
    let bob_s = c.app.login_full(&bob).await;
    let bob_token = token(c, &bob_s, "sessions").await;
    let session = c.session;
    let refused = |what: &str, status: u16| assert_eq!(status, 404, "{what}");

    // A running answer.
    c.mock.enqueue(
        Provider::OpenAi,
        Reply::Fixture { path: "openai/text.sse".into(), chunk_delay_ms: 50, first_byte_delay_ms: 1500 },
    );
    let answer = c.send_ok("Write slowly", MODEL).await;
    assert!(c.app.state.runs.is_active(session));
    for path in [
        format!("/s/{session}"),
        format!("/s/{session}/events?m={answer}"),
        format!("/s/{session}/pending-watch"),
        format!("/s/{session}/messages/{answer}/branch"),
    ] {
        refused(&path, c.app.get(&path, Some(&bob_s.cookie)).await.status().as_u16());
    }
    for path in [format!("/s/{session}/stop"), format!("/s/{session}/messages/{answer}/continue")] {
        refused(&path, c.app.post_form(&path, "", Some(&bob_s)).await.status().as_u16());
    }
    for (method, path) in [
        ("GET", format!("/v1/sessions/{session}")),
        ("GET", format!("/v1/sessions/{session}/events")),
        ("GET", format!("/v1/sessions/{session}/activity")),
        ("POST", format!("/v1/sessions/{session}/stop")),
        ("POST", format!("/v1/sessions/{session}/messages/{answer}/continue")),
    ] {
        refused(&path, call(c, method, &path, &bob_token, None).await.0);
    }
    // Bob's own listings hold nothing of Ada's.
    let (status, listed) = call(c, "GET", "/v1/workspaces", &bob_token, None).await;
    assert_eq!(status, 200);
    for workspace in listed["data"].as_array().into_iter().flatten() {
        let id = workspace["id"].as_str().unwrap();
        let (_, sessions) = call(c, "GET", &format!("/v1/workspaces/{id}/sessions"), &bob_token, None).await;
        assert!(!sessions.to_string().contains(&session.to_string()), "{sessions}");
    }
    assert!(!listed.to_string().contains(&session.to_string()), "{listed}");
    let sidebar = c.app.get("/", Some(&bob_s.cookie)).await.text().await.unwrap();
    assert!(!sidebar.contains(&session.to_string()));
    // The answer was never stopped: it ends complete, whole.
    let done = c.settled(answer).await;
    assert_eq!(done.status, MessageStatus::Complete);
    assert_eq!(done.text(), crate::runs::fixture_text(&c.mock, "openai/text.sse"));

    // A call waiting for Ada's decision.
    c.mock.enqueue(Provider::OpenAi, write_call("notes/w.txt", "mine\n"));
    c.mock.enqueue(Provider::OpenAi, says("Written."));
    c.send_ok("Write a file", MODEL).await;
    let waiting = a.paused().await;
    let decision = format!("/s/{session}/tool-calls/{waiting}/decision");
    refused(
        &decision,
        c.app.post_form(&decision, "decision=yes&scope=", Some(&bob_s)).await.status().as_u16(),
    );
    let resume = format!("/s/{session}/tool-calls/{waiting}/resume");
    refused(&resume, c.app.post_form(&resume, "", Some(&bob_s)).await.status().as_u16());
    let shown = format!("/s/{session}/tool-calls/{waiting}");
    refused(&shown, c.app.get(&shown, Some(&bob_s.cookie)).await.status().as_u16());
    let api = format!("/v1/sessions/{session}/tool-calls/{waiting}/decision");
    refused(&api, call(c, "POST", &api, &bob_token, Some(json!({"decision": "yes"}))).await.0);
    refused(&api, call(c, "POST", &format!("/v1/sessions/{session}/stop"), &bob_token, None).await.0);
    // Nothing ran, nothing was decided: the call still waits for Ada, and her yes runs it.
    assert!(!a.folder.join("w.txt").exists());
    let calls = a.calls().await;
    let call_row = calls.iter().find(|r| r.id == waiting).unwrap();
    assert_eq!((call_row.status.as_str(), call_row.decision.as_deref()), ("proposed", None));
    assert_eq!(a.decide(waiting, "yes", "").await.status(), 200);
    assert_eq!(a.ended().await, "completed");
    assert_eq!(std::fs::read_to_string(a.folder.join("w.txt")).unwrap(), "mine\n");
}

/// SECURITY.md 49 over the API: the same `client_id`, or the same `Idempotency-Key` header, sent
/// twice at once and again after the answer (a retry after a timeout) sends one message and
/// starts one answer, and every retry gets the first call's ids. A bad key, or a key that
/// differs from the body's `client_id`, is refused without sending anything.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_retried_send_with_the_same_key_sends_once_and_returns_the_first_ids() {
    let c = chat_with(|_| {}).await;
    let token = token(&c, &c.s, "sessions").await;
    let path = format!("/v1/sessions/{}/messages", c.session);
    let send = |key: Option<&str>, body: Value| {
        let mut req = c.app.client.post(c.app.url(&path)).header("Authorization", format!("Bearer {token}"));
        if let Some(key) = key {
            req = req.header("Idempotency-Key", key);
        }
        let req = req.json(&body);
        async move {
            let res = req.send().await.unwrap();
            (res.status().as_u16(), res.json::<Value>().await.unwrap())
        }
    };
    let messages = || async {
        use sea_orm::{EntityTrait, PaginatorTrait};
        arbor::storage::entities::message::Entity::find().count(&c.app.state.db).await.unwrap()
    };
    let ids = |v: &Value| (v["user_message_id"].clone(), v["assistant_message_id"].clone());
    for (key, body) in [
        (Some("retry-key-1"), json!({"text": "Once by header", "model": MODEL})),
        (None, json!({"text": "Once by body", "model": MODEL, "client_id": "body-key-1"})),
        (Some("both-key-1"), json!({"text": "Once by both", "model": MODEL, "client_id": "both-key-1"})),
    ] {
        c.mock.enqueue(
            Provider::OpenAi,
            Reply::Fixture { path: "openai/text.sse".into(), chunk_delay_ms: 20, first_byte_delay_ms: 300 },
        );
        let before = (messages().await, c.mock.requests_for(Provider::OpenAi).len());
        let (first, second) = tokio::join!(send(key, body.clone()), send(key, body.clone()));
        assert_eq!((first.0, second.0), (202, 202), "{first:?} {second:?}");
        assert!(first.1["assistant_message_id"].is_string(), "{first:?}");
        assert_eq!(ids(&first.1), ids(&second.1), "both calls get the same ids");
        let answer = Uuid::parse_str(first.1["assistant_message_id"].as_str().unwrap()).unwrap();
        c.settled(answer).await;
        // A retry after the answer finished: the same ids, nothing new.
        let late = send(key, body.clone()).await;
        assert_eq!(late.0, 202);
        assert_eq!(ids(&late.1), ids(&first.1));
        let after = (messages().await, c.mock.requests_for(Provider::OpenAi).len());
        assert_eq!((after.0 - before.0, after.1 - before.1), (2, 1), "{key:?}: one message, one answer");
    }
    let before = (messages().await, c.mock.requests_for(Provider::OpenAi).len());
    for (key, body, says) in [
        (Some("bad key!"), json!({"text": "No", "model": MODEL}), "Idempotency-Key"),
        (Some("header-key"), json!({"text": "No", "model": MODEL, "client_id": "body-key"}), "differ"),
    ] {
        let (status, answer) = send(key, body).await;
        assert_eq!(status, 400, "{answer}");
        assert!(answer["error"]["message"].as_str().unwrap().contains(says), "{answer}");
    }
    assert_eq!(send(Some(&"k".repeat(65)), json!({"text": "No", "model": MODEL})).await.0, 400);
    assert_eq!((messages().await, c.mock.requests_for(Provider::OpenAi).len()), before, "nothing sent");
}
