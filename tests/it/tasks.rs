//! Tasks and subtasks (issue 19): the agent's `start_task` / `finish_task` / `expand_task` and
//! the composer's `/task` and `/finish`, asserted on exactly what each provider call carries.

use arbor::domain::sessions::tree::{MessageKind, Role};
use serde_json::{Value, json};
use uuid::Uuid;

use crate::agent::{agent, calls, says};
use crate::e2e::openai_text_reply;
use crate::runs::{Chat, chat_with, form};
use crate::support::mock_upstream::Provider;

const MODEL: &str = "openai/gpt-4o-mini";

/// Every message text of a request, for `contains`.
fn carried(body: &Value) -> String {
    body["messages"].to_string()
}

/// The bodies of every request the model received, oldest first.
fn requests(chat: &Chat) -> Vec<Value> {
    chat.mock.requests_for(Provider::OpenAi).iter().map(|r| r.json().unwrap()).collect()
}

/// Types `text` into the composer of `session` as `s`: status and body.
async fn compose(chat: &Chat, session: Uuid, s: &crate::support::TestSession, text: &str) -> (u16, String) {
    let body = form(text, &Uuid::new_v4().simple().to_string(), MODEL);
    let res = chat.app.post_form(&format!("/s/{session}/messages"), &body, Some(s)).await;
    (res.status().as_u16(), res.text().await.unwrap())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_agent_works_in_a_task_and_the_parent_sees_only_its_summary() {
    let a = agent("suggest", |_| {}).await;
    let c = &a.c;
    c.mock.enqueue(Provider::OpenAi, says("Parsers read text."));
    let answer = c.send_ok("What does a parser do?", MODEL).await;
    c.settled(answer).await;

    // The agent opens a task, works in it, and finishes it (a second finish in the same answer
    // is refused); then answers the person from the summary.
    c.mock.enqueue(Provider::OpenAi, calls(&[("c1", "start_task", json!({"goal": "Port the parser"}))]));
    c.mock.enqueue(
        Provider::OpenAi,
        calls(&[
            ("c2", "finish_task", json!({"summary": "Parser ported; 12 tests pass."})),
            ("c3", "finish_task", json!({"summary": "Finished again."})),
        ]),
    );
    c.mock.enqueue(Provider::OpenAi, says("The parser is ported."));
    c.send_ok("Port the parser, as a task.", MODEL).await;
    assert_eq!(a.ended().await, "completed");
    let sent = requests(c);
    let n = sent.len();
    // Inside the task: the parent's context, the task's start and how it ends.
    let inside = carried(&sent[n - 2]);
    assert!(inside.contains("What does a parser do?") && inside.contains("Parsers read text."), "{inside}");
    assert!(inside.contains("A task starts here") && inside.contains("Port the parser"), "{inside}");
    // Past its end: the summary in place of the task's messages.
    let after = carried(&sent[n - 1]);
    assert!(after.contains("Parser ported; 12 tests pass.") && after.contains("A task was done here"));
    assert!(after.contains("What does a parser do?"), "the parent's context stays");
    assert!(!after.contains("Finished again.") && !after.contains("Only one start_task"), "{after}");
    let tools: Vec<&str> = sent[n - 1]["tools"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|t| t["function"]["name"].as_str())
        .collect();
    assert!(["start_task", "finish_task", "expand_task"].iter().all(|t| tools.contains(t)), "{tools:?}");
    let all = c.messages().await;
    let start = all.iter().find(|m| m.kind == MessageKind::TaskStart).expect("a task start");
    let end = all.iter().find(|m| m.kind == MessageKind::TaskEnd).expect("a task end");
    assert_eq!(
        (start.text(), end.text()),
        ("Port the parser".to_string(), "Parser ported; 12 tests pass.".into())
    );
    assert!(after.contains(&start.id.to_string()), "the summary names the task for expand_task");
    // The second finish in one answer was refused, and said why.
    let refused = all
        .iter()
        .flat_map(|m| &m.parts)
        .any(|p| matches!(p, arbor::providers::types::Part::ToolResult { call_id, content, is_error: true, .. } if call_id == "c3" && content.contains("Only one")));
    assert!(refused);

    // Finishing when no task is open is refused (the task was finished already).
    c.mock.enqueue(Provider::OpenAi, calls(&[("c4", "finish_task", json!({"summary": "Once more."}))]));
    c.mock.enqueue(Provider::OpenAi, says("Nothing was open."));
    c.send_ok("Finish it again.", MODEL).await;
    assert_eq!(a.ended().await, "completed");
    assert!(carried(requests(c).last().unwrap()).contains("No task is open"));
    assert_eq!(c.messages().await.iter().filter(|m| m.kind == MessageKind::TaskEnd).count(), 1);

    // expand_task reads the finished task's messages; a bad id is refused.
    c.mock.enqueue(
        Provider::OpenAi,
        calls(&[
            ("c5", "expand_task", json!({"task_id": start.id.to_string()})),
            ("c6", "expand_task", json!({"task_id": "not-a-task"})),
        ]),
    );
    c.mock.enqueue(Provider::OpenAi, says("Read it."));
    c.send_ok("What happened in the task?", MODEL).await;
    assert_eq!(a.ended().await, "completed");
    let last = carried(requests(c).last().unwrap());
    assert!(last.contains("Finished again.") && last.contains("characters 0"), "{last}");
    assert!(last.contains("No task with id"), "{last}");

    // Another member's agent cannot read the task.
    let bob = c.app.create_user("bob@example.com", arbor::domain::accounts::Role::Member).await;
    let bob_s = c.app.login_full(&bob).await;
    let (_, bobs) = c.app.create_session(&bob).await;
    c.mock
        .enqueue(Provider::OpenAi, calls(&[("b1", "expand_task", json!({"task_id": start.id.to_string()}))]));
    c.mock.enqueue(Provider::OpenAi, says("Not mine."));
    let (status, body) = compose(c, bobs, &bob_s, "Read Ada's task.").await;
    assert_eq!(status, 200, "{body}");
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(20);
    while requests(c).last().is_none_or(|r| !carried(r).contains("b1") || !carried(r).contains("Read Ada")) {
        assert!(std::time::Instant::now() < deadline, "Bob's run never called the model again");
        tokio::time::sleep(std::time::Duration::from_millis(20)).await;
    }
    let theirs = carried(requests(c).last().unwrap());
    assert!(theirs.contains("No task with id") && !theirs.contains("Parser ported"), "{theirs}");

    // The tree overview shows the task as a group, done.
    let tree = c.app.get(&format!("/s/{}/tree", c.session), Some(&c.s.cookie)).await.text().await.unwrap();
    assert!(tree.contains("tree-task task-done") && tree.contains("Task done"), "{tree}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_person_starts_a_task_with_slash_task_and_ends_it_with_slash_finish() {
    let chat = chat_with(|_| {}).await;
    let me = (chat.session, &chat.s);
    // Bad input: no goal, nothing open to finish; nothing written, nothing asked.
    let (status, body) = compose(&chat, me.0, me.1, "/task").await;
    assert_eq!(status, 400, "{body}");
    assert!(body.contains("Name the task"), "{body}");
    let (status, body) = compose(&chat, me.0, me.1, "/finish").await;
    assert_eq!(status, 400);
    assert!(body.contains("No task is open"), "{body}");
    let long = format!("/task {}", "g".repeat(2_001));
    assert_eq!(compose(&chat, me.0, me.1, &long).await.0, 400);
    assert!(chat.messages().await.is_empty() && requests(&chat).is_empty());

    chat.mock.enqueue(Provider::OpenAi, openai_text_reply("Draft: 2.0 adds tasks."));
    let (status, page) = compose(&chat, me.0, me.1, "/task Write the changelog").await;
    assert_eq!(status, 200, "{page}");
    assert!(page.contains("msg-task_start") && page.contains("A task started"), "{page}");
    let answer = chat.messages().await.into_iter().find(|m| m.role == Role::Assistant).unwrap();
    chat.settled(answer.id).await;
    let inside = carried(requests(&chat).last().unwrap());
    assert!(inside.contains("A task starts here") && inside.contains("Write the changelog"));

    // /finish without words: the model writes the summary of the task.
    chat.mock.enqueue(Provider::OpenAi, openai_text_reply("Changelog for 2.0 written: tasks."));
    let (status, page) = compose(&chat, me.0, me.1, "/finish").await;
    assert_eq!(status, 200, "{page}");
    assert!(page.contains("msg-task_end") && page.contains("Changelog for 2.0 written"), "{page}");
    let asked = carried(requests(&chat).last().unwrap());
    assert!(asked.contains("The task above is finished") && asked.contains("Draft: 2.0 adds tasks."));
    // Finished twice: refused.
    assert_eq!(compose(&chat, me.0, me.1, "/finish Again.").await.0, 400);

    // The next reply sees the summary, not the task's work.
    chat.mock.enqueue(Provider::OpenAi, openai_text_reply("Publish it."));
    let next = chat.send_ok("What next?", MODEL).await;
    chat.settled(next).await;
    let after = carried(requests(&chat).last().unwrap());
    assert!(after.contains("Changelog for 2.0 written: tasks.") && after.contains("What next?"));
    assert!(!after.contains("Draft: 2.0 adds tasks."), "{after}");

    // A task finished with the person's own words asks the model nothing.
    chat.mock.enqueue(Provider::OpenAi, openai_text_reply("On it."));
    compose(&chat, me.0, me.1, "/task Tag the release").await;
    let answer = chat.messages().await.into_iter().rfind(|m| m.role == Role::Assistant).unwrap();
    chat.settled(answer.id).await;
    let asked = requests(&chat).len();
    let (status, _) = compose(&chat, me.0, me.1, "/finish Tagged v2.0.").await;
    assert_eq!(status, 200);
    assert_eq!(requests(&chat).len(), asked);
    let ends: Vec<String> =
        chat.messages().await.iter().filter(|m| m.kind == MessageKind::TaskEnd).map(|m| m.text()).collect();
    assert_eq!(ends.len(), 2);
    assert!(ends.contains(&"Tagged v2.0.".to_string()));
}
