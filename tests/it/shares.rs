//! Shared workspaces: each role may do what it says and no more, runs and messages record who
//! made them, a revoked share ends the live stream at once, and bad share input is refused.

use std::time::Duration;

use arbor::domain::accounts::{Actor, Role};
use arbor::domain::audit::Origin;
use uuid::Uuid;

use crate::runs::{Chat, chat_with, form, streaming_id};
use crate::support::TestSession;
use crate::support::mock_upstream::{Provider, Reply};
use crate::support::sse_client::SseReader;

const MODEL: &str = "openai/gpt-4o-mini";

struct Team {
    c: Chat,
    workspace: Uuid,
    viewer: TestSession,
    editor: TestSession,
    editor_id: Uuid,
    stranger: TestSession,
}

/// Ada owns the chat's workspace and shares it with Vic (viewer, by email) and the group
/// "platform" (editor), which Eve is in; Sam has nothing.
async fn team() -> Team {
    team_with(|_| {}).await
}

async fn team_with(adjust: impl FnOnce(&mut arbor::config::Config)) -> Team {
    let c = chat_with(adjust).await;
    let db = &c.app.state.db;
    let admin = c.app.create_user("root@example.com", Role::Admin).await;
    let vic = c.app.create_user("vic@example.com", Role::Member).await;
    let eve = c.app.create_user("eve@example.com", Role::Member).await;
    let sam = c.app.create_user("sam@example.com", Role::Member).await;
    let proof = Actor::for_tests(&admin).admin().unwrap();
    let platform = c.app.state.teams.groups.create(&proof, &Origin::cli(), "platform").await.unwrap();
    c.app.state.teams.groups.add_member(&proof, &Origin::cli(), platform.id, &eve.email).await.unwrap();
    let workspace = arbor::domain::sessions::Sessions::new(db.clone())
        .get_session(&Actor::for_tests(&c.user), c.session)
        .await
        .unwrap()
        .workspace_id;
    let share = |body: &'static str| {
        let (app, s) = (&c.app, &c.s);
        async move { app.post_form(&format!("/w/{workspace}/shares"), body, Some(s)).await }
    };
    let res = share("kind=person&who=VIC%40example.com&role=viewer").await;
    assert_eq!(res.status(), 200);
    let html = res.text().await.unwrap();
    assert!(html.contains("Shared as viewer.") && html.contains("vic@example.com"), "{html}");
    let res = share("kind=group&who=Platform&role=editor").await;
    assert_eq!(res.status(), 200);
    assert!(res.text().await.unwrap().contains("Shared as editor."));
    let (viewer, editor, stranger) =
        (c.app.login_full(&vic).await, c.app.login_full(&eve).await, c.app.login_full(&sam).await);
    Team { workspace, viewer, editor, editor_id: eve.id, stranger, c }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn each_role_in_a_shared_workspace_may_do_what_it_says_and_no_more() {
    let t = team().await;
    let (c, ws, s) = (&t.c, t.workspace, t.c.session);
    c.mock.enqueue(Provider::OpenAi, Reply::fixture("openai/text.sse"));
    let first = c.send_ok("the owner asks", MODEL).await;
    c.settled(first).await;

    // The viewer reads the thread, sees who asked, and is offered nothing that changes it.
    let page = c.app.get(&format!("/s/{s}"), Some(&t.viewer.cookie)).await;
    assert_eq!(page.status(), 200);
    let page = page.text().await.unwrap();
    assert!(page.contains("id=\"viewer-note\"") && !page.contains("id=\"composer\""), "{page}");
    assert!(page.contains("asked by ada"), "the thread says who asked");
    assert!(page.contains("shared · viewer"));
    assert!(!page.contains("btn-regenerate") && !page.contains("msg-edit-form"));
    let sidebar = c.app.get("/sidebar", Some(&t.viewer.cookie)).await.text().await.unwrap();
    assert!(
        sidebar.contains(&format!("href=\"/s/{s}\"")) && sidebar.contains("shared · viewer"),
        "{sidebar}"
    );
    let wpage = c.app.get(&format!("/w/{ws}"), Some(&t.viewer.cookie)).await.text().await.unwrap();
    assert!(wpage.contains("Shared with you · viewer") && !wpage.contains("ws-settings"), "{wpage}");
    for (path, body) in [
        (format!("/s/{s}/messages"), form("a viewer asks", "viewer-1", MODEL)),
        (format!("/s/{s}/rename"), "title=Mine".to_string()),
        (format!("/s/{s}/messages/{first}/retry"), String::new()),
        (format!("/s/{s}/stop"), String::new()),
        (format!("/w/{ws}"), "name=Taken&approval_mode=suggest".to_string()),
        (format!("/w/{ws}/shares"), "kind=person&who=sam%40example.com&role=viewer".to_string()),
    ] {
        let res = c.app.post_form(&path, &body, Some(&t.viewer)).await;
        assert_eq!(res.status(), 403, "viewer: {path}");
    }

    // The editor (through the group) asks; the message and the run are theirs.
    c.mock.enqueue(Provider::OpenAi, Reply::fixture("openai/text.sse"));
    let res = c
        .app
        .post_form(&format!("/s/{s}/messages"), &form("the editor asks", "editor-1", MODEL), Some(&t.editor))
        .await;
    assert_eq!(res.status(), 200);
    let answer = c.settled(streaming_id(&res.text().await.unwrap())).await;
    let question = c.messages().await.into_iter().find(|m| m.text() == "the editor asks").unwrap();
    assert_eq!(question.author_id, Some(t.editor_id));
    assert_eq!(answer.author_id, Some(t.editor_id));
    let run = arbor::storage::repos::messages::latest_run_for_message(&c.app.state.db, s, answer.id)
        .await
        .unwrap()
        .unwrap();
    let run = arbor::storage::repos::agent::find_run(&c.app.state.db, s, run).await.unwrap().unwrap();
    assert_eq!(run.owner_id, t.editor_id, "a run is its starter's: their keys, their quota");
    let owner_page = c.app.get(&format!("/s/{s}"), Some(&c.s.cookie)).await.text().await.unwrap();
    assert!(owner_page.contains("asked by eve"), "{owner_page}");
    // Editors may not delete, share or change the workspace.
    for (path, body) in [
        (format!("/s/{s}/delete"), String::new()),
        (format!("/s/{s}/messages/{first}/delete"), String::new()),
        (format!("/w/{ws}/delete"), String::new()),
        (format!("/w/{ws}/shares"), "kind=person&who=sam%40example.com&role=viewer".to_string()),
    ] {
        let res = c.app.post_form(&path, &body, Some(&t.editor)).await;
        assert_eq!(res.status(), 403, "editor: {path}");
    }

    // Someone it is not shared with learns nothing.
    assert_eq!(c.app.get(&format!("/s/{s}"), Some(&t.stranger.cookie)).await.status(), 404);
    assert_eq!(c.app.get(&format!("/w/{ws}"), Some(&t.stranger.cookie)).await.status(), 404);
    let res = c
        .app
        .post_form(&format!("/s/{s}/messages"), &form("hi", "stranger-1", MODEL), Some(&t.stranger))
        .await;
    assert_eq!(res.status(), 404);
    let sidebar = c.app.get("/sidebar", Some(&t.stranger.cookie)).await.text().await.unwrap();
    assert!(!sidebar.contains(&s.to_string()));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn revoking_a_share_ends_the_viewers_live_stream_at_once() {
    let t = team().await;
    let (c, ws, s) = (&t.c, t.workspace, t.c.session);
    c.mock.enqueue(Provider::OpenAi, Reply::Hang);
    let answer = c.send_ok("a long one", MODEL).await;
    let res = c.app.get(&format!("/s/{s}/events?m={answer}"), Some(&t.viewer.cookie)).await;
    assert_eq!(res.status(), 200);
    let mut events = SseReader::new(res);
    let (name, _) = events.next_event().await.unwrap();
    assert_eq!(name, "snapshot", "the viewer follows the run live");
    // A viewer's page that does not follow the live run is told to reload and follow it.
    let watch = |following: &'static str| {
        let req = c
            .app
            .client
            .get(c.app.url(&format!("/s/{s}/pending-watch")))
            .header("Cookie", &t.viewer.cookie)
            .header("X-Arbor-Showing", "")
            .header("X-Arbor-Following", following);
        async move { req.send().await.unwrap() }
    };
    let res = watch("").await;
    assert_eq!(res.status(), 200);
    assert_eq!(res.headers().get("hx-refresh").and_then(|v| v.to_str().ok()), Some("true"));
    assert_eq!(watch("1").await.status(), 204);

    let shares = c.app.state.teams.shares.list(&Actor::for_tests(&c.user), ws).await.unwrap();
    let vic = shares
        .iter()
        .find(|s| matches!(&s.subject, arbor::model::teams::ShareSubject::Person { .. }))
        .unwrap();
    let res = c.app.post_form(&format!("/w/{ws}/shares/{}/delete", vic.id), "", Some(&c.s)).await;
    assert_eq!(res.status(), 200);
    assert!(res.text().await.unwrap().contains("No longer shared."));

    let ended = tokio::time::timeout(Duration::from_secs(10), async {
        while let Some((name, data)) = events.next_event().await {
            if name == "done" {
                return Some(data);
            }
        }
        None
    })
    .await
    .expect("the stream ended at once");
    assert!(ended.is_some_and(|d| d.contains("access-revoked")), "the page says so");
    assert!(events.next_event().await.is_none(), "and the stream is closed");
    // A page with no stream open learns it at its next watch: a 404 whose notice it shows.
    let res = watch("1").await;
    assert_eq!(res.status(), 404);
    assert_eq!(res.headers().get("hx-retarget").and_then(|v| v.to_str().ok()), Some("#thread"));
    assert!(res.text().await.unwrap().contains("no longer shared with you"));
    assert_eq!(c.app.get(&format!("/s/{s}"), Some(&t.viewer.cookie)).await.status(), 404);
    // The editor's access is untouched; the owner's run goes on until stopped.
    assert_eq!(c.app.get(&format!("/s/{s}"), Some(&t.editor.cookie)).await.status(), 200);
    assert!(c.app.post_form(&format!("/s/{s}/stop"), "", Some(&c.s)).await.status().is_success());
    c.settled(answer).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn bad_share_input_is_refused_with_a_reason_and_changes_nothing() {
    let t = team().await;
    let (c, ws) = (&t.c, t.workspace);
    let disabled = c.app.create_user("gone@example.com", Role::Member).await;
    arbor::storage::repos::users::set_status(
        &c.app.state.db,
        disabled.id,
        arbor::domain::accounts::UserStatus::Disabled,
    )
    .await
    .unwrap();
    for (body, says) in [
        ("kind=person&who=nobody%40example.com&role=viewer", "Nobody on this instance has the email"),
        ("kind=person&who=not-an-email&role=viewer", "Give the email of a person"),
        ("kind=person&who=ada%40example.com&role=viewer", "owns this workspace already"),
        ("kind=person&who=gone%40example.com&role=viewer", "is disabled"),
        ("kind=group&who=nope&role=viewer", "There is no group called nope"),
        ("kind=group&who=&role=viewer", "Give the group a name."),
        ("kind=person&who=sam%40example.com&role=admin", "Pick a role"),
        ("kind=robot&who=sam%40example.com&role=viewer", "Share with a person or a group."),
        ("who=sam%40example.com", "Share with a person or a group."),
    ] {
        let res = c.app.post_form(&format!("/w/{ws}/shares"), body, Some(&c.s)).await;
        assert_eq!(res.status(), 400, "{body}");
        assert!(res.text().await.unwrap().contains(says), "{body}");
    }
    let huge = format!("kind=person&role=viewer&who={}", "a".repeat(1 << 20));
    assert!(c.app.post_form(&format!("/w/{ws}/shares"), &huge, Some(&c.s)).await.status().is_client_error());
    let unknown = Uuid::now_v7();
    assert_eq!(
        c.app.post_form(&format!("/w/{ws}/shares/{unknown}"), "role=viewer", Some(&c.s)).await.status(),
        404
    );
    assert_eq!(
        c.app.post_form(&format!("/w/{ws}/shares/{unknown}/delete"), "", Some(&c.s)).await.status(),
        404
    );
    assert_eq!(c.app.post_form(&format!("/w/{ws}/shares/x/delete"), "", Some(&c.s)).await.status(), 404);
    let shares = c.app.state.teams.shares.list(&Actor::for_tests(&c.user), ws).await.unwrap();
    assert_eq!(shares.len(), 2, "only the two good shares: {shares:?}");
    // Changing a role: the editor group becomes viewer, and the editor can no longer send.
    let group = shares
        .iter()
        .find(|s| matches!(&s.subject, arbor::model::teams::ShareSubject::Group { .. }))
        .unwrap();
    let res = c.app.post_form(&format!("/w/{ws}/shares/{}", group.id), "role=viewer", Some(&c.s)).await;
    assert_eq!(res.status(), 200);
    let res = c
        .app
        .post_form(&format!("/s/{}/messages", c.session), &form("hi", "editor-2", MODEL), Some(&t.editor))
        .await;
    assert_eq!(res.status(), 403);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_editor_decides_a_teammates_dialog_the_first_decision_wins_and_every_page_says_who() {
    use crate::agent::{agent, says, write_call};
    let a = agent("suggest", |_| {}).await;
    let c = &a.c;
    let db = &c.app.state.db;
    let eve = c.app.create_user("eve@example.com", Role::Member).await;
    let vic = c.app.create_user("vic@example.com", Role::Member).await;
    let ws = arbor::domain::sessions::Sessions::new(db.clone())
        .get_session(&Actor::for_tests(&c.user), c.session)
        .await
        .unwrap()
        .workspace_id;
    for body in
        ["kind=person&who=eve%40example.com&role=editor", "kind=person&who=vic%40example.com&role=viewer"]
    {
        assert_eq!(c.app.post_form(&format!("/w/{ws}/shares"), body, Some(&c.s)).await.status(), 200);
    }
    let (editor, viewer) = (c.app.login_full(&eve).await, c.app.login_full(&vic).await);
    c.mock.enqueue(Provider::OpenAi, write_call("notes/shared.txt", "together\n"));
    c.mock.enqueue(Provider::OpenAi, says("Written."));
    c.send_ok("Write the shared file", MODEL).await;
    let call = a.paused().await;

    // The viewer sees the dialog but cannot answer it.
    let page = c.app.get(&format!("/s/{}", c.session), Some(&viewer.cookie)).await.text().await.unwrap();
    assert!(page.contains(&format!("id=\"confirm-{call}\"")) && !page.contains("confirm-actions"), "{page}");
    let decide = |s: &TestSession, decision: &'static str| {
        let (app, path) = (&c.app, format!("/s/{}/tool-calls/{call}/decision", c.session));
        let s = s.clone();
        async move { app.post_form(&path, &format!("decision={decision}&scope=session"), Some(&s)).await }
    };
    assert_eq!(decide(&viewer, "yes").await.status(), 403);

    // The editor approves; the owner's later refusal changes nothing.
    assert_eq!(decide(&editor, "yes").await.status(), 200);
    assert_eq!(decide(&c.s, "no").await.status(), 200);
    assert_eq!(a.ended().await, "completed");
    assert!(a.folder.join("shared.txt").exists());
    let calls = a.calls().await;
    assert_eq!((calls[0].decision.as_deref(), calls[0].decided_by), (Some("yes"), Some(eve.id)));
    // The run went on as the owner's (who started it), not the editor's.
    let runs = arbor::storage::repos::agent::latest_run(db, c.session).await.unwrap().unwrap();
    assert_eq!(runs.owner_id, c.user.id);
    for s in [&c.s, &viewer] {
        let poll = c.app.get(&format!("/s/{}/tool-calls/{call}?poll=1", c.session), Some(&s.cookie)).await;
        assert_eq!(poll.status(), 200);
        assert!(poll.text().await.unwrap().contains("approved by eve"), "every page says who decided");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn search_finds_what_is_shared_with_you_until_the_share_is_revoked() {
    let t = team().await;
    let (c, ws) = (&t.c, t.workspace);
    c.mock.enqueue(Provider::OpenAi, Reply::fixture("openai/text.sse"));
    let answer = c.send_ok("the zanzibar plan", MODEL).await;
    c.settled(answer).await;
    c.app.state.search.settle().await;
    let search = |s: &TestSession| {
        let (app, cookie) = (&c.app, s.cookie.clone());
        async move { app.get("/search?q=zanzibar", Some(&cookie)).await.text().await.unwrap() }
    };
    let hit = format!("/s/{}", c.session);
    assert!(search(&t.viewer).await.contains(&hit), "a viewer finds the shared session");
    assert!(search(&t.editor).await.contains(&hit), "so does an editor through a group");
    assert!(!search(&t.stranger).await.contains(&hit), "nobody else does");
    // A person a workspace is shared with who is then disabled (by an admin, or deactivated by
    // SCIM) reaches nothing of it; the share stays, so enabling them again restores it.
    use arbor::domain::accounts::UserStatus;
    let db = c.app.state.db.clone();
    let (vic, _) = arbor::storage::repos::users::find_by_email(&db, "vic@example.com")
        .await
        .unwrap()
        .into_iter()
        .next()
        .unwrap();
    arbor::storage::repos::users::set_status(&db, vic.id, UserStatus::Disabled).await.unwrap();
    assert_eq!(c.app.get(&hit, Some(&t.viewer.cookie)).await.status(), 403);
    let vic_s = c.app.login_full(&vic).await;
    assert!(c.app.get(&hit, Some(&vic_s.cookie)).await.status().is_client_error());
    arbor::storage::repos::users::set_status(&db, vic.id, UserStatus::Active).await.unwrap();
    assert_eq!(c.app.get(&hit, Some(&vic_s.cookie)).await.status(), 200);

    let shares = c.app.state.teams.shares.list(&Actor::for_tests(&c.user), ws).await.unwrap();
    for s in shares {
        let res = c.app.post_form(&format!("/w/{ws}/shares/{}/delete", s.id), "", Some(&c.s)).await;
        assert_eq!(res.status(), 200);
    }
    assert!(!search(&t.viewer).await.contains(&hit), "revoked: out of the results at once");
    assert!(!search(&t.editor).await.contains(&hit));
    assert!(search(&c.s).await.contains(&hit), "the owner still finds it");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn people_a_workspace_is_shared_with_see_its_files_and_nobody_else_does() {
    use crate::files::{chip_ids, png, upload};
    let t = team().await;
    let c = &t.c;
    let res = upload(c, &c.s, "plan.png", png()).await;
    let (upload_id, hash) = chip_ids(&res.text().await.unwrap());
    c.mock.enqueue(Provider::OpenAi, Reply::fixture("openai/text.sse"));
    let body = format!("{}&attachments={upload_id}", form("see the plan", "files-1", MODEL));
    let res = c.app.post_form(&format!("/s/{}/messages", c.session), &body, Some(&c.s)).await;
    assert_eq!(res.status(), 200);
    c.settled(streaming_id(&res.text().await.unwrap())).await;
    let blob = format!("/blobs/{hash}");
    assert_eq!(c.app.get(&blob, Some(&t.viewer.cookie)).await.status(), 200);
    assert_eq!(c.app.get(&blob, Some(&t.editor.cookie)).await.status(), 200);
    assert_eq!(c.app.get(&blob, Some(&t.stranger.cookie)).await.status(), 404);
    let page = c.app.get(&format!("/s/{}", c.session), Some(&t.viewer.cookie)).await.text().await.unwrap();
    assert!(page.contains(&blob), "the viewer's page shows the file");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_editor_starting_a_session_in_a_shared_workspace_twice_gets_one_session() {
    let t = team().await;
    let c = &t.c;
    c.mock.enqueue(Provider::OpenAi, Reply::fixture("openai/text.sse"));
    let body = format!("{}&workspace_id={}", form("a new topic", "editor-new-1", MODEL), t.workspace);
    let first = c.app.post_form("/sessions", &body, Some(&t.editor)).await;
    assert!(first.status().is_success() || first.status().is_redirection(), "{}", first.status());
    let to = |res: &reqwest::Response| {
        res.headers()
            .get("location")
            .or_else(|| res.headers().get("hx-redirect"))
            .map(|v| v.to_str().unwrap().to_string())
    };
    let made = to(&first).expect("sent to the new session");
    // The same submit again (a double click, a retry): the same session, nothing new.
    let again = c.app.post_form("/sessions", &body, Some(&t.editor)).await;
    assert_eq!(to(&again).as_deref(), Some(made.as_str()));
    let id: Uuid = made.trim_start_matches("/s/").parse().unwrap();
    let session = c.app.state.sessions.view_session(&Actor::for_tests(&c.user), id).await.unwrap().0;
    assert_eq!(
        (session.workspace_id, session.owner_id),
        (t.workspace, c.user.id),
        "in the shared workspace, the owner's"
    );
    // Let the answer end before the test's server goes.
    let start = std::time::Instant::now();
    while c.app.state.runs.is_active(id) {
        assert!(start.elapsed() < Duration::from_secs(20), "the answer never ended");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn runs_use_the_starters_keys_unless_the_owner_attaches_a_workspace_key() {
    let t = team_with(|c| c.llm.member_base_url_allow = vec!["127.0.0.0/8".into()]).await;
    let (c, ws, s) = (&t.c, t.workspace, t.c.session);
    let db = &c.app.state.db;
    // Ada keeps a key for her own endpoint "adabox".
    let base = c.mock.url(Provider::OpenAi);
    let body = format!(
        "kind=openai_compatible&name=adabox&base_url={}&label=Ada&key=sk-ada-key-ABCD",
        crate::support::urlencode(&base)
    );
    assert_eq!(c.app.post_form("/settings/keys", &body, Some(&c.s)).await.status(), 200);
    let key = c.app.state.keys.list(&Actor::for_tests(&c.user)).await.unwrap()[0].id;
    let editor_sends = |text: &'static str| {
        let (app, editor) = (&c.app, &t.editor);
        async move {
            let body = form(text, &Uuid::new_v4().simple().to_string(), "adabox/gpt-4o-mini");
            app.post_form(&format!("/s/{s}/messages"), &body, Some(editor)).await
        }
    };
    // Eve, an editor, cannot reach Ada's key: the provider does not exist for her.
    let before = c.mock.requests_for(Provider::OpenAi).len();
    let res = editor_sends("on whose key?").await;
    assert_eq!(res.status(), 400);
    assert!(res.text().await.unwrap().contains("There is no provider"));

    // Only Ada attaches a key, only one of hers; bad input changes nothing.
    let path = format!("/w/{ws}/key");
    for body in ["key=not-a-uuid".to_string(), format!("key={}", Uuid::now_v7())] {
        let res = c.app.post_form(&path, &body, Some(&c.s)).await;
        assert_eq!(res.status(), 400, "{body}");
        assert!(res.text().await.unwrap().contains("Choose one of your keys."));
    }
    assert_eq!(c.app.post_form(&path, &format!("key={key}"), Some(&t.editor)).await.status(), 403);
    assert_eq!(c.app.post_form(&path, &format!("key={key}"), Some(&t.viewer)).await.status(), 403);
    assert_eq!(c.app.post_form(&path, &format!("key={key}"), Some(&t.stranger)).await.status(), 404);
    assert_eq!(c.app.post_form(&path, "nokey=1", Some(&c.s)).await.status(), 400);
    assert!(
        arbor::domain::sessions::Sessions::new(db.clone())
            .get_workspace(&Actor::for_tests(&c.user), ws)
            .await
            .unwrap()
            .key_secret_id
            .is_none()
    );

    let res = c.app.post_form(&path, &format!("key={key}"), Some(&c.s)).await;
    assert_eq!(res.status(), 200);
    let page = res.text().await.unwrap();
    assert!(
        page.contains("id=\"workspace-key\"") && page.contains(&format!("value=\"{key}\" selected")),
        "{page}"
    );

    // Now Eve's run in Ada's workspace goes out on Ada's key, and is still Eve's.
    c.mock.enqueue(Provider::OpenAi, Reply::fixture("openai/text.sse"));
    let res = editor_sends("on Ada's key").await;
    assert_eq!(res.status(), 200);
    let answer = c.settled(streaming_id(&res.text().await.unwrap())).await;
    assert_eq!(answer.status, arbor::domain::sessions::tree::MessageStatus::Complete, "{answer:?}");
    let sent = c.mock.requests_for(Provider::OpenAi);
    assert_eq!(sent.len(), before + 1);
    assert_eq!(sent.last().unwrap().header("authorization"), Some("Bearer sk-ada-key-ABCD"));
    let page = c.app.get(&format!("/s/{s}"), Some(&c.s.cookie)).await.text().await.unwrap();
    assert!(page.contains("asked by eve"), "{page}");

    // Detached: back to each person's own keys.
    assert_eq!(c.app.post_form(&path, "key=", Some(&c.s)).await.status(), 200);
    assert_eq!(editor_sends("and now?").await.status(), 400);
    let actions: Vec<String> = arbor::storage::repos::audit::list(db, &Default::default(), 100)
        .await
        .unwrap()
        .into_iter()
        .map(|e| e.action)
        .collect();
    for action in ["workspace.key.attach", "workspace.key.detach"] {
        assert!(actions.iter().any(|a| a == action), "{action} in {actions:?}");
    }
}

/// The pages teams added run as many queries for many shared workspaces, groups, members and
/// links as for few (the architecture issue's rule).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn team_pages_run_as_many_queries_for_many_items_as_for_few() {
    let t = team().await;
    let (c, s) = (&t.c, t.c.session);
    let db = &c.app.state.db;
    let owner = Actor::for_tests(&c.user);
    let root = c.app.create_user("root2@example.com", Role::Admin).await;
    let root_s = c.app.login_full(&root).await;
    let proof = Actor::for_tests(&root).admin().unwrap();
    let group = c.app.state.teams.groups.create(&proof, &Origin::cli(), "many").await.unwrap();
    c.mock.enqueue(Provider::OpenAi, Reply::fixture("openai/text.sse"));
    let first = c.send_ok("the first question", MODEL).await;
    c.settled(first).await;
    let link_body = "expires=7";
    assert_eq!(
        c.app.post_form(&format!("/s/{s}/messages/{first}/share"), link_body, Some(&c.s)).await.status(),
        200
    );
    let pages = [
        (&t.viewer, "/".to_string()),
        (&t.viewer, format!("/s/{s}")),
        (&t.viewer, format!("/w/{}", t.workspace)),
        (&t.editor, "/settings".to_string()),
        (&c.s, "/settings/links".to_string()),
        (&root_s, "/admin/groups".to_string()),
        (&root_s, format!("/admin/groups/{}", group.id)),
        (&root_s, "/admin/links".to_string()),
    ];
    let mut few = Vec::new();
    for (who, path) in &pages {
        few.push(crate::support::queries_of(&c.app, &who.cookie, path).await);
    }

    // Fifteen more workspaces shared with the viewer, fifteen groups (the editor in each),
    // fifteen members in one group, fifteen links.
    for i in 0..15 {
        let ws = arbor::domain::sessions::Sessions::new(db.clone())
            .create_workspace(&owner, &format!("Shared {i}"))
            .await
            .unwrap();
        arbor::domain::sessions::Sessions::new(db.clone()).create_session(&owner, ws.id, "s").await.unwrap();
        let body = "kind=person&who=VIC%40example.com&role=viewer";
        assert_eq!(c.app.post_form(&format!("/w/{}/shares", ws.id), body, Some(&c.s)).await.status(), 200);
        let g = c.app.state.teams.groups.create(&proof, &Origin::cli(), &format!("g{i}")).await.unwrap();
        c.app.state.teams.groups.add_member(&proof, &Origin::cli(), g.id, "eve@example.com").await.unwrap();
        let p = c.app.create_user(&format!("p{i}@example.com"), Role::Member).await;
        c.app.state.teams.groups.add_member(&proof, &Origin::cli(), group.id, &p.email).await.unwrap();
        let res = c.app.post_form(&format!("/s/{s}/messages/{first}/share"), link_body, Some(&c.s)).await;
        assert_eq!(res.status(), 200);
    }
    for ((who, path), few) in pages.iter().zip(few) {
        let many = crate::support::queries_of(&c.app, &who.cookie, path).await;
        assert_eq!(many, few, "{path}: {few} queries for few items, {many} for many");
    }
}
