//! Managing a long session's context (issue 19): `/compress`, `/clear`, `/clearblobs` and
//! automatic compaction, asserted on exactly what each provider call carries.

use arbor::domain::sessions::tree::{MessageKind, Role};
use serde_json::Value;
use uuid::Uuid;

use crate::e2e::openai_text_reply;
use crate::runs::{Chat, chat_with, form};
use crate::support::mock_upstream::{Provider, Reply};

const MODEL: &str = "openai/gpt-4o-mini";

/// Every text the request carries (system prompt and each message's text), for `contains`.
fn carried(body: &Value) -> String {
    let mut out = body["messages"].to_string();
    out.push_str(&body["system"].to_string());
    out
}

impl Chat {
    /// Sends a message and waits for its (queued) answer `reply`.
    async fn turn(&self, text: &str, reply: &str) {
        self.mock.enqueue(Provider::OpenAi, openai_text_reply(reply));
        let answer = self.send_ok(text, MODEL).await;
        let done = self.settled(answer).await;
        assert_eq!(done.text(), reply);
    }

    /// Types `command` into the composer: status and fragment.
    async fn command(&self, command: &str) -> (u16, String) {
        let body = form(command, &Uuid::new_v4().simple().to_string(), MODEL);
        let res = self.app.post_form(&format!("/s/{}/messages", self.session), &body, Some(&self.s)).await;
        (res.status().as_u16(), res.text().await.unwrap())
    }

    /// The body of the latest request the model received.
    fn last_request(&self) -> Value {
        self.mock.requests_for(Provider::OpenAi).last().expect("a request").json().unwrap()
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn compress_clear_and_clearblobs_bound_what_each_call_carries() {
    let chat = chat_with(|_| {}).await;
    // Nothing to compress or clear in an empty session; nothing asked of the model.
    let (status, body) = chat.command("/compress").await;
    assert_eq!(status, 400, "{body}");
    assert!(body.contains("nothing to compress"), "{body}");
    assert_eq!(chat.command("/clear").await.0, 400);
    assert!(chat.mock.requests_for(Provider::OpenAi).is_empty());

    chat.turn("Apples: which keep longest?", "Russets keep longest.").await;
    chat.turn("And pears?", "Conference pears keep well.").await;

    // A focus past its limit is refused before any call.
    let long_focus = format!("/compress {}", "x".repeat(2_001));
    assert_eq!(chat.command(&long_focus).await.0, 400);
    // A compression whose call fails writes nothing and says so.
    let before = chat.messages().await.len();
    let calls = chat.mock.requests_for(Provider::OpenAi).len();
    chat.mock.enqueue(
        Provider::OpenAi,
        Reply::json(400, chat.mock.fixture_text("openai/error_400.json").unwrap()),
    );
    let (status, body) = chat.command("/compress").await;
    assert_eq!(status, 502, "{body}");
    assert!(body.contains("nothing was changed"), "{body}");
    assert_eq!(chat.messages().await.len(), before, "a failed compression writes nothing");
    assert_eq!(chat.mock.requests_for(Provider::OpenAi).len(), calls + 1);

    // /compress with a focus: the model sees the whole path and the instruction with the focus.
    chat.mock.enqueue(
        Provider::OpenAi,
        openai_text_reply("## Goals\nStore fruit.\n## Facts\nRussets; Conference pears."),
    );
    let (status, page) = chat.command("/compress the pears above all").await;
    assert_eq!(status, 200, "{page}");
    assert!(page.contains("msg-summary") && page.contains("Conference pears"), "{page}");
    let asked = chat.last_request();
    let text = carried(&asked);
    assert!(text.contains("Apples: which keep longest?") && text.contains("Conference pears keep well."));
    assert!(text.contains("the pears above all") && text.contains("Open questions"), "{text}");
    let all = chat.messages().await;
    let summary = all.iter().find(|m| m.kind == MessageKind::Summary).expect("a summary node");
    assert_eq!(summary.role, Role::System);
    assert_eq!(summary.model.as_deref(), Some(MODEL));
    assert!(summary.usage.is_some(), "the summary's call is metered on it");

    // The next reply starts from the summary: the summarised messages are not sent.
    chat.turn("Which should I eat first?", "The pears.").await;
    let text = carried(&chat.last_request());
    assert!(
        text.contains("Summary of the conversation so far") && text.contains("Russets; Conference pears")
    );
    assert!(text.contains("Which should I eat first?"));
    assert!(
        !text.contains("Apples: which keep longest?") && !text.contains("Conference pears keep well."),
        "{text}"
    );

    // /clear asks nothing of the model; the next reply carries nothing before it.
    let calls = chat.mock.requests_for(Provider::OpenAi).len();
    let (status, page) = chat.command("/clear").await;
    assert_eq!(status, 200, "{page}");
    assert!(page.contains("msg-clear"), "{page}");
    assert_eq!(chat.mock.requests_for(Provider::OpenAi).len(), calls);
    // Nothing to compress right after a clear.
    assert_eq!(chat.command("/compress").await.0, 400);
    chat.turn("A fresh start: plums?", "Plums keep a week.").await;
    let asked = chat.last_request();
    let messages = asked["messages"].as_array().unwrap();
    assert_eq!(messages.len(), 1, "{asked}");
    assert!(carried(&asked).contains("A fresh start: plums?"));
    assert!(
        !carried(&asked).contains("Summary of the conversation") && !carried(&asked).contains("The pears.")
    );

    // Nothing was lost: every message is still in the tree, the boundaries on the path.
    let all = chat.messages().await;
    assert_eq!(all.iter().filter(|m| m.role == Role::User).count(), 4);
    assert_eq!(all.iter().filter(|m| m.kind.is_boundary()).count(), 2);
    // The page shows the boundaries and everything before them.
    let page =
        chat.app.get(&format!("/s/{}", chat.session), Some(&chat.s.cookie)).await.text().await.unwrap();
    assert!(page.contains("msg-summary") && page.contains("msg-clear"));
    assert!(page.contains("Apples: which keep longest?"));
    // The tree overview offers every node, the middle of a long stretch included (S: boundaries).
    let tree =
        chat.app.get(&format!("/s/{}/tree", chat.session), Some(&chat.s.cookie)).await.text().await.unwrap();
    assert_eq!(tree.matches("class=\"tree-node").count(), 10, "{tree}");
    assert!(tree.contains("<details class=\"tree-gap\">") && tree.contains("+4"), "{tree}");
    assert_eq!(tree.matches(">S</button>").count(), 2);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn files_attached_before_clearblobs_are_no_longer_sent() {
    let chat = chat_with(|_| {}).await;
    let res =
        crate::files::upload(&chat, &chat.s, "notes.txt", b"The secret word is juniper.".to_vec()).await;
    assert_eq!(res.status(), 200);
    let (upload, _) = crate::files::chip_ids(&res.text().await.unwrap());
    chat.mock.enqueue(Provider::OpenAi, openai_text_reply("Juniper."));
    let body = format!("{}&attachments={upload}", form("What is the word?", "c1", MODEL));
    let res = chat.app.post_form(&format!("/s/{}/messages", chat.session), &body, Some(&chat.s)).await;
    assert_eq!(res.status(), 200);
    chat.settled(crate::runs::streaming_id(&res.text().await.unwrap())).await;
    assert!(carried(&chat.last_request()).contains("notes.txt"), "the file goes with its message");

    chat.turn("Still there?", "Yes.").await;
    assert!(carried(&chat.last_request()).contains("notes.txt"));
    let (status, page) = chat.command("/clearblobs").await;
    assert_eq!(status, 200, "{page}");
    chat.turn("And now?", "Only words.").await;
    let text = carried(&chat.last_request());
    assert!(!text.contains("notes.txt"), "{text}");
    assert!(text.contains("What is the word?") && text.contains("And now?"), "the words still go: {text}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_context_near_the_window_is_compressed_before_the_reply() {
    let chat = chat_with(|_| {}).await;
    let (workspace, _) = {
        let ws =
            arbor::storage::repos::workspaces::find_session(&chat.app.state.db, chat.user.id, chat.session)
                .await
                .unwrap()
                .unwrap()
                .workspace_id;
        (ws, ())
    };
    // Bad thresholds are refused with a reason; 10 % is the lowest.
    for bad in ["5", "96", "abc", "-1", "1e3"] {
        let body = format!("name=Research&approval_mode=suggest&compact_at_percent={bad}");
        let res = chat.app.post_form(&format!("/w/{workspace}"), &body, Some(&chat.s)).await;
        assert_eq!(res.status(), 400, "{bad}");
        assert!(res.text().await.unwrap().contains("Compress at"), "{bad}");
    }
    let body = "name=Research&approval_mode=suggest&compact_at_percent=10";
    assert_eq!(chat.app.post_form(&format!("/w/{workspace}"), body, Some(&chat.s)).await.status(), 200);

    // gpt-4o-mini's window is 128,000 tokens: 10 % is 12,800, about 51,200 characters.
    let long = format!("Please keep this log: {}", "lorem ipsum ".repeat(5_000));
    chat.turn(&long, "Kept.").await;
    let calls = chat.mock.requests_for(Provider::OpenAi).len();
    chat.mock.enqueue(Provider::OpenAi, openai_text_reply("## Goals\nKeep a long log of lorem ipsum."));
    chat.turn("What did I ask you to keep?", "A log.").await;
    let requests = chat.mock.requests_for(Provider::OpenAi);
    assert_eq!(requests.len(), calls + 2, "a summary call, then the reply");
    let summary_call = carried(&requests[calls].json().unwrap());
    assert!(summary_call.contains("Please keep this log") && summary_call.contains("Open questions"));
    let reply_call = carried(&requests[calls + 1].json().unwrap());
    assert!(
        reply_call.contains("Keep a long log of lorem ipsum")
            && reply_call.contains("What did I ask you to keep?")
    );
    assert!(!reply_call.contains("lorem ipsum lorem ipsum"), "the long message is not sent again");
    // The summary sits between the old path and the new message, marked as automatic.
    let all = chat.messages().await;
    let summary = all.iter().find(|m| m.kind == MessageKind::Summary).expect("a summary");
    assert!(summary.text().contains("Compressed automatically"), "{}", summary.text());
    let question = all.iter().find(|m| m.text() == "What did I ask you to keep?").unwrap();
    assert_eq!(question.parent_id, Some(summary.id));

    // 0 turns it off: the next reply goes whole however long the context is.
    let body = "name=Research&approval_mode=suggest&compact_at_percent=0";
    assert_eq!(chat.app.post_form(&format!("/w/{workspace}"), body, Some(&chat.s)).await.status(), 200);
    chat.turn(&long, "Again.").await;
    let calls = chat.mock.requests_for(Provider::OpenAi).len();
    chat.turn("And now?", "Fine.").await;
    assert_eq!(chat.mock.requests_for(Provider::OpenAi).len(), calls + 1, "no compression when off");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn continue_from_here_branches_below_a_message_without_editing_the_next() {
    let chat = chat_with(|_| {}).await;
    chat.turn("Plan the trip.", "Day one: Lyon.").await;
    chat.turn("Add a day in Turin.", "Day two: Turin.").await;
    let all = chat.messages().await;
    let first_answer = all.iter().find(|m| m.text() == "Day one: Lyon.").unwrap().id;

    // Another member's session, an unknown message, a malformed id: nothing changes.
    let other = chat.app.create_user("bob@example.com", arbor::domain::accounts::Role::Member).await;
    let bob = chat.app.login_full(&other).await;
    let url = format!("/s/{}/messages/{first_answer}/rewind", chat.session);
    assert_eq!(chat.app.post_form(&url, "", Some(&bob)).await.status(), 404);
    let unknown = format!("/s/{}/messages/{}/rewind", chat.session, Uuid::now_v7());
    assert_eq!(chat.post(&unknown).await.status(), 404);
    assert_eq!(chat.post(&format!("/s/{}/messages/not-an-id/rewind", chat.session)).await.status(), 404);

    let res = chat.post(&url).await;
    assert_eq!(res.status(), 200);
    let page = res.text().await.unwrap();
    assert!(page.contains("Day one: Lyon.") && !page.contains("Add a day in Turin."), "the path ends there");
    // A boundary can be written there too, and the next message goes below it.
    assert_eq!(chat.command("/clearblobs").await.0, 200);
    chat.turn("Make it Geneva instead.", "Day two: Geneva.").await;
    let asked = carried(&chat.last_request());
    assert!(asked.contains("Day one: Lyon.") && asked.contains("Make it Geneva instead."));
    assert!(!asked.contains("Turin"), "{asked}");
    // Nothing was lost: the first answer now has two branches, the Turin one intact.
    let all = chat.messages().await;
    assert_eq!(all.iter().filter(|m| m.parent_id == Some(first_answer)).count(), 2);
    assert!(all.iter().any(|m| m.text() == "Day two: Turin."));
    let page =
        chat.app.get(&format!("/s/{}", chat.session), Some(&chat.s.cookie)).await.text().await.unwrap();
    assert!(page.contains("Day two: Geneva.") && !page.contains("Day two: Turin."));
    assert!(page.contains("1 / 2") || page.contains("2 / 2"), "the branch is one sibling over");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_agent_remembers_with_approval_and_the_member_edits_the_memory_in_settings() {
    use crate::agent::{agent, calls, says};
    use serde_json::json;
    let a = agent("suggest", |_| {}).await;
    let c = &a.c;
    let workspace = arbor::storage::repos::workspaces::find_session(&c.app.state.db, c.user.id, c.session)
        .await
        .unwrap()
        .unwrap()
        .workspace_id;

    // A write is decided like a file change: it waits in suggest mode, and runs on "yes".
    c.mock.enqueue(
        Provider::OpenAi,
        calls(&[(
            "call_m1",
            "memory_write",
            json!({"scope": "workspace", "content": "Deploys go out on Tuesdays."}),
        )]),
    );
    c.mock.enqueue(Provider::OpenAi, says("Noted."));
    c.send_ok("Remember that we deploy on Tuesdays.", MODEL).await;
    let call = a.paused().await;
    let settings = c.app.get("/settings/memory", Some(&c.s.cookie)).await.text().await.unwrap();
    assert!(!settings.contains("Deploys go out on Tuesdays."), "nothing is written before the decision");
    assert_eq!(a.decide(call, "yes", "session").await.status(), 200);
    assert_eq!(a.ended().await, "completed");
    let settings = c.app.get("/settings/memory", Some(&c.s.cookie)).await.text().await.unwrap();
    assert!(settings.contains("Deploys go out on Tuesdays."), "{settings}");

    // The member edits their own memory; the agent reads both without asking.
    let body = "scope=member&content=Ada+prefers+short+answers.";
    assert_eq!(c.app.post_form("/settings/memory", body, Some(&c.s)).await.status(), 200);
    c.mock.enqueue(
        Provider::OpenAi,
        calls(&[
            ("call_r1", "memory_read", json!({"scope": "member"})),
            ("call_r2", "memory_read", json!({"scope": "workspace"})),
        ]),
    );
    c.mock.enqueue(Provider::OpenAi, says("Short answers; Tuesdays."));
    c.send_ok("What do you remember?", MODEL).await;
    assert_eq!(a.ended().await, "completed");
    let sent = carried(&c.last_request());
    assert!(
        sent.contains("Ada prefers short answers.") && sent.contains("Deploys go out on Tuesdays."),
        "{sent}"
    );

    // A system prompt template sees both.
    let actor = arbor::domain::accounts::Actor::for_tests(&c.user);
    let form = arbor::domain::sessions::SessionForm {
        model: MODEL.into(),
        exposed_roots: "notes".into(),
        approval_mode: "suggest".into(),
        system_prompt: "Remember: {{ memory.member }} / {{ memory.workspace }}".into(),
        ..Default::default()
    };
    c.app.state.sessions.update_session(&actor, c.session, &form).await.unwrap();
    c.mock.enqueue(Provider::OpenAi, says("Yes."));
    let answer = c.send_ok("Again?", MODEL).await;
    c.settled(answer).await;
    let sent = c.last_request();
    let system = sent["messages"][0]["content"].as_str().unwrap_or_default().to_string();
    assert!(system.contains("Remember: Ada prefers short answers. / Deploys go out on Tuesdays."), "{sent}");

    // Bad input: too long, another member's workspace, a scope that is no workspace.
    let long = format!("scope=member&content={}", "a".repeat(20_001));
    let res = c.app.post_form("/settings/memory", &long, Some(&c.s)).await;
    assert_eq!(res.status(), 400);
    assert!(res.text().await.unwrap().contains("at most 20000 characters"));
    let bob = c.app.create_user("bob@example.com", arbor::domain::accounts::Role::Member).await;
    let bob_s = c.app.login_full(&bob).await;
    let theirs = format!("scope={workspace}&content=mine+now");
    assert_eq!(c.app.post_form("/settings/memory", &theirs, Some(&bob_s)).await.status(), 404);
    assert_eq!(c.app.post_form("/settings/memory", "scope=nope&content=x", Some(&c.s)).await.status(), 404);
    let bobs_page = c.app.get("/settings/memory", Some(&bob_s.cookie)).await.text().await.unwrap();
    assert!(
        !bobs_page.contains("Tuesdays") && !bobs_page.contains("short answers"),
        "memories are their own"
    );
    // Deleting the workspace forgets its memory.
    let res = c.app.post_form(&format!("/w/{workspace}/delete"), "", Some(&c.s)).await;
    assert!(res.status().is_success() || res.status().is_redirection(), "{}", res.status());
    let settings = c.app.get("/settings/memory", Some(&c.s.cookie)).await.text().await.unwrap();
    assert!(!settings.contains("Tuesdays") && settings.contains("Ada prefers short answers."));
    let rows = arbor::storage::repos::memories::all(&c.app.state.db, c.user.id).await.unwrap();
    assert_eq!(rows.len(), 1, "{rows:?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_long_agent_turn_is_compressed_before_its_next_call() {
    use crate::agent::{agent, calls, says};
    let a = agent("auto-edit", |_| {}).await;
    let c = &a.c;
    let workspace = arbor::storage::repos::workspaces::find_session(&c.app.state.db, c.user.id, c.session)
        .await
        .unwrap()
        .unwrap()
        .workspace_id;
    let body = "name=Research&approval_mode=auto-edit&compact_at_percent=10";
    assert_eq!(c.app.post_form(&format!("/w/{workspace}"), body, Some(&c.s)).await.status(), 200);
    // A file whose content alone passes 10 % of gpt-4o-mini's window (12,800 tokens).
    std::fs::create_dir_all(&a.folder).unwrap();
    std::fs::write(a.folder.join("log.txt"), "tick tock\n".repeat(7_000)).unwrap();
    c.mock.enqueue(
        Provider::OpenAi,
        calls(&[("r1", "read_file", serde_json::json!({"path": "notes/log.txt"}))]),
    );
    c.mock.enqueue(Provider::OpenAi, says("## Goals\nRead the log: 7,000 ticks."));
    c.mock.enqueue(Provider::OpenAi, says("The log has 7,000 ticks."));
    c.send_ok("How long is notes/log.txt?", MODEL).await;
    assert_eq!(a.ended().await, "completed");
    let requests = c.mock.requests_for(Provider::OpenAi);
    assert_eq!(requests.len(), 3, "the call, a summary, the next call");
    let summary_call = carried(&requests[1].json().unwrap());
    assert!(summary_call.contains("tick tock") && summary_call.contains("Open questions"));
    let next = carried(&requests[2].json().unwrap());
    assert!(next.contains("Read the log: 7,000 ticks.") && !next.contains("tick tock"), "{next}");
    // The summary sits below the tool's result, and the answer below the summary.
    let all = c.messages().await;
    let summary = all.iter().find(|m| m.kind == MessageKind::Summary).expect("a summary");
    let result = all.iter().find(|m| m.role == Role::Tool).unwrap();
    assert_eq!(summary.parent_id, Some(result.id));
    let answer = all.iter().find(|m| m.text() == "The log has 7,000 ticks.").unwrap();
    assert_eq!(answer.parent_id, Some(summary.id));
}
