//! The agent over HTTP: the mock upstream scripts the model's tool calls; the tools really run
//! (files in the workspace folder), approvals pause the run durably, and every decision does
//! what its button says.

use std::time::{Duration, Instant};

use arbor::config::Config;
use arbor::domain::accounts::Actor;
use arbor::domain::sessions::tree::{MessageStatus, Role};
use serde_json::{Value, json};
use uuid::Uuid;

use crate::runs::{Chat, chat_with};
use crate::support::mock_upstream::{Provider, Reply};

const MODEL: &str = "openai/gpt-4o-mini";

/// One OpenAI streaming chunk.
pub(crate) fn chunk(delta: Value, finish: Option<&str>) -> String {
    let body = json!({
        "id": "chatcmpl-agent", "object": "chat.completion.chunk", "created": 1_754_999_021,
        "model": "gpt-4o-mini-2024-07-18",
        "choices": [{"index": 0, "delta": delta, "logprobs": null, "finish_reason": finish}],
    });
    format!("data: {body}\n\n")
}

/// The model calls these tools (id, name, arguments), streamed as OpenAI documents it: the
/// first chunk of each call names it, the arguments follow in pieces.
pub(crate) fn calls(list: &[(&str, &str, Value)]) -> Reply {
    let mut events = vec![chunk(json!({"role": "assistant", "content": null}), None)];
    for (i, (id, name, args)) in list.iter().enumerate() {
        events.push(chunk(
            json!({"tool_calls": [{"index": i, "id": id, "type": "function", "function": {"name": name, "arguments": ""}}]}),
            None,
        ));
        let text = args.to_string();
        let (a, b) = text.split_at(text.len() / 2);
        for piece in [a, b] {
            events.push(chunk(json!({"tool_calls": [{"index": i, "function": {"arguments": piece}}]}), None));
        }
    }
    events.push(chunk(json!({}), Some("tool_calls")));
    events.push("data: [DONE]\n\n".into());
    Reply::Sse { events, chunk_delay_ms: 0 }
}

/// The model answers with text and stops.
pub(crate) fn says(text: &str) -> Reply {
    Reply::Sse {
        events: vec![
            chunk(json!({"role": "assistant", "content": ""}), None),
            chunk(json!({"content": text}), None),
            chunk(json!({}), Some("stop")),
            "data: [DONE]\n\n".into(),
        ],
        chunk_delay_ms: 0,
    }
}

pub(crate) struct Agent {
    pub(crate) c: Chat,
    pub(crate) folder: std::path::PathBuf,
}

/// A session exposing `notes` under the given approval mode.
pub(crate) async fn agent(mode: &str, adjust: impl FnOnce(&mut Config)) -> Agent {
    let c = chat_with(adjust).await;
    let actor = Actor::for_tests(&c.user);
    let form = arbor::domain::sessions::SessionForm {
        model: MODEL.into(),
        exposed_roots: "notes".into(),
        approval_mode: mode.into(),
        ..Default::default()
    };
    let session = c.app.state.sessions.update_session(&actor, c.session, &form).await.unwrap();
    let folder =
        arbor::prompting::workspace_dir(&c.app.state.config.data_dir, session.workspace_id).join("notes");
    Agent { c, folder }
}

impl Agent {
    pub(crate) fn db(&self) -> &arbor::storage::Db {
        &self.c.app.state.db
    }

    /// Waits until the session's run pauses for a decision; returns the waiting call's id.
    pub(crate) async fn paused(&self) -> Uuid {
        let start = Instant::now();
        loop {
            let pending =
                arbor::storage::repos::agent::pending_call(self.db(), self.c.session).await.unwrap();
            if let Some(call) = pending
                && !self.c.app.state.runs.is_active(self.c.session)
            {
                return call.id;
            }
            assert!(start.elapsed() < Duration::from_secs(20), "the run never paused");
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    }

    /// Waits until the session has no live run and no paused one; returns the last run's status.
    pub(crate) async fn ended(&self) -> String {
        let start = Instant::now();
        loop {
            let runs = self.runs().await;
            let last = runs.last().map(|r| r.status.clone()).unwrap_or_default();
            if !self.c.app.state.runs.is_active(self.c.session) && last != "running" {
                return last;
            }
            assert!(start.elapsed() < Duration::from_secs(20), "the run never ended: {last}");
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    }

    async fn runs(&self) -> Vec<arbor::storage::entities::run::Model> {
        use sea_orm::{ColumnTrait, EntityTrait, QueryFilter, QueryOrder};
        arbor::storage::entities::run::Entity::find()
            .filter(arbor::storage::entities::run::Column::SessionId.eq(self.c.session))
            .order_by_asc(arbor::storage::entities::run::Column::CreatedAt)
            .all(self.db())
            .await
            .unwrap()
    }

    pub(crate) async fn calls(&self) -> Vec<arbor::model::agent::ToolCall> {
        arbor::storage::repos::agent::calls_of_session(self.db(), self.c.session).await.unwrap()
    }

    pub(crate) async fn decide(&self, call: Uuid, decision: &str, scope: &str) -> reqwest::Response {
        self.c
            .app
            .post_form(
                &format!("/s/{}/tool-calls/{call}/decision", self.c.session),
                &format!("decision={decision}&scope={scope}"),
                Some(&self.c.s),
            )
            .await
    }

    /// The active path's messages, root first.
    pub(crate) async fn path(&self) -> Vec<arbor::domain::sessions::tree::Message> {
        let actor = Actor::for_tests(&self.c.user);
        arbor::domain::sessions::Sessions::new(self.db().clone())
            .conversation(&actor, self.c.session)
            .await
            .unwrap()
            .path
    }

    /// The tool results the model was sent in upstream request `n` (0-based).
    pub(crate) fn tool_results_sent(&self, n: usize) -> Vec<Value> {
        let reqs = self.c.mock.requests_for(Provider::OpenAi);
        let body = reqs[n].json().unwrap();
        body["messages"].as_array().unwrap().iter().filter(|m| m["role"] == "tool").cloned().collect()
    }
}

/// A server that accepts connections and never answers (a tool call to it runs until stopped):
/// its task (abort it at the end) and port.
pub(crate) async fn hanging_server() -> (tokio::task::JoinHandle<()>, u16) {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let port = listener.local_addr().unwrap().port();
    let hang = tokio::spawn(async move {
        let mut held = Vec::new();
        while let Ok((sock, _)) = listener.accept().await {
            held.push(sock);
        }
    });
    (hang, port)
}

pub(crate) fn write_call(path: &str, content: &str) -> Reply {
    calls(&[("call_w1", "write_file", json!({"path": path, "content": content}))])
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn in_auto_edit_a_write_runs_unasked_and_the_model_answers_after_it() {
    let a = agent("auto-edit", |_| {}).await;
    a.c.mock.enqueue(Provider::OpenAi, write_call("notes/plan.md", "step one\n"));
    a.c.mock.enqueue(Provider::OpenAi, says("Written."));
    a.c.send_ok("Write the plan", MODEL).await;
    assert_eq!(a.ended().await, "completed");

    assert_eq!(std::fs::read_to_string(a.folder.join("plan.md")).unwrap(), "step one\n");
    let path = a.path().await;
    let roles: Vec<Role> = path.iter().map(|m| m.role).collect();
    assert_eq!(roles, vec![Role::User, Role::Assistant, Role::Tool, Role::Assistant]);
    assert_eq!(path[3].text(), "Written.");
    assert!(path.iter().all(|m| m.status == MessageStatus::Complete), "{path:?}");

    // The tools were offered, and the second call carried the result.
    let first = a.c.mock.requests_for(Provider::OpenAi)[0].json().unwrap();
    let offered: Vec<&str> =
        first["tools"].as_array().unwrap().iter().map(|t| t["function"]["name"].as_str().unwrap()).collect();
    for name in ["read_file", "write_file", "edit_file", "list_directory", "web_fetch", "write_todo"] {
        assert!(offered.contains(&name), "{name} not offered: {offered:?}");
    }
    let results = a.tool_results_sent(1);
    assert_eq!(results.len(), 1);
    assert_eq!(results[0]["tool_call_id"], "call_w1");
    assert!(results[0]["content"].as_str().unwrap().contains("plan.md"), "{results:?}");

    let calls = a.calls().await;
    assert_eq!(calls.len(), 1);
    assert_eq!((calls[0].status.as_str(), calls[0].decision.as_deref()), ("executed", Some("auto")));
    assert!(calls[0].diff.as_deref().unwrap().contains("+step one"), "{:?}", calls[0].diff);
    // The page shows the call, the diff and the answer.
    let page = a.c.app.get(&format!("/s/{}", a.c.session), Some(&a.c.s.cookie)).await.text().await.unwrap();
    assert!(page.contains("class=\"diff-add\">+step one"), "{page}");
    assert!(page.contains("ran without asking"), "{page}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn in_suggest_mode_a_write_waits_and_yes_runs_exactly_that_call() {
    let a = agent("suggest", |_| {}).await;
    a.c.mock.enqueue(Provider::OpenAi, write_call("notes/a.txt", "hello\n"));
    a.c.mock.enqueue(Provider::OpenAi, says("Done."));
    a.c.send_ok("Write a file", MODEL).await;
    let call = a.paused().await;
    assert!(!a.folder.join("a.txt").exists(), "nothing runs before the decision");
    assert_eq!(a.runs().await.last().unwrap().status, "awaiting_confirmation");

    // The dialog is on the page, with the exact arguments.
    let page = a.c.app.get(&format!("/s/{}", a.c.session), Some(&a.c.s.cookie)).await.text().await.unwrap();
    assert!(page.contains(&format!("id=\"confirm-{call}\"")), "{page}");
    assert!(
        page.contains("&quot;notes&#x2F;a.txt&quot;") || page.contains("&quot;notes/a.txt&quot;"),
        "{page}"
    );
    // A page that does not show the dialog (opened before the run paused) is told to reload;
    // one that shows it is left alone.
    let watch = |showing: String| {
        let req =
            a.c.app
                .client
                .get(a.c.app.url(&format!("/s/{}/pending-watch", a.c.session)))
                .header("Cookie", &a.c.s.cookie)
                .header("X-Arbor-Showing", showing);
        async move { req.send().await.unwrap() }
    };
    let res = watch(String::new()).await;
    assert_eq!(
        (res.status().as_u16(), res.headers().get("hx-refresh").map(|v| v.to_str().unwrap().to_string())),
        (200, Some("true".into()))
    );
    assert_eq!(watch(call.to_string()).await.status(), 204);
    // Buttons the dialog does not have are refused, and change nothing.
    for body in ["decision=maybe&scope=session", "decision=always&scope=everywhere", "scope=session"] {
        let res =
            a.c.app
                .post_form(&format!("/s/{}/tool-calls/{call}/decision", a.c.session), body, Some(&a.c.s))
                .await;
        assert_eq!(res.status(), 400, "{body}");
    }
    assert_eq!(a.calls().await[0].status, "proposed");
    // A new message waits too.
    let res =
        a.c.app
            .post_form(
                &format!("/s/{}/messages", a.c.session),
                &crate::runs::form("more", "cid-2", MODEL),
                Some(&a.c.s),
            )
            .await;
    assert_eq!(res.status(), 409);

    let res = a.decide(call, "yes", "").await;
    let status = res.status();
    let html = res.text().await.unwrap();
    assert_eq!(status, 200, "{html}");
    assert!(html.contains("approved"), "{html}");
    assert_eq!(a.ended().await, "completed");
    assert_eq!(std::fs::read_to_string(a.folder.join("a.txt")).unwrap(), "hello\n");
    let calls = a.calls().await;
    assert_eq!(calls[0].decision.as_deref(), Some("yes"));
    assert_eq!(calls[0].decided_by, Some(a.c.user.id));
    assert!(calls[0].decided_at.is_some());
    assert_eq!(a.path().await.last().unwrap().text(), "Done.");
    // The approval was used once: deciding again changes nothing.
    let again = a.decide(call, "yes", "").await;
    assert_eq!(again.status(), 200);
    assert_eq!(a.c.mock.requests_for(Provider::OpenAi).len(), 2);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn no_ends_the_run_and_no_continue_tells_the_model_and_goes_on() {
    let a = agent("suggest", |_| {}).await;
    // no: the run ends, nothing is written, the model is not called again.
    a.c.mock.enqueue(Provider::OpenAi, write_call("notes/x.txt", "x"));
    a.c.send_ok("Write x", MODEL).await;
    let call = a.paused().await;
    assert_eq!(a.decide(call, "no", "").await.status(), 200);
    assert_eq!(a.ended().await, "cancelled");
    assert!(!a.folder.join("x.txt").exists());
    assert_eq!(a.c.mock.requests_for(Provider::OpenAi).len(), 1);
    let last = a.path().await.pop().unwrap();
    assert_eq!(last.role, Role::Tool);
    assert_eq!(a.calls().await[0].status, "denied");

    // no_continue: the refusal goes back to the model, which answers.
    a.c.mock.enqueue(Provider::OpenAi, write_call("notes/y.txt", "y"));
    a.c.mock.enqueue(Provider::OpenAi, says("Understood, I will not write it."));
    a.c.send_ok("Write y", MODEL).await;
    let call = a.paused().await;
    assert_eq!(a.decide(call, "no_continue", "").await.status(), 200);
    assert_eq!(a.ended().await, "completed");
    assert!(!a.folder.join("y.txt").exists());
    let results = a.tool_results_sent(2);
    // The first run's refusal and this one's both read as refusals.
    assert!(
        results.iter().all(|r| r["content"].as_str().unwrap().contains("refused")
            || r["content"].as_str().unwrap().contains("declined")),
        "{results:?}"
    );
    assert_eq!(a.path().await.last().unwrap().text(), "Understood, I will not write it.");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn always_stores_a_rule_that_lets_the_next_call_run_until_it_is_revoked() {
    let a = agent("suggest", |_| {}).await;
    a.c.mock.enqueue(Provider::OpenAi, write_call("notes/1.txt", "1"));
    a.c.mock.enqueue(Provider::OpenAi, says("One."));
    a.c.send_ok("first", MODEL).await;
    let call = a.paused().await;
    assert_eq!(a.decide(call, "always", "session").await.status(), 200);
    assert_eq!(a.ended().await, "completed");

    // The next write runs unasked, by the rule.
    a.c.mock.enqueue(Provider::OpenAi, write_call("notes/2.txt", "2"));
    a.c.mock.enqueue(Provider::OpenAi, says("Two."));
    a.c.send_ok("second", MODEL).await;
    assert_eq!(a.ended().await, "completed");
    assert!(a.folder.join("2.txt").exists());
    assert_eq!(a.calls().await[1].decision.as_deref(), Some("rule"));

    // Listed in settings, and revoking it makes the next write ask again.
    let page = a.c.app.get("/settings/approvals", Some(&a.c.s.cookie)).await.text().await.unwrap();
    assert!(page.contains("<code>write_file</code>"), "{page}");
    let rules = a.c.app.state.agent.list_rules(a.c.user.id).await.unwrap();
    assert_eq!(rules.len(), 1);
    let res =
        a.c.app.post_form(&format!("/settings/approvals/{}/delete", rules[0].id), "", Some(&a.c.s)).await;
    assert_eq!(res.status(), 200);
    assert!(a.c.app.state.agent.list_rules(a.c.user.id).await.unwrap().is_empty());
    a.c.mock.enqueue(Provider::OpenAi, write_call("notes/3.txt", "3"));
    a.c.send_ok("third", MODEL).await;
    a.paused().await;
    assert!(!a.folder.join("3.txt").exists());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn explain_asks_the_model_and_the_dialog_asks_again() {
    let a = agent("suggest", |_| {}).await;
    a.c.mock.enqueue(Provider::OpenAi, write_call("notes/e.txt", "e"));
    a.c.send_ok("Write e", MODEL).await;
    let call = a.paused().await;
    a.c.mock.enqueue(Provider::OpenAi, says("I write e.txt to save your note."));
    let res = a.decide(call, "explain", "").await;
    assert_eq!(res.status(), 200);
    let html = res.text().await.unwrap();
    assert!(html.contains("I write e.txt to save your note."), "{html}");
    assert!(html.contains(&format!("id=\"confirm-{call}\"")), "the dialog asks again: {html}");
    // The explanation request asked for an explanation and offered the call's result as not run.
    let req = a.c.mock.requests_for(Provider::OpenAi)[1].json().unwrap();
    assert!(req.to_string().contains("explain"), "{req}");
    assert!(!a.folder.join("e.txt").exists());
    assert_eq!(a.calls().await[0].status, "proposed");
    a.c.mock.enqueue(Provider::OpenAi, says("Saved."));
    assert_eq!(a.decide(call, "yes", "").await.status(), 200);
    assert_eq!(a.ended().await, "completed");
    assert!(a.folder.join("e.txt").exists());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn two_tabs_deciding_at_once_run_the_call_once() {
    let a = agent("suggest", |_| {}).await;
    a.c.mock.enqueue(Provider::OpenAi, write_call("notes/t.txt", "t"));
    a.c.mock.enqueue(Provider::OpenAi, says("Once."));
    a.c.send_ok("Write t", MODEL).await;
    let call = a.paused().await;
    let (one, two) = tokio::join!(a.decide(call, "yes", ""), a.decide(call, "no", ""));
    assert_eq!((one.status().as_u16(), two.status().as_u16()), (200, 200));
    let status = a.ended().await;
    let calls = a.calls().await;
    // Exactly one decision was recorded, and the run did what it said.
    match calls[0].decision.as_deref() {
        Some("yes") => {
            assert_eq!(status, "completed");
            assert!(a.folder.join("t.txt").exists());
        }
        Some("no") => {
            assert_eq!(status, "cancelled");
            assert!(!a.folder.join("t.txt").exists());
        }
        other => panic!("unexpected decision {other:?}"),
    }
    // Both tabs now show it resolved: the poll no longer answers 204.
    let poll =
        a.c.app.get(&format!("/s/{}/tool-calls/{call}?poll=1", a.c.session), Some(&a.c.s.cookie)).await;
    assert_eq!(poll.status(), 200);
    assert!(poll.text().await.unwrap().contains("confirm-resolved"));
    let tool_messages = a.path().await.iter().filter(|m| m.role == Role::Tool).count();
    assert_eq!(tool_messages, 1);
}

/// A decision posted while the session's run slot is still held (by the run that proposed the
/// call, ending on a busy server) waits for the slot and resumes the run when it frees, instead
/// of answering 409.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_decision_posted_while_the_proposing_run_ends_waits_for_it_and_resumes() {
    let a = agent("suggest", |_| {}).await;
    a.c.mock.enqueue(Provider::OpenAi, write_call("notes/late.txt", "late"));
    a.c.mock.enqueue(Provider::OpenAi, says("Written late."));
    a.c.send_ok("Write late", MODEL).await;
    let call = a.paused().await;

    // The proposing run's slot, held as it is for the moment that run takes to end.
    let held = a.c.app.state.runs.begin(a.c.session, Uuid::now_v7(), None).unwrap();
    let release = async {
        // The decision is waiting for the slot: nothing is recorded yet.
        tokio::time::sleep(Duration::from_millis(300)).await;
        assert_eq!(a.calls().await[0].status, "proposed");
        held.abandon();
    };
    let (res, ()) = tokio::join!(a.decide(call, "yes", ""), release);
    assert_eq!(res.status(), 200, "{}", res.text().await.unwrap_or_default());
    assert_eq!(a.ended().await, "completed");
    assert_eq!(std::fs::read_to_string(a.folder.join("late.txt")).unwrap(), "late");
    assert_eq!(a.calls().await[0].decision.as_deref(), Some("yes"));
    assert_eq!(a.path().await.last().unwrap().text(), "Written late.");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_waiting_dialog_survives_a_restart_and_approving_it_continues_the_run() {
    let a = agent("suggest", |_| {}).await;
    a.c.mock.enqueue(Provider::OpenAi, write_call("notes/r.txt", "r"));
    a.c.send_ok("Write r", MODEL).await;
    let call = a.paused().await;

    // A second server on the same database and data folder: a restart, with nothing in memory.
    // The search index is locked by the first server: the second keeps its own.
    let index = tempfile::tempdir().unwrap();
    let mut config = (*a.c.app.state.config).clone();
    config.search.index_dir = index.path().to_string_lossy().to_string();
    let state = arbor::build_state(config).await.unwrap();
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = listener.local_addr().unwrap();
    let server = arbor::serve(state, listener).unwrap();
    let handle = server.handle();
    tokio::spawn(server);
    let client = reqwest::Client::new();
    let page = client
        .get(format!("http://{addr}/s/{}", a.c.session))
        .header("Cookie", &a.c.s.cookie)
        .send()
        .await
        .unwrap()
        .text()
        .await
        .unwrap();
    assert!(page.contains(&format!("id=\"confirm-{call}\"")), "{page}");
    a.c.mock.enqueue(Provider::OpenAi, says("After the restart."));
    let res = client
        .post(format!("http://{addr}/s/{}/tool-calls/{call}/decision", a.c.session))
        .header("Cookie", &a.c.s.cookie)
        .header("X-CSRF-Token", &a.c.s.csrf)
        .header("Origin", format!("http://{addr}"))
        .header("Content-Type", "application/x-www-form-urlencoded")
        .body("decision=yes&scope=session")
        .send()
        .await
        .unwrap();
    assert_eq!(res.status(), 200);
    let start = Instant::now();
    while a.path().await.last().unwrap().text() != "After the restart." {
        assert!(start.elapsed() < Duration::from_secs(20), "the run did not continue");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    assert!(a.folder.join("r.txt").exists());
    handle.stop(false).await;
}

async fn post_message(a: &Agent, text: &str, client_id: &str) -> reqwest::Response {
    let path = format!("/s/{}/messages", a.c.session);
    a.c.app.post_form(&path, &crate::runs::form(text, client_id, MODEL), Some(&a.c.s)).await
}

/// While a tool call waits for a decision a new message is refused (409, said in the composer),
/// and the post that started the run, sent again (a double click), gets its own turn back
/// without a second message: both are read in one statement before a submit.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_new_message_waits_for_the_decision_and_a_repeated_post_gets_its_turn() {
    let a = agent("suggest", |_| {}).await;
    a.c.mock.enqueue(Provider::OpenAi, write_call("notes/a.txt", "hello\n"));
    assert_eq!(post_message(&a, "Write a file", "first-post").await.status(), 200);
    a.paused().await;
    let stored = || arbor::storage::repos::messages::session_messages(a.db(), a.c.session);
    let before = stored().await.unwrap().len();

    let refused = post_message(&a, "Something else", "second-post").await;
    assert_eq!(refused.status(), 409);
    assert!(refused.text().await.unwrap().contains("waiting for your decision"));
    let again = post_message(&a, "Write a file", "first-post").await;
    assert_eq!(again.status(), 200);
    assert!(again.text().await.unwrap().contains("Write a file"));
    assert_eq!(stored().await.unwrap().len(), before, "neither post added a message");
    assert_eq!(a.runs().await.last().unwrap().status, "awaiting_confirmation");
}

/// A run's first model call is counted in the statement that makes the run: an answer without
/// tool calls is one call, and the loop above counts each further call.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_plain_answer_is_one_counted_model_call() {
    let a = agent("auto-edit", |_| {}).await;
    a.c.mock.enqueue(Provider::OpenAi, says("Hello."));
    a.c.send_ok("Hello", MODEL).await;
    assert_eq!(a.ended().await, "completed");
    assert_eq!(a.c.mock.requests_for(Provider::OpenAi).len(), 1);
    assert_eq!(a.runs().await.pop().unwrap().iterations, 1);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_iteration_limit_stops_a_model_that_never_stops_calling_tools() {
    let a = agent("auto-edit", |c| c.agent.max_iterations = 2).await;
    for i in 0..3 {
        a.c.mock.enqueue(
            Provider::OpenAi,
            calls(&[(&format!("call_{i}"), "list_directory", json!({"path": "notes"}))]),
        );
    }
    a.c.send_ok("Loop", MODEL).await;
    assert_eq!(a.ended().await, "failed");
    assert_eq!(a.c.mock.requests_for(Provider::OpenAi).len(), 2);
    let run = a.runs().await.pop().unwrap();
    assert!(run.error.unwrap().contains("limit"));
    assert_eq!(run.iterations, 2);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn bad_arguments_unknown_tools_and_escapes_come_back_to_the_model_as_errors() {
    let a = agent("auto-edit", |_| {}).await;
    std::fs::create_dir_all(&a.folder).unwrap();
    let outside = a.folder.parent().unwrap().join("secret.txt");
    std::fs::write(&outside, "do not read").unwrap();
    a.c.mock.enqueue(
        Provider::OpenAi,
        calls(&[
            ("c1", "write_file", json!({"path": "notes/a.txt"})),
            ("c2", "launch_rockets", json!({})),
            ("c3", "read_file", json!({"path": "notes/../secret.txt"})),
            ("c4", "read_file", json!({"path": 5})),
        ]),
    );
    a.c.mock.enqueue(Provider::OpenAi, says("Sorry."));
    a.c.send_ok("Try things", MODEL).await;
    assert_eq!(a.ended().await, "completed");
    let results = a.tool_results_sent(1);
    assert_eq!(results.len(), 4, "{results:?}");
    for r in &results {
        let text = r["content"].as_str().unwrap();
        assert!(!text.contains("do not read"), "{text}");
        assert!(!text.is_empty());
    }
    assert!(results[1]["content"].as_str().unwrap().contains("no tool named"));
    let statuses: Vec<String> = a.calls().await.into_iter().map(|c| c.status).collect();
    assert!(statuses.iter().all(|s| s == "failed"), "{statuses:?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn write_todo_keeps_the_sessions_list_and_the_page_shows_it() {
    let a = agent("suggest", |_| {}).await;
    a.c.mock.enqueue(
        Provider::OpenAi,
        calls(&[("t1", "write_todo", json!({"todos": [{"text": "Read the spec", "status": "done"}, {"text": "Write <tests>", "status": "in_progress"}]}))]),
    );
    a.c.mock.enqueue(Provider::OpenAi, says("Planned."));
    a.c.send_ok("Plan", MODEL).await;
    assert_eq!(a.ended().await, "completed");
    let todos = a.c.app.state.agent.todos(a.c.session).await.unwrap();
    assert_eq!(todos.len(), 2);
    assert_eq!((todos[1].text.as_str(), todos[1].status.as_str()), ("Write <tests>", "in_progress"));
    let page = a.c.app.get(&format!("/s/{}", a.c.session), Some(&a.c.s.cookie)).await.text().await.unwrap();
    assert!(page.contains("Write &lt;tests&gt;"), "{page}");
}

/// A plain answer's `done` leaves the agent's panel as the page shows it: the run said it wrote
/// that answer and nothing else, so its page reads neither the panel nor files (two statements
/// fewer than a full read at least). An answer after tool work brings the panel with it, and so
/// does any answer in a session that exposes folders (the files in context follow the path).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_plain_answers_done_leaves_the_agents_panel_and_one_after_tool_work_brings_it() {
    use crate::runs::follow;
    let a = agent("auto-edit", |_| {}).await;
    let (c, actor) = (&a.c, Actor::for_tests(&a.c.user));
    // Slow enough that the page's stream is open before the answer ends: `done` comes from the run.
    let slow_text =
        || Reply::Fixture { path: "openai/text.sse".into(), chunk_delay_ms: 0, first_byte_delay_ms: 800 };
    let done_of = async |question: &str| {
        let id = c.send_ok(question, MODEL).await;
        let done = follow(&mut c.events(id).await, None).await.done;
        assert_eq!(a.ended().await, "completed");
        (id, done)
    };
    // Tool work first: the todo list is written, and the answer after it brings the panel.
    c.mock.enqueue(
        Provider::OpenAi,
        calls(&[("t1", "write_todo", json!({"todos": [{"text": "Read the spec", "status": "done"}]}))]),
    );
    c.mock.enqueue(Provider::OpenAi, says("Planned."));
    let (_, done) = done_of("Plan").await;
    assert!(done.contains("id=\"todos\"") && done.contains("Read the spec"), "{done}");
    // With folders exposed, even a plain answer's `done` brings the panel.
    c.mock.enqueue(Provider::OpenAi, slow_text());
    let (_, done) = done_of("Words, with folders").await;
    assert!(done.contains("id=\"context-files\""), "{done}");
    // Without them, a plain answer's `done` is the answer, the counts and the title only.
    let form = arbor::domain::sessions::SessionForm {
        model: MODEL.into(),
        approval_mode: "auto-edit".into(),
        ..Default::default()
    };
    c.app.state.sessions.update_session(&actor, c.session, &form).await.unwrap();
    c.mock.enqueue(Provider::OpenAi, slow_text());
    let (answer, done) = done_of("Just words").await;
    let text = crate::runs::fixture_text(&c.mock, "openai/text.sse");
    assert!(done.contains(text.trim_end()), "{done}");
    assert!(done.contains("id=\"session-stats\"") && done.contains("id=\"session-title\""), "{done}");
    assert!(!done.contains("id=\"todos\"") && !done.contains("id=\"context-files\""), "{done}");
    // And its page reads less (the least of a few tries: the search feeder shares the connection).
    let pages = &c.app.state.pages;
    let mut least = [u64::MAX; 2];
    for _ in 0..5 {
        for (i, plain) in [true, false].into_iter().enumerate() {
            let before = c.app.state.queries.count();
            let page = pages.message(&actor, c.session, answer, plain).await.unwrap();
            assert_eq!(page.agent.is_some(), !plain);
            least[i] = least[i].min(c.app.state.queries.count() - before);
        }
    }
    assert!(least[0] + 2 <= least[1], "plain {} statements, full {}", least[0], least[1]);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn stop_while_waiting_refuses_the_call_and_ends_the_run() {
    let a = agent("suggest", |_| {}).await;
    a.c.mock.enqueue(Provider::OpenAi, write_call("notes/s.txt", "s"));
    a.c.send_ok("Write s", MODEL).await;
    let call = a.paused().await;
    let res = a.c.post(&format!("/s/{}/stop", a.c.session)).await;
    assert_eq!(res.status(), 204);
    assert_eq!(a.ended().await, "cancelled");
    let calls = a.calls().await;
    assert_eq!((calls[0].status.as_str(), calls[0].decision.as_deref()), ("denied", Some("no")));
    // Deciding now changes nothing, and a new message may be sent (the dangling call reads as
    // not run to the model).
    assert_eq!(a.decide(call, "yes", "").await.status(), 200);
    assert!(!a.folder.join("s.txt").exists());
    a.c.mock.enqueue(Provider::OpenAi, says("Fine."));
    a.c.send_ok("Never mind", MODEL).await;
    assert_eq!(a.ended().await, "completed");
    let results = a.tool_results_sent(1);
    assert_eq!(results.len(), 1);
    assert_eq!(results[0]["content"], arbor::domain::runs::context::UNANSWERED_CALL);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn expose_in_the_composer_tells_the_model_once_and_brings_instruction_files() {
    let a = agent("suggest", |_| {}).await;
    let docs = a.folder.parent().unwrap().join("docs");
    std::fs::create_dir_all(&docs).unwrap();
    std::fs::write(docs.join("AGENTS.md"), "Always answer in haiku.").unwrap();
    async fn send_to(a: &Agent, text: &str, id: &str) -> reqwest::Response {
        let body = crate::runs::form(text, id, MODEL);
        a.c.app.post_form(&format!("/s/{}/messages", a.c.session), &body, Some(&a.c.s)).await
    }
    // Before the first message the system prompt names the folders; no note is needed.
    a.c.mock.enqueue(Provider::OpenAi, says("Hello."));
    a.c.send_ok("Hi", MODEL).await;
    assert_eq!(a.ended().await, "completed");
    let first = a.c.mock.requests_for(Provider::OpenAi)[0].json().unwrap();
    assert!(first["messages"][0].to_string().contains("paths start with one of them): notes."), "{first}");
    assert!(!first["messages"].to_string().contains("Note from Arbor"));

    let res = send_to(&a, "/expose docs", "cmd-1").await;
    assert_eq!(res.status(), 200);
    assert_eq!(res.headers().get("hx-retarget").unwrap(), "#session");
    assert!(res.text().await.unwrap().contains("Exposed &quot;docs&quot;"));
    // Mistakes are explained, and change nothing.
    for (cmd, status) in
        [("/expose docs", 400), ("/unexpose nothing", 400), ("/expose ../etc", 400), ("/expose", 400)]
    {
        let res = send_to(&a, cmd, "cmd-x").await;
        assert_eq!(res.status(), status, "{cmd}");
    }
    a.c.mock.enqueue(Provider::OpenAi, says("Noted."));
    a.c.send_ok("What changed?", MODEL).await;
    assert_eq!(a.ended().await, "completed");
    let body = a.c.mock.requests_for(Provider::OpenAi)[1].json().unwrap();
    let text = body["messages"].to_string();
    assert!(
        text.contains("[Note from Arbor] The user changed the exposed folders. Exposed now: notes, docs"),
        "{text}"
    );
    let system = body["messages"][0].to_string();
    assert!(system.contains("Always answer in haiku."), "{system}");
    let roles: Vec<Role> = a.path().await.iter().map(|m| m.role).collect();
    assert_eq!(roles, vec![Role::User, Role::Assistant, Role::System, Role::User, Role::Assistant]);

    // Told once: the next message carries no note.
    a.c.mock.enqueue(Provider::OpenAi, says("Still."));
    a.c.send_ok("And now?", MODEL).await;
    assert_eq!(a.ended().await, "completed");
    let body = a.c.mock.requests_for(Provider::OpenAi)[2].json().unwrap();
    assert_eq!(body["messages"].to_string().matches("[Note from Arbor]").count(), 1);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn stop_during_a_tool_call_cancels_it_and_keeps_what_was_written() {
    // A page that never answers: the fetch hangs until it is stopped.
    let (hang, port) = crate::agent::hanging_server().await;
    let a = agent("full-auto", |c| c.agent.fetch_allow = vec!["127.0.0.0/8".into()]).await;
    a.c.mock.enqueue(
        Provider::OpenAi,
        calls(&[("f1", "web_fetch", json!({"url": format!("http://127.0.0.1:{port}/slow")}))]),
    );
    a.c.send_ok("Fetch it", MODEL).await;
    // Wait until the tool is running.
    let start = Instant::now();
    loop {
        let path = a.path().await;
        if path.last().is_some_and(|m| m.role == Role::Tool && m.status == MessageStatus::Streaming) {
            break;
        }
        assert!(start.elapsed() < Duration::from_secs(20), "the tool never started: {path:?}");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    let started = Instant::now();
    assert_eq!(a.c.post(&format!("/s/{}/stop", a.c.session)).await.status(), 204);
    assert_eq!(a.ended().await, "cancelled");
    assert!(started.elapsed() < Duration::from_secs(5), "stopping took {:?}", started.elapsed());
    let last = a.path().await.pop().unwrap();
    assert_eq!((last.role, last.status), (Role::Tool, MessageStatus::Stopped));
    assert_eq!(a.calls().await[0].status, "failed");
    // The model was not called again.
    assert_eq!(a.c.mock.requests_for(Provider::OpenAi).len(), 1);
    hang.abort();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_subagent_works_on_a_side_branch_and_its_answer_returns_to_the_parent() {
    let a = agent("auto-edit", |_| {}).await;
    let sub_args = json!({"task": "Write notes/sub.txt saying hi", "system_prompt": "You are terse.", "tools": ["write_file"]});
    a.c.mock.enqueue(Provider::OpenAi, calls(&[("s1", "subagent", sub_args)]));
    a.c.mock.enqueue(
        Provider::OpenAi,
        calls(&[("w1", "write_file", json!({"path": "notes/sub.txt", "content": "hi"}))]),
    );
    a.c.mock.enqueue(Provider::OpenAi, says("Sub-agent: wrote it."));
    a.c.mock.enqueue(Provider::OpenAi, says("All done."));
    a.c.send_ok("Delegate", MODEL).await;
    assert_eq!(a.ended().await, "completed");
    assert_eq!(std::fs::read_to_string(a.folder.join("sub.txt")).unwrap(), "hi");

    let reqs = a.c.mock.requests_for(Provider::OpenAi);
    assert_eq!(reqs.len(), 4);
    // The sub-agent saw its own instructions, only its task, and only the tools it was given.
    let sub = reqs[1].json().unwrap();
    assert_eq!(sub["messages"][0]["role"], "system");
    assert_eq!(sub["messages"][0]["content"], "You are terse.");
    assert!(sub["messages"][1]["content"].to_string().contains("Write notes/sub.txt"), "{sub}");
    assert_eq!(sub["messages"].as_array().unwrap().len(), 2);
    let names: Vec<&str> =
        sub["tools"].as_array().unwrap().iter().map(|t| t["function"]["name"].as_str().unwrap()).collect();
    assert_eq!(names, vec!["write_file"]);
    // Its answer came back as the call's result.
    let results = a.tool_results_sent(3);
    assert_eq!(results[0]["content"], "Sub-agent: wrote it.");

    // The parent's path goes on; the sub-agent's work is a side branch under the result.
    let path = a.path().await;
    let roles: Vec<Role> = path.iter().map(|m| m.role).collect();
    assert_eq!(roles, vec![Role::User, Role::Assistant, Role::Tool, Role::Assistant]);
    let all = a.c.messages().await;
    let side: Vec<_> = all.iter().filter(|m| m.parent_id == Some(path[2].id) && m.id != path[3].id).collect();
    assert_eq!(side.len(), 1);
    assert_eq!(side[0].text(), "Write notes/sub.txt saying hi");
    assert_eq!(all.len(), 4 + 4, "task, call, result, answer on the side branch");
    assert!(all.iter().all(|m| m.status == MessageStatus::Complete));

    // The result's card opens the side branch.
    let page = a.c.app.get(&format!("/s/{}", a.c.session), Some(&a.c.s.cookie)).await.text().await.unwrap();
    let link = format!("/s/{}/messages/{}/branch", a.c.session, side[0].id);
    assert!(page.contains(&link), "{page}");
    let branch = a.c.app.get(&link, Some(&a.c.s.cookie)).await.text().await.unwrap();
    assert!(
        branch.contains("Write notes/sub.txt saying hi") && branch.contains("Sub-agent: wrote it."),
        "{branch}"
    );
}

/// SECURITY.md 58: a sub-agent's calls are decided by the parent's rules, one call per
/// approval, with the dialog on the parent's session page; delegating approves nothing.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_subagents_calls_are_decided_one_by_one_on_the_parents_page() {
    let s = agent("suggest", |_| {}).await;
    s.c.mock.enqueue(
        Provider::OpenAi,
        calls(&[("s2", "subagent", json!({"task": "Write two notes", "tools": ["write_file"]}))]),
    );
    s.c.mock.enqueue(
        Provider::OpenAi,
        calls(&[
            ("w1", "write_file", json!({"path": "notes/one.txt", "content": "1"})),
            ("w2", "write_file", json!({"path": "notes/two.txt", "content": "2"})),
        ]),
    );
    s.c.mock.enqueue(Provider::OpenAi, says("Sub-agent: both written."));
    s.c.mock.enqueue(Provider::OpenAi, says("All done."));
    s.c.send_ok("Delegate", MODEL).await;
    let first = s.paused().await;
    let rows = s.calls().await;
    let delegation = rows.iter().find(|c| c.tool_name == "subagent").unwrap();
    assert_eq!(delegation.decision.as_deref(), Some("auto"), "delegating runs nothing by itself");
    let waiting = rows.iter().find(|c| c.id == first).unwrap();
    assert_eq!((waiting.tool_name.as_str(), waiting.call_id.as_str()), ("write_file", "w1"));
    assert_eq!(s.c.mock.requests_for(Provider::OpenAi).len(), 2, "the sub-agent asked to write");
    assert!(!s.folder.join("one.txt").exists());
    // The dialog is on the parent's page.
    let page = s.c.app.get(&format!("/s/{}", s.c.session), Some(&s.c.s.cookie)).await.text().await.unwrap();
    assert!(page.contains(&format!("/tool-calls/{first}/decision")), "{page}");

    // One approval runs that one call; the next call asks again.
    assert_eq!(s.decide(first, "yes", "").await.status(), 200);
    let second = s.paused().await;
    assert_ne!(second, first);
    let rows = s.calls().await;
    let waiting = rows.iter().find(|c| c.id == second).unwrap();
    assert_eq!(waiting.call_id, "w2");
    assert_eq!(std::fs::read_to_string(s.folder.join("one.txt")).unwrap(), "1");
    assert!(!s.folder.join("two.txt").exists(), "the first approval did not cover the second call");
    assert_eq!(s.c.mock.requests_for(Provider::OpenAi).len(), 2);
    let page = s.c.app.get(&format!("/s/{}", s.c.session), Some(&s.c.s.cookie)).await.text().await.unwrap();
    assert!(page.contains(&format!("/tool-calls/{second}/decision")), "{page}");

    assert_eq!(s.decide(second, "yes", "").await.status(), 200);
    assert_eq!(s.ended().await, "completed");
    assert_eq!(std::fs::read_to_string(s.folder.join("two.txt")).unwrap(), "2");
    let rows = s.calls().await;
    for call in ["w1", "w2"] {
        let row = rows.iter().find(|c| c.call_id == call).unwrap();
        assert_eq!((row.status.as_str(), row.decision.as_deref()), ("executed", Some("yes")), "{call}");
    }
    assert_eq!(rows.iter().find(|c| c.tool_name == "subagent").unwrap().status, "executed");
    assert_eq!(s.c.mock.requests_for(Provider::OpenAi).len(), 4);
    assert_eq!(s.tool_results_sent(3)[0]["content"], "Sub-agent: both written.");
    let path = s.path().await;
    let roles: Vec<Role> = path.iter().map(|m| m.role).collect();
    assert_eq!(roles, vec![Role::User, Role::Assistant, Role::Tool, Role::Assistant]);
    assert_eq!(path[3].text(), "All done.");

    // "No" on a sub-agent's call ends the whole run: nothing written, the model not asked again.
    let n = agent("suggest", |_| {}).await;
    n.c.mock.enqueue(
        Provider::OpenAi,
        calls(&[("s3", "subagent", json!({"task": "Write", "tools": ["write_file"]}))]),
    );
    n.c.mock.enqueue(
        Provider::OpenAi,
        calls(&[("w3", "write_file", json!({"path": "notes/no.txt", "content": "x"}))]),
    );
    n.c.send_ok("Delegate", MODEL).await;
    let call = n.paused().await;
    assert_eq!(n.decide(call, "no", "").await.status(), 200);
    assert_eq!(n.ended().await, "cancelled");
    assert!(!n.folder.join("no.txt").exists());
    assert_eq!(n.c.mock.requests_for(Provider::OpenAi).len(), 2);
    let path = n.path().await;
    let last = path.last().unwrap();
    assert_eq!(last.role, Role::Tool);
    let result = match last.parts.first() {
        Some(arbor::providers::types::Part::ToolResult { content, is_error, .. }) => {
            (content.clone(), *is_error)
        }
        other => panic!("{other:?}"),
    };
    assert!(result.1 && result.0.contains("refused"), "{result:?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_admin_allows_a_host_folder_and_only_that_workspace_may_expose_it() {
    let a = agent("auto-edit", |_| {}).await;
    let host = tempfile::tempdir().unwrap();
    let host_path = host.path().canonicalize().unwrap().to_string_lossy().to_string();
    std::fs::write(host.path().join("readme.txt"), "from the host").unwrap();
    let actor = Actor::for_tests(&a.c.user);
    let session = arbor::domain::sessions::Sessions::new(a.db().clone())
        .get_session(&actor, a.c.session)
        .await
        .unwrap();
    let expose = |roots: &str| arbor::domain::sessions::SessionForm {
        model: MODEL.into(),
        exposed_roots: roots.into(),
        approval_mode: "auto-edit".into(),
        ..Default::default()
    };
    // Not allowed yet: refused.
    let err = arbor::domain::sessions::Sessions::new(a.db().clone())
        .update_session(&actor, a.c.session, &expose(&host_path))
        .await;
    assert!(matches!(err, Err(arbor::domain::DomainError::Invalid(_))), "{err:?}");

    // The admin allows it in the console (the data folder itself is refused).
    let admin = a.c.app.create_user("root@example.com", arbor::domain::accounts::Role::Admin).await;
    let s = a.c.app.login_full(&admin).await;
    let data = a.c.app.state.config.data_dir.canonicalize().unwrap();
    let res =
        a.c.app
            .post_form(
                "/admin/host-folders",
                &format!("workspace_id={}&path={}", session.workspace_id, data.display()),
                Some(&s),
            )
            .await;
    assert_eq!(res.status(), 400);
    let res =
        a.c.app
            .post_form(
                "/admin/host-folders",
                &format!("workspace_id={}&path={host_path}", session.workspace_id),
                Some(&s),
            )
            .await;
    assert_eq!(res.status(), 200);
    let page = a.c.app.get("/admin/host-folders", Some(&s.cookie)).await.text().await.unwrap();
    assert!(page.contains(&host_path), "{page}");

    // Now the session may expose it and the agent reads from it.
    arbor::domain::sessions::Sessions::new(a.db().clone())
        .update_session(&actor, a.c.session, &expose(&format!("notes\n{host_path}")))
        .await
        .unwrap();
    a.c.mock.enqueue(
        Provider::OpenAi,
        calls(&[("r1", "read_file", json!({"path": format!("{host_path}/readme.txt")}))]),
    );
    a.c.mock.enqueue(Provider::OpenAi, says("Read it."));
    a.c.send_ok("Read the host file", MODEL).await;
    assert_eq!(a.ended().await, "completed");
    assert!(a.tool_results_sent(1)[0]["content"].as_str().unwrap().contains("from the host"));

    // Withdrawn: the next read fails although the session still lists the folder.
    let rows = arbor::storage::repos::agent::all_host_roots(a.db()).await.unwrap();
    let res = a.c.app.post_form(&format!("/admin/host-folders/{}/delete", rows[0].id), "", Some(&s)).await;
    assert_eq!(res.status(), 200);
    a.c.mock.enqueue(
        Provider::OpenAi,
        calls(&[("r2", "read_file", json!({"path": format!("{host_path}/readme.txt")}))]),
    );
    a.c.mock.enqueue(Provider::OpenAi, says("Could not."));
    a.c.send_ok("Again", MODEL).await;
    assert_eq!(a.ended().await, "completed");
    let results = a.tool_results_sent(3);
    let last = results.last().unwrap()["content"].as_str().unwrap();
    assert!(!last.contains("from the host"), "{last}");
}

/// An instance-wide stdio MCP server, added by an admin; returns its id.
pub(crate) async fn add_stdio_server(a: &Agent, name: &str, command: &str, args: &str) -> Uuid {
    let admin =
        a.c.app.create_user(&format!("{name}-admin@example.com"), arbor::domain::accounts::Role::Admin).await;
    let form = arbor::domain::mcp::servers::ServerForm {
        name: name.into(),
        transport: "stdio".into(),
        command: command.into(),
        args: args.into(),
        enabled: Some("on".into()),
        ..Default::default()
    };
    a.c.app
        .state
        .mcp
        .create(&Actor::for_tests(&admin).admin().unwrap(), &arbor::domain::audit::Origin::cli(), &form)
        .await
        .unwrap()
        .id
}

/// An instance-wide MCP server running `@modelcontextprotocol/server-everything` over stdio.
async fn add_everything_server(a: &Agent) {
    let bin = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/services/node_modules/.bin/mcp-server-everything");
    assert!(bin.exists(), "run npm ci --prefix tests/services");
    add_stdio_server(a, "everything", &bin.to_string_lossy(), "stdio").await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_mcp_servers_tools_are_offered_and_called_under_the_same_approvals() {
    let a = agent("suggest", |_| {}).await;
    add_everything_server(&a).await;
    let offered = a.c.app.state.engine.mcp().unwrap().tools_for(a.c.user.id).await;
    let names: Vec<&str> = offered.iter().map(|t| t.spec.name.as_str()).collect();
    assert!(names.contains(&"everything__echo"), "{names:?}");
    // Read-only tools of an admin's server run unasked; the others ask like the web does.
    let echo = offered.iter().find(|t| t.spec.name == "everything__echo").unwrap();
    assert_eq!(echo.risk, arbor::tools::Risk::Read);
    let asking =
        offered.iter().find(|t| t.risk != arbor::tools::Risk::Read).expect("a tool that changes something");

    a.c.mock.enqueue(
        Provider::OpenAi,
        calls(&[("m1", "everything__echo", json!({"message": "hi from the model"}))]),
    );
    a.c.mock.enqueue(Provider::OpenAi, says("Echoed."));
    a.c.send_ok("Echo something", MODEL).await;
    assert_eq!(a.ended().await, "completed");
    let first = a.c.mock.requests_for(Provider::OpenAi)[0].json().unwrap();
    assert!(first["tools"].to_string().contains("everything__echo"));
    assert_eq!(a.tool_results_sent(1)[0]["content"], "Echo: hi from the model");
    assert_eq!(a.calls().await[0].decision.as_deref(), Some("auto"));
    assert_eq!(a.c.app.state.engine.mcp().unwrap().running(), vec!["everything".to_string()]);

    // A tool that is not read-only waits for a decision.
    a.c.mock.enqueue(Provider::OpenAi, calls(&[("m2", &asking.spec.name, json!({}))]));
    a.c.send_ok("Use the other tool", MODEL).await;
    a.paused().await;
    a.c.app.state.engine.shutdown_mcp().await;
    assert!(a.c.app.state.engine.mcp().unwrap().running().is_empty());
}

/// server-everything over streamable HTTP on a loopback port.
async fn http_everything() -> (tokio::process::Child, u16) {
    let bin = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/services/node_modules/.bin/mcp-server-everything");
    assert!(bin.exists(), "run npm ci --prefix tests/services");
    let port = std::net::TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port();
    let child = tokio::process::Command::new(bin)
        .arg("streamableHttp")
        .env("PORT", port.to_string())
        .stdin(std::process::Stdio::null())
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .kill_on_drop(true)
        .spawn()
        .unwrap();
    for _ in 0..200 {
        if tokio::net::TcpStream::connect(("127.0.0.1", port)).await.is_ok() {
            return (child, port);
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    panic!("server-everything did not listen on port {port}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_members_own_mcp_server_is_guarded_at_save_and_at_every_connect() {
    let (_server, port) = http_everything().await;
    let url = format!("http://127.0.0.1:{port}/mcp");
    let enc = |s: &str| s.replace(':', "%3A").replace('/', "%2F");

    // Without an allowed range a loopback URL is refused when saved.
    let a = agent("full-auto", |_| {}).await;
    let res = a.c.app.post_form("/settings/mcp", &format!("name=mine&url={}", enc(&url)), Some(&a.c.s)).await;
    assert_eq!(res.status(), 400);
    assert!(res.text().await.unwrap().contains("loopback"));
    assert!(a.c.app.state.mcp.list_own(&Actor::for_tests(&a.c.user)).await.unwrap().is_empty());

    // A row changed behind the form's back (SECURITY 6) is refused at connect: no tools offered.
    {
        use sea_orm::{ActiveModelTrait, Set};
        let now = chrono::Utc::now();
        arbor::storage::entities::mcp_server::ActiveModel {
            id: Set(Uuid::now_v7()),
            owner_id: Set(Some(a.c.user.id)),
            name: Set("sneaky".into()),
            transport: Set("http".into()),
            command: Set(String::new()),
            args: Set("[]".into()),
            url: Set(url.clone()),
            enabled: Set(true),
            secret_id: Set(None),
            secret_names: Set("[]".into()),
            group_id: Set(None),
            workspace_id: Set(None),
            created_at: Set(now),
            updated_at: Set(now),
        }
        .insert(a.db())
        .await
        .unwrap();
    }
    let offered = a.c.app.state.engine.mcp().unwrap().tools_for(a.c.user.id).await;
    assert!(offered.iter().all(|t| !t.spec.name.starts_with("sneaky__")), "{offered:?}");

    // With the range allowed by the admin, the member's server works, with its header stored.
    let b = agent("full-auto", |c| c.llm.member_base_url_allow = vec!["127.0.0.0/8".into()]).await;
    let res =
        b.c.app
            .post_form(
                "/settings/mcp",
                &format!("name=mine&url={}&secrets={}", enc(&url), "X-Api-Key%3A%20secret-header-value"),
                Some(&b.c.s),
            )
            .await;
    assert_eq!(res.status(), 200);
    let page = res.text().await.unwrap();
    assert!(page.contains("X-Api-Key") && !page.contains("secret-header-value"), "{page}");
    b.c.mock.enqueue(Provider::OpenAi, calls(&[("e1", "mine__echo", json!({"message": "mine"}))]));
    b.c.mock.enqueue(Provider::OpenAi, says("Done."));
    b.c.send_ok("Use my server", MODEL).await;
    assert_eq!(b.ended().await, "completed");
    assert_eq!(b.tool_results_sent(1)[0]["content"], "Echo: mine");
    // Another member does not get it.
    let other = b.c.app.create_user("bob@example.com", arbor::domain::accounts::Role::Member).await;
    let mcp = b.c.app.state.engine.mcp().unwrap();
    let theirs = mcp.tools_for(other.id).await;
    assert!(theirs.iter().all(|t| !t.spec.name.starts_with("mine__")));
    shared_with_a_group_it_reaches_the_groups_agents_and_never_shows_its_headers(&b, &other).await;
    b.c.app.state.engine.shutdown_mcp().await;
}

/// The owner shares their server with a group they are in: its members' agents get the tools,
/// their settings list it without its headers; unsharing or deleting the group ends it.
async fn shared_with_a_group_it_reaches_the_groups_agents_and_never_shows_its_headers(
    b: &Agent,
    other: &arbor::domain::accounts::User,
) {
    use arbor::domain::audit::Origin;
    let (app, db) = (&b.c.app, b.db());
    let mcp = app.state.engine.mcp().unwrap();
    let root = app.create_user("root@example.com", arbor::domain::accounts::Role::Admin).await;
    let proof = Actor::for_tests(&root).admin().unwrap();
    let platform = app.state.teams.groups.create(&proof, &Origin::cli(), "platform").await.unwrap();
    let elsewhere = app.state.teams.groups.create(&proof, &Origin::cli(), "elsewhere").await.unwrap();
    for email in [&b.c.user.email, &other.email] {
        app.state.teams.groups.add_member(&proof, &Origin::cli(), platform.id, email).await.unwrap();
    }
    let server = app.state.mcp.list_own(&Actor::for_tests(&b.c.user)).await.unwrap()[0].id;
    async fn share_as_to(
        app: &crate::support::TestApp,
        server: Uuid,
        what: &str,
        body: String,
        s: &crate::support::TestSession,
    ) -> reqwest::Response {
        app.post_form(&format!("/settings/mcp/{server}/{what}"), &body, Some(s)).await
    }
    let share = |body: String, s| share_as_to(app, server, "share", body, s);
    // Not a group of the owner's, not a group at all: refused with a reason; another member: 404.
    for body in [format!("group={}", elsewhere.id), "group=not-a-uuid".into()] {
        let res = share(body.clone(), &b.c.s).await;
        assert_eq!(res.status(), 400, "{body}");
        assert!(res.text().await.unwrap().contains("one of your groups"));
    }
    let other_s = app.login_full(other).await;
    assert_eq!(share(format!("group={}", platform.id), &other_s).await.status(), 404);
    assert_eq!(share("nothing=1".into(), &b.c.s).await.status(), 400);
    assert!(mcp.tools_for(other.id).await.iter().all(|t| !t.spec.name.starts_with("mine__")));

    let res = share(format!("group={}", platform.id), &b.c.s).await;
    assert_eq!(res.status(), 200);
    assert!(res.text().await.unwrap().contains("Shared: the group"));
    let theirs = mcp.tools_for(other.id).await;
    let echo =
        theirs.iter().find(|t| t.spec.name == "mine__echo").expect("the group's member gets its tools");
    assert_eq!(echo.risk, arbor::tools::Risk::Network, "asked before every call");
    let (id, tool) = echo.mcp.clone().unwrap();
    let out = mcp.call(other.id, id, &tool, &json!({"message": "from bob"})).await;
    assert_eq!(out.content, "Echo: from bob");
    let page = app.get("/settings/mcp", Some(&other_s.cookie)).await.text().await.unwrap();
    assert!(page.contains("shared-mcp-list") && page.contains("<code>mine</code>"), "{page}");
    assert!(!page.contains("secret-header-value") && !page.contains("X-Api-Key"), "{page}");

    // Each reply's list of servers is kept between writes: a member who leaves the group loses
    // the tools at once, and has them again at once when added back.
    app.state.teams.groups.remove_member(&proof, &Origin::cli(), platform.id, other.id).await.unwrap();
    assert!(mcp.tools_for(other.id).await.iter().all(|t| !t.spec.name.starts_with("mine__")));
    app.state.teams.groups.add_member(&proof, &Origin::cli(), platform.id, &other.email).await.unwrap();
    assert!(mcp.tools_for(other.id).await.iter().any(|t| t.spec.name == "mine__echo"));

    // Shared with nobody again, or the group deleted: gone from their agent.
    assert_eq!(share("group=".into(), &b.c.s).await.status(), 200);
    assert!(mcp.tools_for(other.id).await.iter().all(|t| !t.spec.name.starts_with("mine__")));
    assert_eq!(share(format!("group={}", platform.id), &b.c.s).await.status(), 200);
    app.state.teams.groups.delete(&proof, &Origin::cli(), platform.id).await.unwrap();
    assert!(mcp.tools_for(other.id).await.iter().all(|t| !t.spec.name.starts_with("mine__")));
    let audit = arbor::storage::repos::audit::list(db, &Default::default(), 100).await.unwrap();
    assert!(audit.iter().any(|e| e.action == "mcp.own.share"));

    // Attached to the owner's workspace instead: runs there get it, whoever starts them, and
    // nowhere else.
    let ws = arbor::domain::sessions::Sessions::new(db.clone())
        .get_session(&Actor::for_tests(&b.c.user), b.c.session)
        .await
        .unwrap()
        .workspace_id;
    let (bobs_ws, _) = app.create_session(other).await;
    let attach = |body: String, s| share_as_to(app, server, "workspace", body, s);
    for body in ["workspace=not-a-uuid".to_string(), format!("workspace={bobs_ws}")] {
        let res = attach(body.clone(), &b.c.s).await;
        assert_eq!(res.status(), 400, "{body}");
        assert!(res.text().await.unwrap().contains("one of your workspaces"));
    }
    assert_eq!(attach(format!("workspace={bobs_ws}"), &other_s).await.status(), 404);
    assert_eq!(attach(format!("workspace={ws}"), &b.c.s).await.status(), 200);
    let in_ws = mcp.tools_in(other.id, Some(ws)).await;
    let echo =
        in_ws.iter().find(|t| t.spec.name == "mine__echo").expect("runs in the workspace get its tools");
    let (id, tool) = echo.mcp.clone().unwrap();
    assert_eq!(
        mcp.call_in(other.id, Some(ws), id, &tool, &json!({"message": "in ws"})).await.content,
        "Echo: in ws"
    );
    assert!(mcp.tools_in(other.id, Some(bobs_ws)).await.iter().all(|t| !t.spec.name.starts_with("mine__")));
    assert!(mcp.call(other.id, id, &tool, &json!({"message": "elsewhere"})).await.is_error);
    assert_eq!(attach("workspace=".into(), &b.c.s).await.status(), 200);
    assert!(mcp.tools_in(other.id, Some(ws)).await.iter().all(|t| !t.spec.name.starts_with("mine__")));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_server_that_cannot_start_is_left_out_and_not_retried_on_every_run() {
    let a = agent("suggest", |_| {}).await;
    let dir = tempfile::tempdir().unwrap();
    let starts = dir.path().join("starts");
    add_stdio_server(&a, "broken", "/bin/sh", &format!("-c\necho started >> '{}'; exit 1", starts.display()))
        .await;
    let mcp = a.c.app.state.engine.mcp().unwrap();
    assert!(mcp.tools_for(a.c.user.id).await.is_empty());
    // The run still works, with the built-in tools, and the broken server is not tried again.
    a.c.mock.enqueue(Provider::OpenAi, says("Fine without it."));
    a.c.send_ok("Hello", MODEL).await;
    assert_eq!(a.ended().await, "completed");
    let offered = a.c.mock.requests_for(Provider::OpenAi)[0].json().unwrap()["tools"].to_string();
    assert!(offered.contains("read_file") && !offered.contains("broken__"), "{offered}");
    let tries = std::fs::read_to_string(&starts).unwrap_or_default().lines().count();
    assert!(tries >= 1, "the server was tried");
    assert!(mcp.tools_for(a.c.user.id).await.is_empty());
    assert_eq!(
        std::fs::read_to_string(&starts).unwrap_or_default().lines().count(),
        tries,
        "not retried within a minute"
    );
}

/// SECURITY.md 43 through the real server: a command the agent runs (in the sandbox, as a
/// full-auto session runs it) sees none of the server's environment, no master key, no provider
/// key, no configuration and no data folder: not by `env`, not in `/proc/self/environ`, not in any
/// other process's environment it can see, not by reading the files.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_command_the_agent_runs_sees_no_key_config_or_server_environment() {
    let a = agent("full-auto", |_| {}).await;
    let c = &a.c;
    let data_dir = std::fs::canonicalize(&c.app.state.config.data_dir).unwrap();
    let key_file = arbor::vault::default_key_file(&data_dir);
    let key = std::fs::read_to_string(&key_file).unwrap();
    assert!(key.trim().len() >= 32, "the master key file holds the key");
    // What the server's process environment holds that a child must not inherit: cargo's
    // variables for this test process, whose environment is the server's.
    assert!(std::env::var("CARGO_MANIFEST_DIR").is_ok());
    let command = format!(
        "env; echo ===; tr '\\0' '\\n' < /proc/self/environ; echo ===; \
         for p in /proc/[0-9]*; do tr '\\0' '\\n' < $p/environ 2>/dev/null; done; echo ===; \
         cat '{key}' 2>&1; ls -A '{data}' 2>&1; echo END",
        key = key_file.display(),
        data = data_dir.display()
    );
    c.mock
        .enqueue(Provider::OpenAi, calls(&[("call_env", "run_shell_command", json!({"command": command}))]));
    c.mock.enqueue(Provider::OpenAi, says("Seen."));
    c.send_ok("Show me the environment", MODEL).await;
    assert_eq!(a.ended().await, "completed");
    let results = a.tool_results_sent(1);
    let output = results[0]["content"].as_str().unwrap();
    assert!(output.contains("exit code") && output.contains("END"), "the command ran: {output}");
    assert!(output.contains("PATH=/usr/local/bin:/usr/bin:/bin"), "{output}");
    for secret in [
        key.trim(),
        "CARGO_",
        "ARBOR_",
        "RUST_",
        "SECRETKEY",
        "arbor.db",
        "sqlite:",
        "postgres://",
        "index",
        "blobs",
    ] {
        assert!(!output.contains(secret), "{secret:?} reached the command: {output}");
    }
    // The data folder is masked: the key file is not there, and only the workspace's own
    // mount point shows.
    assert!(output.contains("master.key: No such file or directory"), "{output}");
}

/// The runs a session page reads in one statement: a run waiting for a decision (whether or not
/// it is the latest) and the latest run, each found, and none when there are none.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_waiting_and_the_latest_run_are_read_together() {
    use arbor::storage::repos::agent::{await_confirmation, end_run};
    use arbor::storage::repos::run_state::awaiting_and_latest_run;
    let app = crate::support::TestApp::spawn().await;
    let user = app.create_user("ada@example.com", arbor::domain::accounts::Role::Member).await;
    let (_, session) = app.create_session(&user).await;
    let db = &app.state.db;
    assert!(matches!(awaiting_and_latest_run(db, session).await.unwrap(), (None, None)));

    let (first, _, answer) = crate::support::seed_turn(db, session, user.id, None, "hello").await;
    let (waiting, latest) = awaiting_and_latest_run(db, session).await.unwrap();
    assert!(waiting.is_none(), "a running run is not waiting");
    assert_eq!(latest.map(|r| r.id), Some(first));

    await_confirmation(db, first).await.unwrap();
    let (waiting, latest) = awaiting_and_latest_run(db, session).await.unwrap();
    assert_eq!(waiting.map(|r| (r.id, r.status)), Some((first, "awaiting_confirmation".to_string())));
    assert_eq!(latest.map(|r| r.id), Some(first), "the waiting run is also the latest");

    // Run ids are time-ordered; a later turn is the latest run.
    tokio::time::sleep(Duration::from_millis(5)).await;
    let (second, _, _) = crate::support::seed_turn(db, session, user.id, Some(answer), "again").await;
    end_run(db, second, "failed", Some("upstream")).await.unwrap();
    let (waiting, latest) = awaiting_and_latest_run(db, session).await.unwrap();
    assert_eq!(waiting.map(|r| r.id), Some(first), "an older run still waits");
    assert_eq!(latest.map(|r| (r.id, r.status)), Some((second, "failed".to_string())));

    end_run(db, first, "cancelled", None).await.unwrap();
    let (waiting, latest) = awaiting_and_latest_run(db, session).await.unwrap();
    assert!(waiting.is_none());
    assert_eq!(latest.map(|r| r.id), Some(second));
}
