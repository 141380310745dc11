//! The conversation tree over HTTP: edit and regenerate grow branches, "‹ ›" and the overview
//! switch them, deleting a branch says what goes; titles, settings, system prompt templates,
//! workspaces and the sidebar.

use std::time::Duration;

use arbor::domain::accounts::Actor;
use arbor::domain::sessions::tree::MessageStatus;
use uuid::Uuid;

use crate::runs::{Chat, chat_with, form, streaming_id};
use crate::support::mock_upstream::{Provider, Reply};
use crate::support::urlencode;

const MODEL: &str = "openai/gpt-4o-mini";

async fn chat() -> Chat {
    chat_with(|_| {}).await
}

impl Chat {
    async fn page(&self) -> String {
        let res = self.app.get(&format!("/s/{}", self.session), Some(&self.s.cookie)).await;
        assert_eq!(res.status(), 200);
        res.text().await.unwrap()
    }

    fn actor(&self) -> Actor {
        Actor::for_tests(&self.user)
    }

    async fn path_texts(&self) -> Vec<String> {
        let conv = self.app.state.sessions.conversation(&self.actor(), self.session).await.unwrap();
        conv.path.iter().map(|m| m.text()).collect()
    }

    /// One exchange answered by `openai/text.sse`; returns (question, answer).
    async fn exchange(&self, text: &str) -> (Uuid, Uuid) {
        self.mock.enqueue(Provider::OpenAi, Reply::fixture("openai/text.sse"));
        let answer = self.send_ok(text, MODEL).await;
        let m = self.settled(answer).await;
        assert_eq!(m.status, MessageStatus::Complete, "{m:?}");
        (m.parent_id.unwrap(), answer)
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn editing_and_regenerating_grow_branches_that_can_be_switched() {
    let c = chat().await;
    let (q1, a1) = c.exchange("first question").await;
    let (q2, _a2) = c.exchange("second question").await;
    assert_eq!(c.path_texts().await.len(), 4);

    // Edit the second question: a sibling of it, answered; the old branch stays.
    c.mock.enqueue(Provider::OpenAi, Reply::fixture("openai/text.sse"));
    let res = c
        .app
        .post_form(
            &format!("/s/{}/messages/{q2}/edit", c.session),
            &form("second question, rephrased", "edit-client-1", MODEL),
            Some(&c.s),
        )
        .await;
    assert_eq!(res.status(), 200);
    let html = res.text().await.unwrap();
    assert!(html.contains("id=\"session\""), "the whole session is re-rendered");
    c.settled(streaming_id(&html)).await;
    let path = c.path_texts().await;
    assert_eq!(path[2], "second question, rephrased");
    assert_eq!(c.messages().await.len(), 6, "nothing was lost");
    let page = c.page().await;
    assert!(page.contains("<span class=\"sib-pos\">2 / 2</span>"), "the edited message shows its versions");
    // The same edit posted again (a double click) makes nothing new.
    let again = c
        .app
        .post_form(
            &format!("/s/{}/messages/{q2}/edit", c.session),
            &form("second question, rephrased", "edit-client-1", MODEL),
            Some(&c.s),
        )
        .await;
    assert_eq!(again.status(), 200);
    assert_eq!(c.messages().await.len(), 6);

    // Back to the first version with "‹": the old answer below it is shown again.
    let res = c.post(&format!("/s/{}/messages/{q2}/select", c.session)).await;
    assert_eq!(res.status(), 200);
    assert_eq!(c.path_texts().await[2], "second question");
    // Reloading shows the same path.
    let page = c.page().await;
    assert!(page.contains("<span class=\"sib-pos\">1 / 2</span>"));
    assert!(page.contains("second question</div>"));

    // Regenerate the first answer: a sibling answer; the path now ends there.
    c.mock.enqueue(Provider::OpenAi, Reply::fixture("openai/text.sse"));
    let res = c.post(&format!("/s/{}/messages/{a1}/retry", c.session)).await;
    assert_eq!(res.status(), 200);
    let regenerated = streaming_id(&res.text().await.unwrap());
    c.settled(regenerated).await;
    let conv = c.app.state.sessions.conversation(&c.actor(), c.session).await.unwrap();
    assert_eq!(conv.path.iter().map(|m| m.id).collect::<Vec<_>>(), [q1, regenerated]);
    assert_eq!(conv.siblings[1].position, 2);
    // Session totals are summed by the database over every branch.
    let all = c.messages().await;
    let used: Vec<_> = all.iter().filter_map(|m| m.usage).collect();
    assert_eq!(used.len(), 4, "four answers on all branches");
    assert_eq!(conv.totals.input, used.iter().map(|u| u.input).sum::<u64>());
    assert_eq!(conv.totals.output, used.iter().map(|u| u.output).sum::<u64>());
    assert_eq!(conv.totals.cached, used.iter().map(|u| u.cached).sum::<u64>());
    assert_eq!(conv.totals.cost_micros, used.iter().map(|u| u.cost_micros).sum::<Option<i64>>());
    assert!(conv.totals.input > 0 && conv.totals.cost_micros.is_some());
    // The overview holds every branch: q1 forks into two answers, the first one into two questions.
    assert_eq!(conv.message_count, 7);
    let overview = c.app.state.sessions.tree_overview(&c.actor(), c.session).await.unwrap();
    assert!(overview.iter().any(|r| r.depth == 2), "{overview:?}");
    let res = c.app.get(&format!("/s/{}/tree", c.session), Some(&c.s.cookie)).await;
    assert_eq!(res.status(), 200);
    assert_eq!(res.text().await.unwrap().matches("class=\"tree-node").count(), 7);

    // An empty edit is refused and adds nothing.
    let res = c
        .app
        .post_form(
            &format!("/s/{}/messages/{q1}/edit", c.session),
            &form("  ", "edit-client-3", MODEL),
            Some(&c.s),
        )
        .await;
    assert_eq!(res.status(), 400);
    assert_eq!(c.messages().await.len(), 7);

    // Editing an answer is refused; a message of another session is not found.
    let res = c
        .app
        .post_form(
            &format!("/s/{}/messages/{a1}/edit", c.session),
            &form("x", "edit-client-2", MODEL),
            Some(&c.s),
        )
        .await;
    assert_eq!(res.status(), 400);
    let res = c.post(&format!("/s/{}/messages/{}/select", c.session, Uuid::now_v7())).await;
    assert_eq!(res.status(), 404);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn deleting_a_branch_removes_it_and_says_how_many_go() {
    let c = chat().await;
    let (_q1, a1) = c.exchange("one").await;
    c.exchange("two").await;
    c.exchange("three").await;
    let page = c.page().await;
    // The first answer's branch holds itself and the four messages below it.
    assert!(page.contains("the 4 messages below it? 5 messages will be removed"), "confirmation counts");
    // Refused while an answer is being written.
    c.mock.enqueue(
        Provider::OpenAi,
        Reply::Fixture {
            path: "openai/many_small_chunks.sse".into(),
            chunk_delay_ms: 50,
            first_byte_delay_ms: 0,
        },
    );
    let live = c.send_ok("four", MODEL).await;
    let res = c.post(&format!("/s/{}/messages/{a1}/delete", c.session)).await;
    assert_eq!(res.status(), 409);
    let res = c.post(&format!("/s/{}/stop", c.session)).await;
    assert_eq!(res.status(), 204);
    c.settled(live).await;
    let res = c.post(&format!("/s/{}/messages/{a1}/delete", c.session)).await;
    assert_eq!(res.status(), 200);
    let left = c.messages().await;
    assert_eq!(left.len(), 1, "only the first question is left");
    assert_eq!(left[0].chosen_child_id, None);
    assert_eq!(c.path_texts().await, ["one"]);
}

/// `turns` question/answer pairs in one chain, written straight to the database; returns the root.
async fn seed_chain(c: &Chat, session: Uuid, turns: usize) -> Uuid {
    let mut parent = None;
    let mut first = None;
    for _ in 0..turns {
        let (_, q, a) = crate::support::seed_turn(&c.app.state.db, session, c.user.id, parent, "x").await;
        first.get_or_insert(q);
        parent = Some(a);
    }
    first.unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_long_chain_is_deleted_without_deep_cascades() {
    let c = chat().await;
    // 1,200 messages in one chain: deeper than SQLite's trigger recursion limit (1,000).
    let first = seed_chain(&c, c.session, 600).await;
    let page = c.page().await;
    assert!(page.contains("class=\"older-loader\""), "a long path loads earlier messages on demand");
    // The long session's tree is cached between pages; a new turn is still seen at once.
    c.exchange("the newest turn").await;
    let page = c.page().await;
    assert!(page.contains("the newest turn</div>"), "the page follows the tree after a write");
    assert_eq!(page.matches("<article class=\"msg ").count(), arbor::domain::pages::THREAD_WINDOW);
    let res = c.post(&format!("/s/{}/messages/{first}/delete", c.session)).await;
    assert_eq!(res.status(), 200);
    assert!(c.messages().await.is_empty());
    // And a whole session of them.
    let other = c
        .app
        .state
        .sessions
        .create_session(
            &c.actor(),
            c.app.state.sessions.get_session(&c.actor(), c.session).await.unwrap().workspace_id,
            "Second",
        )
        .await
        .unwrap();
    seed_chain(&c, other.id, 600).await;
    c.app.state.sessions.delete_session(&c.actor(), other.id).await.unwrap();
}

/// A finished message's page reads the session, the skeleton and that message whole in one
/// statement: the conversation equals the one read as skeleton plus a window (every field but the
/// other messages' content), the message equals its row, for a short session and for a long one
/// whose skeleton is cached; a message of another session, and the message for someone who
/// cannot see the session, are not found.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_finished_messages_conversation_is_its_skeleton_and_it_whole_in_one_read() {
    let c = chat().await;
    let (question, answer) = c.exchange("What is said here?").await;
    let state = &c.app.state;
    let sessions = &state.sessions;
    for long in [false, true] {
        if long {
            // Past the skeleton cache's threshold; the page before the last turn fills the cache.
            let parent = c.messages().await.last().map(|m| m.id);
            let mut parent = parent;
            for _ in 0..110 {
                let (_, _, a) = crate::support::seed_turn(&state.db, c.session, c.user.id, parent, "x").await;
                parent = Some(a);
            }
            c.page().await;
        }
        for id in [question, answer] {
            let (conv, message) = sessions.conversation_with(&c.actor(), c.session, id).await.unwrap();
            let row = c.message(id).await;
            assert_eq!(message, row, "the message whole");
            let windowed = sessions.conversation_window(&c.actor(), c.session, None, 0).await.unwrap();
            assert_eq!(conv.session, windowed.session);
            assert_eq!(
                (conv.message_count, conv.totals, conv.role),
                (windowed.message_count, windowed.totals, windowed.role)
            );
            assert_eq!(conv.branch_sizes, windowed.branch_sizes);
            assert_eq!(conv.siblings.len(), windowed.siblings.len());
            assert_eq!(conv.path.len(), windowed.path.len());
            for (a, b) in conv.path.iter().zip(&windowed.path) {
                match a.id == id {
                    true => assert_eq!(a, &row, "on the path, the message carries its content"),
                    false => assert_eq!(a, b, "the rest of the path is the skeleton"),
                }
            }
        }
    }
    // Another member's message, or one of another session, is not found.
    let other = sessions
        .create_session(
            &c.actor(),
            sessions.get_session(&c.actor(), c.session).await.unwrap().workspace_id,
            "Other",
        )
        .await
        .unwrap();
    let err = sessions.conversation_with(&c.actor(), other.id, answer).await.err();
    assert!(matches!(err, Some(arbor::domain::DomainError::NotFound)), "{err:?}");
    let eve = c.app.create_user("eve@example.com", arbor::domain::accounts::Role::Member).await;
    let stranger = arbor::domain::accounts::Actor::for_tests(&eve);
    let err = sessions.conversation_with(&stranger, c.session, answer).await.err();
    assert!(matches!(err, Some(arbor::domain::DomainError::NotFound)), "{err:?}");
    // One statement (the least of a few tries: the search feeder shares the connection).
    let mut least = u64::MAX;
    for _ in 0..5 {
        let before = state.queries.count();
        sessions.conversation_with(&c.actor(), c.session, answer).await.unwrap();
        least = least.min(state.queries.count() - before);
    }
    assert_eq!(least, 1, "the session, the skeleton and the message in one read");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_long_sessions_totals_count_an_answer_that_ended_after_the_page_was_shown() {
    let c = chat().await;
    // Long enough for its skeleton (with every message's usage) to be cached between pages.
    seed_chain(&c, c.session, 110).await;
    c.mock.enqueue(
        Provider::OpenAi,
        Reply::Fixture {
            path: "openai/many_small_chunks.sse".into(),
            chunk_delay_ms: 20,
            first_byte_delay_ms: 0,
        },
    );
    let live = c.send_ok("a question with a long answer", MODEL).await;
    // Shown while the answer streams: cached without its usage.
    assert!(c.page().await.contains("a question with a long answer</div>"));
    let answer = c.settled(live).await;
    let usage = answer.usage.expect("the fixture reports usage");
    assert!(usage.input > 0 && usage.output > 0);
    let all = c.messages().await;
    assert_eq!(all.iter().filter(|m| m.usage.is_some()).count(), 1, "the seeded answers have none");
    let conv = c.app.state.sessions.conversation(&c.actor(), c.session).await.unwrap();
    assert_eq!((conv.totals.input, conv.totals.output), (usage.input, usage.output));
    assert_eq!(conv.message_count, all.len());
    // The answer ends the path, with its size.
    assert_eq!(conv.path.last().map(|m| m.id), Some(live));
    assert!(conv.path.last().and_then(|m| m.tokens).is_some());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn older_messages_load_in_windows() {
    let c = chat().await;
    for i in 0..22 {
        c.exchange(&format!("question {i}")).await;
    }
    let page = c.page().await;
    assert!(!page.contains("question 1</div>"), "the first turns wait for a scroll");
    assert!(page.contains("question 21</div>"));
    let conv = c.app.state.sessions.conversation(&c.actor(), c.session).await.unwrap();
    let first_shown = conv.path[conv.path.len() - arbor::domain::pages::THREAD_WINDOW].id;
    assert!(page.contains(&format!("older?before={first_shown}")));
    let res = c.app.get(&format!("/s/{}/older?before={first_shown}", c.session), Some(&c.s.cookie)).await;
    assert_eq!(res.status(), 200);
    let older = res.text().await.unwrap();
    assert!(older.contains("question 0</div>") && older.contains("question 1</div>"));
    assert!(!older.contains("older-loader"), "nothing older is left");
    let res =
        c.app.get(&format!("/s/{}/older?before={}", c.session, Uuid::now_v7()), Some(&c.s.cookie)).await;
    assert_eq!(res.status(), 404);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_first_exchange_gets_a_proposed_title_unless_the_user_named_it() {
    let c = chat_with(|cfg| cfg.llm.infer_titles = true).await;
    c.mock.enqueue(Provider::OpenAi, Reply::fixture("openai/text.sse"));
    c.mock.enqueue(
        Provider::OpenAi,
        Reply::Sse {
            events: vec![
                "data: {\"id\":\"t\",\"object\":\"chat.completion.chunk\",\"created\":1,\"model\":\"gpt-4o-mini\",\"choices\":[{\"index\":0,\"delta\":{\"content\":\"\\\"Greetings and help\\\"\"},\"finish_reason\":null}]}\n\n".into(),
                "data: {\"id\":\"t\",\"object\":\"chat.completion.chunk\",\"created\":1,\"model\":\"gpt-4o-mini\",\"choices\":[{\"index\":0,\"delta\":{},\"finish_reason\":\"stop\"}],\"usage\":{\"prompt_tokens\":30,\"completion_tokens\":4,\"total_tokens\":34}}\n\ndata: [DONE]\n\n".into(),
            ],
            chunk_delay_ms: 0,
        },
    );
    let answer = c.send_ok("hello there", MODEL).await;
    c.settled(answer).await;
    let session = c.app.state.sessions.get_session(&c.actor(), c.session).await.unwrap();
    assert_eq!(session.title, "Greetings and help");
    let title_call = &c.mock.requests_for(Provider::OpenAi)[1];
    let body = title_call.body_text();
    assert!(body.contains("hello there") && body.contains("six words"), "{body}");
    // A second exchange asks for no title.
    c.exchange("and more").await;
    assert_eq!(c.mock.requests_for(Provider::OpenAi).len(), 3);

    // A title the user set is never replaced: a new session renamed before its first answer ends.
    let (_, second) = c.app.create_session(&c.user).await;
    let res = c.app.post_form(&format!("/s/{second}/rename"), "title=Mine", Some(&c.s)).await;
    assert_eq!(res.status(), 200);
    c.mock.enqueue(Provider::OpenAi, Reply::fixture("openai/text.sse"));
    let res = c
        .app
        .post_form(&format!("/s/{second}/messages"), &form("hi", "title-client-2", MODEL), Some(&c.s))
        .await;
    assert_eq!(res.status(), 200);
    let id = streaming_id(&res.text().await.unwrap());
    for _ in 0..200 {
        let m = c.app.state.sessions.message(&c.actor(), second, id).await.unwrap();
        if m.status != MessageStatus::Streaming && !c.app.state.runs.is_active(second) {
            break;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    let named = c.app.state.sessions.get_session(&c.actor(), second).await.unwrap();
    assert_eq!(named.title, "Mine");
    assert_eq!(c.mock.requests_for(Provider::OpenAi).len(), 4, "no title call for a named session");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_system_prompt_template_is_rendered_previewed_and_checked() {
    let c = chat().await;
    let workspace = c.app.state.sessions.get_session(&c.actor(), c.session).await.unwrap().workspace_id;
    // An exposed folder with an instruction file.
    let folder = arbor::prompting::workspace_dir(&c.app.state.config.data_dir, workspace).join("app");
    std::fs::create_dir_all(&folder).unwrap();
    std::fs::write(folder.join("AGENTS.md"), "Run the tests before you answer.").unwrap();
    let template = "You help {{ user.name }} in {{ workspace.name }} on {{ date }} with {{ model }}.\
{% for f in instructions %}\n[{{ f.path }}] {{ f.content }}{% endfor %}";
    let body = format!("system_prompt={}&exposed_roots=app&temperature=0.3", urlencode(template));
    let res = c.app.post_form(&format!("/s/{}/settings", c.session), &body, Some(&c.s)).await;
    assert_eq!(res.status(), 200);
    // Preview shows the rendered text.
    let res = c.app.post_form(&format!("/s/{}/prompt-preview", c.session), &body, Some(&c.s)).await;
    let preview = res.text().await.unwrap();
    assert!(preview.contains("You help"), "{preview}");
    assert!(preview.contains("in Research on 20"), "{preview}");
    assert!(preview.contains("[app/AGENTS.md] Run the tests before you answer."), "{preview}");
    // The request carries it, with the saved temperature.
    c.exchange("go").await;
    let sent = c.mock.requests_for(Provider::OpenAi)[0].json().unwrap();
    let system = sent["messages"][0]["content"].as_str().unwrap_or_default().to_string();
    assert!(system.starts_with("You help") && system.contains("Run the tests"), "{sent}");
    assert_eq!(sent["temperature"].as_f64().map(|t| (t * 10.0).round()), Some(3.0));
    // A broken template: the preview names the line, saving is refused with a 400.
    let broken = format!("system_prompt={}", urlencode("fine\n{{ user.name "));
    let res = c.app.post_form(&format!("/s/{}/prompt-preview", c.session), &broken, Some(&c.s)).await;
    assert_eq!(res.status(), 200);
    let shown = res.text().await.unwrap();
    assert!(shown.contains("template-error") && shown.contains("Line 2"), "{shown}");
    let res = c.app.post_form(&format!("/s/{}/settings", c.session), &broken, Some(&c.s)).await;
    assert_eq!(res.status(), 400);
    let include = format!("system_prompt={}", urlencode("{% include \"layouts/base.html\" %}"));
    let res = c.app.post_form(&format!("/s/{}/prompt-preview", c.session), &include, Some(&c.s)).await;
    assert!(res.text().await.unwrap().contains("not available"));
    // Folders outside the workspace are refused.
    let res =
        c.app.post_form(&format!("/s/{}/settings", c.session), "exposed_roots=..%2Fetc", Some(&c.s)).await;
    assert_eq!(res.status(), 400);
    let res = c.app.post_form(&format!("/s/{}/settings", c.session), "temperature=7", Some(&c.s)).await;
    assert_eq!(res.status(), 400);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn workspaces_and_the_sidebar() {
    let c = chat().await;
    let db = &c.app.state.db;
    let actor = c.actor();
    let workspace = arbor::domain::sessions::Sessions::new(db.clone())
        .get_session(&actor, c.session)
        .await
        .unwrap()
        .workspace_id;
    for i in 0..24 {
        arbor::domain::sessions::Sessions::new(db.clone())
            .create_session(&actor, workspace, &format!("Session number {i}"))
            .await
            .unwrap();
    }
    // The sidebar shows a page of sessions, newest first, and loads the rest on demand.
    let home = c.app.get("/", Some(&c.s.cookie)).await.text().await.unwrap();
    assert!(home.contains("Session number 23") && !home.contains("Session number 2<"), "paged");
    assert!(home.contains(&format!("/w/{workspace}/sessions?page=1")));
    let more =
        c.app.get(&format!("/w/{workspace}/sessions?page=1"), Some(&c.s.cookie)).await.text().await.unwrap();
    assert!(more.contains("Session number 2<") && more.contains("First session"), "{more}");

    // The open session is listed even when it is older than the first page.
    let page = c.page().await;
    assert!(
        page.contains(&format!("class=\"session-item is-active\" id=\"si-{}\"", c.session)),
        "active listed"
    );

    // Archive hides a session from the sidebar and lists it on the workspace page.
    let res = c.app.post_form(&format!("/s/{}/archive", c.session), "archived=true", Some(&c.s)).await;
    assert_eq!(res.status(), 200);
    let ws_page = c.app.get(&format!("/w/{workspace}"), Some(&c.s.cookie)).await.text().await.unwrap();
    assert!(ws_page.contains("First session") && ws_page.contains("Restore"));
    assert!(ws_page.contains("25 sessions and 0 messages"), "the delete confirmation counts");

    // Settings: name, default model, approval mode, titles; bad input is a 400.
    let res = c
        .app
        .post_form(
            &format!("/w/{workspace}"),
            "name=Lab+notes&default_model=openai%2Fgpt-4o-mini&approval_mode=auto-edit&system_prompt=Be+brief",
            Some(&c.s),
        )
        .await;
    assert_eq!(res.status(), 200);
    let saved =
        arbor::domain::sessions::Sessions::new(db.clone()).get_workspace(&actor, workspace).await.unwrap();
    assert_eq!(
        (saved.name.as_str(), saved.approval_mode.as_str(), saved.infer_titles),
        ("Lab notes", "auto-edit", false)
    );
    assert_eq!(saved.default_model.as_deref(), Some("openai/gpt-4o-mini"));
    let res = c.app.post_form(&format!("/w/{workspace}"), "name=&approval_mode=suggest", Some(&c.s)).await;
    assert_eq!(res.status(), 400);
    let res = c.app.post_form(&format!("/w/{workspace}"), "name=x&approval_mode=yolo", Some(&c.s)).await;
    assert_eq!(res.status(), 400);

    // A new session from the home page starts in the workspace asked for.
    let other =
        arbor::domain::sessions::Sessions::new(db.clone()).create_workspace(&actor, "Other").await.unwrap();
    let home = c.app.get(&format!("/?w={}", other.id), Some(&c.s.cookie)).await.text().await.unwrap();
    assert!(home.contains(&format!("name=\"workspace_id\" value=\"{}\"", other.id)));
    c.mock.enqueue(Provider::OpenAi, Reply::fixture("openai/text.sse"));
    let body = format!("{}&workspace_id={}", form("hi", "ws-client-1", MODEL), other.id);
    let res = c.app.post_form("/sessions", &body, Some(&c.s)).await;
    assert_eq!(res.status(), 303);
    let started = arbor::domain::sessions::Sessions::new(db.clone())
        .workspace_sessions(&actor, other.id, false, 0)
        .await
        .unwrap()
        .0;
    assert_eq!(started.len(), 1);

    // Bad input is refused with a clear status and changes nothing.
    let res = c.app.post_form("/workspaces", "name=", Some(&c.s)).await;
    assert_eq!(res.status(), 400);
    let res = c.app.post_form("/workspaces", &format!("name={}", "x".repeat(201)), Some(&c.s)).await;
    assert_eq!(res.status(), 400);
    let res = c.app.post_form(&format!("/s/{}/rename", c.session), "title=+++", Some(&c.s)).await;
    assert_eq!(res.status(), 400);
    let res = c.app.get(&format!("/w/{}/sessions?page=abc", other.id), Some(&c.s.cookie)).await;
    assert_eq!(res.status(), 400);
    let res = c.app.get(&format!("/w/{}", "not-a-uuid"), Some(&c.s.cookie)).await;
    assert_eq!(res.status(), 404);
    assert_eq!(
        arbor::domain::sessions::Sessions::new(db.clone()).list_workspaces(&actor).await.unwrap().len(),
        2
    );

    // Someone else's workspace cannot be written into.
    let stranger = c.app.create_user("eve@example.com", arbor::domain::accounts::Role::Member).await;
    let eve = c.app.login_full(&stranger).await;
    let body = format!("{}&workspace_id={}", form("hi", "ws-client-2", MODEL), other.id);
    let res = c.app.post_form("/sessions", &body, Some(&eve)).await;
    assert_eq!(res.status(), 404);

    // Deleting the workspace takes its sessions and messages with it.
    let res = c.app.post_form(&format!("/w/{workspace}/delete"), "", Some(&c.s)).await;
    assert_eq!(res.status(), 303);
    assert!(arbor::domain::sessions::Sessions::new(db.clone()).get_session(&actor, c.session).await.is_err());
    assert!(c.messages().await.is_empty());
}

/// The queries of a warm request (`support::queries_of` makes one uncounted request first), so
/// that the copies kept for 2 s (the quota table, own-keys lists) are fresh in both the few and
/// the many measurement. Under load the two measurements can be more than 2 s apart, and a
/// refresh is not an item's query.
async fn queries_of(c: &Chat, path: &str) -> u64 {
    crate::support::queries_of(&c.app, &c.s.cookie, path).await
}

/// The home page (with the sidebar) and the session page each run a bounded number of queries,
/// whatever the number of workspaces, sessions and messages.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn pages_run_as_many_queries_for_many_items_as_for_few() {
    let c = chat().await;
    c.exchange("the only question").await;
    let actor = c.actor();
    let db = &c.app.state.db;
    let second =
        arbor::domain::sessions::Sessions::new(db.clone()).create_workspace(&actor, "Second").await.unwrap();
    arbor::domain::sessions::Sessions::new(db.clone()).create_session(&actor, second.id, "s").await.unwrap();
    let session_page = format!("/s/{}", c.session);
    let (home_few, page_few) = (queries_of(&c, "/").await, queries_of(&c, &session_page).await);

    // Twenty workspaces, one of them with more sessions than the sidebar's first page, and a
    // session of twenty messages.
    for w in 0..18 {
        let ws = arbor::domain::sessions::Sessions::new(db.clone())
            .create_workspace(&actor, &format!("W{w}"))
            .await
            .unwrap();
        for s in 0..3 {
            arbor::domain::sessions::Sessions::new(db.clone())
                .create_session(&actor, ws.id, &format!("S{s}"))
                .await
                .unwrap();
        }
    }
    for s in 0..25 {
        arbor::domain::sessions::Sessions::new(db.clone())
            .create_session(&actor, second.id, &format!("More {s}"))
            .await
            .unwrap();
    }
    for i in 0..9 {
        c.exchange(&format!("question {i}")).await;
    }
    let (home_many, page_many) = (queries_of(&c, "/").await, queries_of(&c, &session_page).await);
    assert_eq!(home_many, home_few, "the home page's queries grow with the items");
    assert_eq!(page_many, page_few, "the session page's queries grow with the items");
    assert!(home_few > 0 && page_few > 0, "the counter counts");
    assert!(home_many <= 12 && page_many <= 25, "home {home_many}, session page {page_many}");
}

/// SECURITY.md 51: hostile templates (doubling, computed separators, huge ranges, nested loops,
/// padding and repeating filters, list growth, output floods) sent to the preview and to the
/// session and workspace settings. Each gets a clear template error, and the server, which
/// renders them in a child process with hard limits, keeps serving: this test process, which
/// the server runs in, would die with it otherwise.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn hostile_templates_get_an_error_and_the_server_keeps_serving() {
    let c = chat().await;
    let session = c.app.state.sessions.get_session(&c.actor(), c.session).await.unwrap();
    let double = |times: u32, then: &str| {
        format!(
            "{{% set_global s = \"0123456789abcdef\" %}}{{% for i in range(end={times}) %}}\
             {{% set_global s = s ~ s %}}{{% endfor %}}{then}"
        )
    };
    let bombs = [
        double(40, "{{ s | length }}"),
        double(17, "{{ range(end=100000) | join(sep=s) | length }}"),
        double(40, "{{ s | upper }}"),
        double(22, "{{ s | replace(from=\"0\", to=\"0123456789\") | length }}"),
        double(40, "{{ s | truncate(length=10) }}"),
        double(40, "{{ s | reverse }}"),
        double(40, "{{ s | title }}"),
        double(40, "{{ s | wordcount }}"),
        double(25, "{{ s ~ s ~ s ~ s ~ s ~ s ~ s ~ s }}"),
        double(14, "{{ s }}"),
        "{{ range(end=100000) | join(sep=range(end=100000) | join(sep=\",\")) | length }}".to_string(),
        "{% set_global l = [] %}{% for i in range(end=100000) %}\
         {% set_global l = l | concat(with=range(end=100000)) %}{% endfor %}{{ l | length }}"
            .to_string(),
        "{% set_global s = \"\" %}{% for i in range(end=100000) %}\
         {% set_global s = s ~ \"0123456789abcdefghijklmnopqrstuvwxyz\" %}{% endfor %}{{ s | length }}"
            .to_string(),
        "{% for i in range(end=100000) %}{{ roots }}{{ instructions }}{% endfor %}".to_string(),
        "{{ range(end=100000000) | length }}".to_string(),
        "{% for i in range(end=9) %}{% for j in range(end=9) %}x{% endfor %}{% endfor %}".to_string(),
        "{% include \"layouts/base.html\" %}".to_string(),
        "{% macro m() %}{{ self::m() }}{% endmacro m %}{{ self::m() }}".to_string(),
        "{% extends \"layouts/base.html\" %}".to_string(),
        "{{ user.name ".to_string(),
        "{% for i in range(end=3) %}never closed".to_string(),
        "{{ 9223372036854775807 * 9223372036854775807 * 9223372036854775807 }}".to_string(),
    ];
    assert!(bombs.len() >= 20);
    for bomb in &bombs {
        let body = format!("system_prompt={}", urlencode(bomb));
        let res = c.app.post_form(&format!("/s/{}/prompt-preview", c.session), &body, Some(&c.s)).await;
        assert_eq!(res.status(), 200, "{bomb}");
        let shown = res.text().await.unwrap();
        assert!(shown.contains("template-error"), "no template error for {bomb}: {shown}");
        let res = c.app.post_form(&format!("/s/{}/settings", c.session), &body, Some(&c.s)).await;
        assert_eq!(res.status(), 400, "session settings took {bomb}");
        let res = c
            .app
            .post_form(
                &format!("/w/{}", session.workspace_id),
                &format!("name=Research&default_model=&approval_mode=suggest&{body}"),
                Some(&c.s),
            )
            .await;
        assert_eq!(res.status(), 400, "workspace settings took {bomb}");
        assert_eq!(c.app.get("/healthz", None).await.status(), 200, "after {bomb}");
    }
    // Ordinary templates still render and save, and a message still goes out.
    let body = format!("system_prompt={}", urlencode("You help {{ user.name }}."));
    let res = c
        .app
        .post_form(
            &format!("/w/{}", session.workspace_id),
            &format!("name=Research&default_model=&approval_mode=suggest&{body}"),
            Some(&c.s),
        )
        .await;
    assert!(res.status().is_success() || res.status().is_redirection(), "{}", res.status());
    let res = c.app.post_form(&format!("/s/{}/settings", c.session), &body, Some(&c.s)).await;
    assert_eq!(res.status(), 200);
    let res = c.app.post_form(&format!("/s/{}/prompt-preview", c.session), &body, Some(&c.s)).await;
    assert!(res.text().await.unwrap().contains("You help"));
    c.exchange("still there?").await;
}
