//! Export and import: an archive of a member's sessions imported on a fresh instance gives the
//! same trees (every branch, tool calls and decisions, files, settings, templates); ChatGPT's and
//! Open WebUI's exports keep their branches; bad files of every kind are refused with a reason
//! and leave nothing behind; an admin's export of a member's data is audited.

use std::time::{Duration, Instant};

use arbor::domain::accounts::{Actor, Role, User};
use arbor::domain::transfer::{ImportJob, ImportState};
use serde_json::{Value, json};
use uuid::Uuid;

use crate::agent::{agent, says, write_call};
use crate::runs::{form, streaming_id};
use crate::support::TestApp;
use crate::support::mock_upstream::Provider;

const MODEL: &str = "openai/gpt-4o-mini";

/// Sends `body` as an import; returns the status and the answer's text.
async fn post_import(
    app: &TestApp,
    s: &crate::support::TestSession,
    query: &str,
    body: Vec<u8>,
) -> (u16, String) {
    let res = app
        .client
        .post(app.url(&format!("/settings/imports?{query}")))
        .header("Origin", app.origin())
        .header("Cookie", &s.cookie)
        .header("X-CSRF-Token", &s.csrf)
        .body(body)
        .send()
        .await
        .unwrap();
    (res.status().as_u16(), res.text().await.unwrap())
}

/// The job id from its card.
fn job_id(card: &str) -> Uuid {
    let at =
        card.find("id=\"import-").unwrap_or_else(|| panic!("no job card in {card}")) + "id=\"import-".len();
    Uuid::parse_str(&card[at..at + 36]).unwrap()
}

/// Waits for the import to end.
async fn finished(app: &TestApp, user: &User, id: Uuid) -> ImportJob {
    let start = Instant::now();
    loop {
        let job = app.state.transfers.my_import(&Actor::for_tests(user), id).unwrap();
        if !job.running() {
            return job;
        }
        assert!(start.elapsed() < Duration::from_secs(60), "the import never ended: {job:?}");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

/// Imports `body` and waits for the outcome.
async fn import(
    app: &TestApp,
    user: &User,
    s: &crate::support::TestSession,
    name: &str,
    body: Vec<u8>,
) -> ImportJob {
    let (status, card) = post_import(app, s, &format!("name={name}"), body).await;
    assert_eq!(status, 202, "{card}");
    finished(app, user, job_id(&card)).await
}

async fn export(app: &TestApp, cookie: &str, path: &str) -> Vec<u8> {
    let res = app.get(path, Some(cookie)).await;
    assert_eq!(res.status(), 200, "{path}");
    assert_eq!(res.headers()["content-type"], "application/gzip");
    assert!(
        res.headers()["content-disposition"].to_str().unwrap().starts_with("attachment; filename=\"arbor-")
    );
    res.bytes().await.unwrap().to_vec()
}

/// A session's tree as a value free of ids and times: each node with its content, its files,
/// its tool calls and its children in order, the chosen one marked.
async fn tree_shape(app: &TestApp, session: Uuid) -> Value {
    let db = &app.state.db;
    let messages = arbor::storage::repos::messages::session_messages(db, session).await.unwrap();
    let calls = arbor::storage::repos::agent::calls_of_session(db, session).await.unwrap();
    let ids: Vec<Uuid> = messages.iter().map(|m| m.id).collect();
    let files = app.state.files.views_of(&ids).await.unwrap();
    let chat = arbor::storage::repos::workspaces::find_session_by_id(db, session).await.unwrap().unwrap();
    fn node(
        m: &arbor::domain::sessions::tree::Message,
        all: &[arbor::domain::sessions::tree::Message],
        calls: &[arbor::model::agent::ToolCall],
        files: &std::collections::HashMap<Uuid, Vec<arbor::domain::files::FileView>>,
    ) -> Value {
        let children: Vec<Value> = all
            .iter()
            .filter(|c| c.parent_id == Some(m.id))
            .map(|c| json!({"chosen": m.chosen_child_id == Some(c.id), "node": node(c, all, calls, files)}))
            .collect();
        let my_calls: Vec<Value> = calls
            .iter()
            .filter(|c| c.message_id == m.id)
            .map(|c| {
                json!([c.call_id, c.tool_name, c.arguments, c.status, c.decision, c.decided_at.is_some()])
            })
            .collect();
        let my_files: Vec<Value> =
            files.get(&m.id).into_iter().flatten().map(|f| json!([f.hash, f.name, f.mime])).collect();
        json!({
            "role": m.role, "kind": m.kind, "parts": m.parts, "status": m.status, "model": m.model,
            "usage": m.usage.map(|u| [u.input, u.output]), "files": my_files, "calls": my_calls,
            "children": children,
        })
    }
    let roots: Vec<Value> = messages
        .iter()
        .filter(|m| m.parent_id.is_none())
        .map(|m| json!({"active": chat.active_root_id == Some(m.id), "node": node(m, &messages, &calls, &files)}))
        .collect();
    json!({ "title": chat.title, "model": chat.model, "approval": chat.approval_mode, "roots": roots })
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_export_imported_on_a_fresh_instance_gives_the_same_trees_files_calls_and_templates() {
    // A session with a decided tool call, a file, an edited question and a regenerated answer.
    let a = agent("suggest", |_| {}).await;
    let c = &a.c;
    a.c.mock.enqueue(Provider::OpenAi, write_call("notes/a.txt", "hello\n"));
    a.c.mock.enqueue(Provider::OpenAi, says("Done."));
    c.send_ok("Write a file", MODEL).await;
    let call = a.paused().await;
    assert_eq!(a.decide(call, "yes", "").await.status(), 200);
    assert_eq!(a.ended().await, "completed");
    let res = crate::files::upload(c, &c.s, "notes.txt", b"The secret word is juniper.".to_vec()).await;
    assert_eq!(res.status(), 200);
    let (upload, _) = crate::files::chip_ids(&res.text().await.unwrap());
    c.mock.enqueue(Provider::OpenAi, says("Juniper."));
    let body = format!("{}&attachments={upload}", form("What is the word?", "c1", MODEL));
    let res = c.app.post_form(&format!("/s/{}/messages", c.session), &body, Some(&c.s)).await;
    assert_eq!(res.status(), 200);
    let answer = c.settled(streaming_id(&res.text().await.unwrap())).await;
    c.mock.enqueue(Provider::OpenAi, says("Another take."));
    let res = c.post(&format!("/s/{}/messages/{}/retry", c.session, answer.id)).await;
    assert_eq!(res.status(), 200);
    c.settled(streaming_id(&res.text().await.unwrap())).await;
    c.mock.enqueue(Provider::OpenAi, says("Edited answer."));
    let question = answer.parent_id.unwrap();
    let res = c
        .app
        .post_form(
            &format!("/s/{}/messages/{question}/edit", c.session),
            &form("What was the word again?", "c2", MODEL),
            Some(&c.s),
        )
        .await;
    assert_eq!(res.status(), 200);
    c.settled(streaming_id(&res.text().await.unwrap())).await;
    let actor = Actor::for_tests(&c.user);
    c.app
        .state
        .sessions
        .create_template(&actor, &arbor::domain::audit::Origin::cli(), "Terse", "Answer in one line.")
        .await
        .unwrap();
    let before = tree_shape(&c.app, c.session).await;
    let shape = before.to_string();
    assert!(shape.contains("call_w1") && shape.contains("\"yes\"") && shape.contains("notes.txt"), "{shape}");
    assert_eq!(shape.matches("\"chosen\":false").count(), 2, "an edited question and a regenerated answer");

    // Export everything, and the session alone.
    let everything = export(&c.app, &c.s.cookie, "/settings/export").await;
    let single = export(&c.app, &c.s.cookie, &format!("/s/{}/export", c.session)).await;
    let ws = export(
        &c.app,
        &c.s.cookie,
        &format!("/w/{}/export", {
            arbor::storage::repos::workspaces::find_session_by_id(&c.app.state.db, c.session)
                .await
                .unwrap()
                .unwrap()
                .workspace_id
        }),
    )
    .await;
    assert!(!ws.is_empty());

    // A fresh instance, a new person.
    let other = TestApp::spawn().await;
    let user = other.create_user("importer@example.com", Role::Member).await;
    let s = other.login_full(&user).await;
    let job = import(&other, &user, &s, "everything.tar.gz", everything).await;
    let ImportState::Done { sessions, files, templates, workspaces, .. } = job.state.clone() else {
        panic!("{job:?}")
    };
    assert_eq!((workspaces, sessions, files, templates), (1, 1, 1, 1), "{job:?}");
    let imported = other.state.sessions.recent_sessions(&Actor::for_tests(&user), 10).await.unwrap();
    assert_eq!(imported.len(), 1);
    let after = tree_shape(&other, imported[0].id).await;
    assert_eq!(after, before, "the same tree, every branch, file and decision");
    let names: Vec<String> = other
        .state
        .sessions
        .my_templates(&Actor::for_tests(&user))
        .await
        .unwrap()
        .into_iter()
        .map(|t| t.name)
        .collect();
    assert_eq!(names, ["Terse"]);
    // The page shows it, the file is theirs to open, search finds it, nothing waits.
    let page = other.get(&format!("/s/{}", imported[0].id), Some(&s.cookie)).await.text().await.unwrap();
    assert!(page.contains("Edited answer.") && page.contains("What was the word again?"), "{page}");
    assert!(!page.contains("id=\"confirm-"), "an imported call never asks again");
    let file_hash = {
        let ids: Vec<Uuid> =
            arbor::storage::repos::messages::session_messages(&other.state.db, imported[0].id)
                .await
                .unwrap()
                .iter()
                .map(|m| m.id)
                .collect();
        let views = other.state.files.views_of(&ids).await.unwrap();
        views.values().flatten().next().unwrap().hash.clone()
    };
    let blob = other.get(&format!("/blobs/{file_hash}"), Some(&s.cookie)).await;
    assert_eq!(blob.status(), 200);
    assert_eq!(blob.bytes().await.unwrap().as_ref(), b"The secret word is juniper.");
    other.state.search.settle().await;
    let hits = other.state.search.search(&Actor::for_tests(&user), "juniper", None, 1, 10).await.unwrap();
    assert!(!hits.hits.is_empty(), "imported messages are searchable");

    // The single session goes into a workspace of the importer's choosing.
    let target = other.state.sessions.create_workspace(&Actor::for_tests(&user), "Inbox").await.unwrap();
    let (status, card) =
        post_import(&other, &s, &format!("name=one.tar.gz&workspace={}", target.id), single).await;
    assert_eq!(status, 202, "{card}");
    let job = finished(&other, &user, job_id(&card)).await;
    assert!(matches!(job.state, ImportState::Done { workspaces: 0, sessions: 1, .. }), "{job:?}");
    let listed = arbor::storage::repos::workspaces::workspace_sessions(
        &other.state.db,
        user.id,
        target.id,
        false,
        0,
        100,
    )
    .await
    .unwrap();
    assert_eq!(listed.len(), 1);
    assert_eq!(tree_shape(&other, listed[0].id).await, before);
    // The settings page lists both imports.
    let page = other.get("/settings/transfer", Some(&s.cookie)).await.text().await.unwrap();
    assert_eq!(page.matches("class=\"card stack import-job\"").count(), 2, "{page}");
}

fn fixture(name: &str) -> Vec<u8> {
    std::fs::read(format!("{}/tests/fixtures/import/{name}", env!("CARGO_MANIFEST_DIR"))).unwrap()
}

/// How many children each message has, over the member's only session.
async fn branching(app: &TestApp, session: Uuid) -> (usize, usize) {
    let messages = arbor::storage::repos::messages::session_messages(&app.state.db, session).await.unwrap();
    let forks =
        messages.iter().filter(|m| messages.iter().filter(|c| c.parent_id == Some(m.id)).count() > 1).count();
    (messages.len(), forks)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn chatgpt_and_open_webui_exports_keep_every_branch() {
    let app = TestApp::spawn().await;
    let user = app.create_user("mover@example.com", Role::Member).await;
    let s = app.login_full(&user).await;
    let actor = Actor::for_tests(&user);
    for (file, workspace) in [
        ("chatgpt_conversations.json", "Imported from ChatGPT"),
        ("open_webui_export.json", "Imported from Open WebUI"),
    ] {
        let job = import(&app, &user, &s, file, fixture(file)).await;
        let ImportState::Done { sessions, messages, .. } = job.state else { panic!("{file}: {job:?}") };
        assert!(sessions >= 1 && messages >= 4, "{file}: {job:?}");
        let ws = app
            .state
            .sessions
            .list_workspaces(&actor)
            .await
            .unwrap()
            .into_iter()
            .find(|w| w.name == workspace)
            .unwrap_or_else(|| panic!("{workspace}"));
        let mut listed = Vec::new();
        for archived in [false, true] {
            listed.extend(
                arbor::storage::repos::workspaces::workspace_sessions(
                    &app.state.db,
                    user.id,
                    ws.id,
                    archived,
                    0,
                    100,
                )
                .await
                .unwrap(),
            );
        }
        assert_eq!(listed.len(), sessions);
        let mut forks = 0;
        for session in &listed {
            let (_, f) = branching(&app, session.id).await;
            forks += f;
            // Every imported session opens.
            let res = app.get(&format!("/s/{}", session.id), Some(&s.cookie)).await;
            assert_eq!(res.status(), 200);
        }
        assert!(forks >= 2, "{file}: an edited question and a regenerated answer are both forks");
    }
}

/// Counts of what an import could leave behind.
async fn footprint(app: &TestApp) -> [u64; 4] {
    use arbor::storage::entities::{attachment, chat_session, message, workspace};
    use sea_orm::{EntityTrait, PaginatorTrait};
    let db = &app.state.db;
    [
        workspace::Entity::find().count(db).await.unwrap(),
        chat_session::Entity::find().count(db).await.unwrap(),
        message::Entity::find().count(db).await.unwrap(),
        attachment::Entity::find().count(db).await.unwrap(),
    ]
}

fn gzip_tar(entries: &[(&str, &[u8])]) -> Vec<u8> {
    let mut tar = tar::Builder::new(flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::fast()));
    for (name, bytes) in entries {
        let mut header = tar::Header::new_gnu();
        header.set_size(bytes.len() as u64);
        header.set_mode(0o600);
        tar.append_data(&mut header, name, *bytes).unwrap();
    }
    tar.into_inner().unwrap().finish().unwrap()
}

fn doc(messages: Value) -> Vec<u8> {
    json!({"format": 1, "source": "test", "workspaces": [{"name": "W", "sessions": [{"title": "T", "messages": messages}]}]})
        .to_string()
        .into_bytes()
}

fn msg(id: &str, parent: Option<&str>, role: &str) -> Value {
    json!({"id": id, "parent": parent, "role": role, "parts": [{"type": "text", "text": id}]})
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn bad_imports_are_refused_with_a_reason_and_leave_nothing() {
    let app = TestApp::spawn_with(|c| {
        c.limits.import_max_mb = 1;
        c.files.user_quota_mb = 1;
    })
    .await;
    let user = app.create_user("careful@example.com", Role::Member).await;
    let s = app.login_full(&user).await;
    let valid = doc(json!([msg("a", None, "user"), msg("b", Some("a"), "assistant")]));
    let big_file = vec![b'x'; 700 * 1024];
    let big_hash = arbor::blobs::hash_of(&big_file);
    let over_quota = {
        let mut d: Value = serde_json::from_slice(&valid).unwrap();
        let file = json!({"hash": big_hash, "name": "big.txt", "size": big_file.len(), "mime": "text/plain"});
        d["workspaces"][0]["sessions"][0]["messages"][0]["files"] = json!([file.clone()]);
        d["workspaces"][0]["sessions"][0]["messages"][1]["files"] = json!([file]);
        let copy = d["workspaces"][0].clone();
        d["workspaces"].as_array_mut().unwrap().push(copy);
        d
    };
    // An archive whose file does not match its name, one that names a file it lacks, a truncated one.
    let archive = gzip_tar(&[("arbor-export.json", &valid)]);
    let cases: Vec<(&str, Vec<u8>, &str)> = vec![
        ("truncated.tar.gz", archive[..archive.len() / 2].to_vec(), "corrupt or truncated"),
        ("noise.tar.gz", [&[0x1f, 0x8b][..], &[0x55; 200][..]].concat(), "corrupt or truncated"),
        ("other.tar.gz", gzip_tar(&[("etc/passwd", b"root")]), "not part of an Arbor export"),
        ("empty.tar.gz", gzip_tar(&[]), "no arbor-export.json"),
        (
            "mismatch.tar.gz",
            gzip_tar(&[("arbor-export.json", &valid), (&format!("blobs/{}", "a".repeat(64)), b"not that")]),
            "does not match its name",
        ),
        ("missing.json", {
            let mut d: Value = serde_json::from_slice(&valid).unwrap();
            d["workspaces"][0]["sessions"][0]["messages"][0]["files"] =
                json!([{"hash": "b".repeat(64), "name": "x.png", "size": 3, "mime": "image/png"}]);
            d.to_string().into_bytes()
        }, "is not in the archive"),
        ("quota.tar.gz", gzip_tar(&[
            ("arbor-export.json", over_quota.to_string().as_bytes()),
            (&format!("blobs/{big_hash}"), &big_file),
        ]), "storage"),
        ("cycle.json", doc(json!([msg("a", Some("b"), "user"), msg("b", Some("a"), "assistant")])), "cycle"),
        ("dangling.json", doc(json!([msg("a", None, "user"), msg("b", Some("zz"), "assistant")])), "\"zz\""),
        ("duplicate.json", doc(json!([msg("a", None, "user"), msg("a", None, "user")])), "two messages have the id"),
        ("role.json", doc(json!([msg("a", None, "wizard")])), "role \"wizard\""),
        ("part.json", doc(json!([{"id": "a", "role": "user", "parts": [{"type": "hologram"}]}])), "not in a form Arbor knows"),
        ("chosen.json", doc(json!([{"id": "a", "role": "user", "chosen_child": "c", "parts": []}, msg("b", Some("a"), "assistant")])), "not its child"),
        ("format.json", json!({"format": 99, "source": "x", "workspaces": []}).to_string().into_bytes(), "format 99"),
        ("mode.json", json!({"format": 1, "source": "x", "workspaces": [{"name": "W", "approval_mode": "yolo"}]}).to_string().into_bytes(), "\"yolo\""),
        ("notjson.json", b"{ not json".to_vec(), "not valid JSON"),
        ("other.json", b"{\"hello\": 1}".to_vec(), "neither an Arbor export"),
        ("chatgpt-cycle.json", json!([{"title": "Loop", "mapping": {
            "r": {"id": "r", "message": null, "parent": null, "children": ["a"]},
            "a": {"id": "a", "parent": "b", "children": ["b"], "message": {"id": "a", "author": {"role": "user"}, "content": {"content_type": "text", "parts": ["hi"]}}},
            "b": {"id": "b", "parent": "a", "children": ["a"], "message": {"id": "b", "author": {"role": "assistant"}, "content": {"content_type": "text", "parts": ["yo"]}}}
        }, "current_node": "b"}]).to_string().into_bytes(), "Loop"),
        ("export.zip", b"PK\x03\x04rest of a zip".to_vec(), "Unzip it"),
        ("garbage.bin", b"\x00\x01\x02garbage".to_vec(), "not an export Arbor reads"),
    ];
    let before = footprint(&app).await;
    for (name, body, reason) in cases {
        let job = import(&app, &user, &s, name, body).await;
        let ImportState::Failed { reason: why } = &job.state else { panic!("{name} was imported: {job:?}") };
        assert!(why.contains(reason), "{name}: {why}");
        assert_eq!(footprint(&app).await, before, "{name} left something behind");
    }
    // Refused before a job starts: empty, over the size limit, a workspace that is not theirs.
    assert_eq!(post_import(&app, &s, "name=e.json", Vec::new()).await.0, 400);
    let (status, text) = post_import(&app, &s, "name=big.json", vec![b' '; 1024 * 1024 + 1]).await;
    assert_eq!(status, 413, "{text}");
    assert!(text.contains("1 MiB"), "{text}");
    // Without a declared length the body is counted as it comes, and stopped at the limit. (The
    // last chunk is the one that passes it: a client still sending after the refusal could wait
    // on a full socket forever.)
    let chunks: Vec<Result<Vec<u8>, std::io::Error>> = (0..65).map(|_| Ok(vec![b' '; 16 * 1024])).collect();
    let res = app
        .client
        .post(app.url("/settings/imports?name=stream.json"))
        .header("Origin", app.origin())
        .header("Cookie", &s.cookie)
        .header("X-CSRF-Token", &s.csrf)
        .body(reqwest::Body::wrap_stream(futures_util::stream::iter(chunks)))
        .timeout(Duration::from_secs(30))
        .send()
        .await
        .unwrap();
    assert_eq!(res.status(), 413);
    assert_eq!(post_import(&app, &s, "name=x.json&workspace=nope", valid.clone()).await.0, 400);
    let stranger = app.create_user("stranger@example.com", Role::Member).await;
    let (theirs, _) = app.create_session(&stranger).await;
    assert_eq!(post_import(&app, &s, &format!("name=x.json&workspace={theirs}"), valid.clone()).await.0, 404);
    assert_eq!(footprint(&app).await[0], before[0] + 1, "only the stranger's workspace was made");
    // Nothing received is left in the scratch folder, refused or not.
    let scratch = app.state.config.data_dir.join("transfer");
    assert_eq!(std::fs::read_dir(&scratch).unwrap().count(), 0, "{scratch:?}");
    // A valid one still goes in after all of that.
    let job = import(&app, &user, &s, "fine.json", valid).await;
    assert!(matches!(job.state, ImportState::Done { sessions: 1, messages: 2, .. }), "{job:?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_admin_exports_a_members_data_and_the_audit_log_says_so() {
    let app = TestApp::spawn().await;
    let admin = app.create_user("admin@example.com", Role::Admin).await;
    let member = app.create_user("member@example.com", Role::Member).await;
    let (_, session) = app.create_session(&member).await;
    let admin_session = app.login_full(&admin).await;
    let admin_cookie = admin_session.cookie.clone();
    let res = app.post_form(&format!("/admin/users/{}/export", member.id), "", Some(&admin_session)).await;
    assert_eq!(res.status(), 200);
    assert_eq!(res.headers()["content-type"], "application/gzip");
    let bytes = res.bytes().await.unwrap().to_vec();
    let mut tar = tar::Archive::new(flate2::read::GzDecoder::new(bytes.as_slice()));
    let mut entry = tar.entries().unwrap().next().unwrap().unwrap();
    assert_eq!(entry.path().unwrap().to_str().unwrap(), "arbor-export.json");
    let mut text = String::new();
    std::io::Read::read_to_string(&mut entry, &mut text).unwrap();
    let doc: Value = serde_json::from_str(&text).unwrap();
    assert_eq!(doc["workspaces"][0]["sessions"][0]["title"], "First session");
    assert!(
        !text.contains(&session.to_string()),
        "ids are the archive's own, but the session id is not leaked"
    );
    let page = app.get("/admin/audit", Some(&admin_cookie)).await.text().await.unwrap();
    assert!(page.contains("user.export"), "{page}");
    // Nobody else's: a member asking gets 403, an unknown person 404.
    let member_session = app.login_full(&member).await;
    let path = format!("/admin/users/{}/export", member.id);
    assert_eq!(app.post_form(&path, "", Some(&member_session)).await.status(), 403);
    let unknown = format!("/admin/users/{}/export", Uuid::now_v7());
    assert_eq!(app.post_form(&unknown, "", Some(&admin_session)).await.status(), 404);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn in_the_browser_a_chosen_file_is_imported_and_its_card_follows_the_job_to_the_end() {
    use crate::support::browser::Browser;
    let app = TestApp::spawn().await;
    let user = app.create_user("browser@example.com", Role::Member).await;
    let cookie = app.login(&user).await;
    let browser = Browser::start().await.expect("headless Chromium (scripts/test installs it)");
    browser.sign_in(&app.origin(), &cookie, &app.url("/settings/transfer")).await.unwrap();
    browser.wait_for("#import-file", Duration::from_secs(15)).await.unwrap();
    let path = format!("{}/tests/fixtures/import/open_webui_export.json", env!("CARGO_MANIFEST_DIR"));
    browser.send_keys("#import-file", &path).await.unwrap();
    // The card comes back from the upload and polls until the job ends.
    let done = browser
        .wait_for_text("#import-jobs .import-job", "Imported.", Duration::from_secs(30))
        .await
        .unwrap();
    assert!(done.contains("open_webui_export.json") && done.contains("Sessions: 2"), "{done}");
    browser.goto(&app.url("/")).await.unwrap();
    browser.wait_for_text("body", "Imported from Open WebUI", Duration::from_secs(15)).await.unwrap();
    // A refused file says why on the page.
    browser.goto(&app.url("/settings/transfer")).await.unwrap();
    browser.wait_for("#import-file", Duration::from_secs(15)).await.unwrap();
    let bad = std::env::temp_dir().join(format!("arbor-bad-{}.json", Uuid::now_v7()));
    std::fs::write(&bad, b"{\"hello\": 1}").unwrap();
    browser.send_keys("#import-file", bad.to_str().unwrap()).await.unwrap();
    let failed = browser
        .wait_for_text("#import-jobs .import-job", "Not imported", Duration::from_secs(30))
        .await
        .unwrap();
    assert!(failed.contains("neither an Arbor export"), "{failed}");
    let _ = std::fs::remove_file(&bad);
    let errors = browser.console_errors().await.unwrap();
    assert!(errors.is_empty(), "console errors: {errors:#?}");
    browser.close().await.unwrap();
}
