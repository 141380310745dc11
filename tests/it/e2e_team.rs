//! A team of three in three browsers: the owner shares a workspace with two groups the test
//! identity provider's `groups` claim syncs, the viewer follows a run live, the editor approves
//! its dialog, the owner stops sharing with the viewers and the viewer's stream ends at once.

use std::time::Duration;

use arbor::domain::accounts::{Actor, Role};
use serde_json::json;

use crate::agent::chunk;
use crate::oidc_real::{idp_with, sign_in};
use crate::support::browser::Browser;
use crate::support::idp::IdpAccount;
use crate::support::mock_upstream::{self, Provider, Reply};
use crate::support::session_cookie_from;

const MODEL: &str = "openai/gpt-4o-mini";
const WAIT: Duration = Duration::from_secs(30);

fn account(login: &str, name: &str, group: &str) -> IdpAccount {
    IdpAccount {
        sub: login.into(),
        email: format!("{login}@example.test"),
        email_verified: true,
        name: name.into(),
        preferred_username: login.into(),
        groups: vec![group.into()],
    }
}

/// The model starts to answer, holds at `gate` until the test opens it, then calls write_file.
fn plan_then_write(gate: &str) -> Reply {
    let args = json!({"path": "notes/hello.md", "content": "# Hello\nfrom the team\n"}).to_string();
    Reply::Gated {
        before: vec![
            chunk(json!({"role": "assistant", "content": ""}), None),
            chunk(json!({"content": "Let me write "}), None),
        ],
        gate: gate.into(),
        after: vec![
            chunk(json!({"content": "the note."}), None),
            chunk(
                json!({"tool_calls": [{"index": 0, "id": "call_1", "type": "function", "function": {"name": "write_file", "arguments": ""}}]}),
                None,
            ),
            chunk(json!({"tool_calls": [{"index": 0, "function": {"arguments": args}}]}), None),
            chunk(json!({}), Some("tool_calls")),
            "data: [DONE]\n\n".into(),
        ],
    }
}

/// The model answers in two halves with `gate` between them.
fn says_in_halves(first: &str, gate: &str, second: &str) -> Reply {
    Reply::Gated {
        before: vec![
            chunk(json!({"role": "assistant", "content": ""}), None),
            chunk(json!({"content": first}), None),
        ],
        gate: gate.into(),
        after: vec![
            chunk(json!({"content": second}), None),
            chunk(json!({}), Some("stop")),
            "data: [DONE]\n\n".into(),
        ],
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_team_of_three_shares_a_workspace_follows_a_run_approves_it_and_revokes_a_viewer() {
    let mock = mock_upstream::start().await.unwrap();
    let accounts =
        vec![account("erin", "Erin Editor", "team-editors"), account("vic", "Vic Viewer", "team-viewers")];
    let (idp, app) = idp_with(accounts, "RS256", |c| {
        crate::runs::use_mock(c, &mock);
        c.oidc.admin_groups = vec![];
    })
    .await;
    let db = &app.state.db;

    // Erin and Vic sign in through the provider: its groups claim makes and fills their groups.
    let mut cookies = Vec::new();
    for login in ["erin", "vic"] {
        let res = sign_in(&idp, &app, login).await;
        assert_eq!(res.status(), 303, "{login} signs in");
        cookies.push(session_cookie_from(&res).unwrap());
    }
    let (editor_cookie, viewer_cookie) = (cookies[0].clone(), cookies[1].clone());

    // Ada owns a workspace whose session asks before writing files.
    let ada = app.create_user("ada@example.com", Role::Member).await;
    let (ws, session) = app.create_session(&ada).await;
    let form = arbor::domain::sessions::SessionForm {
        model: MODEL.into(),
        exposed_roots: "notes".into(),
        approval_mode: "suggest".into(),
        ..Default::default()
    };
    let updated = arbor::domain::sessions::Sessions::new(db.clone())
        .update_session(&Actor::for_tests(&ada), session, &form)
        .await
        .unwrap();
    let folder =
        arbor::prompting::workspace_dir(&app.state.config.data_dir, updated.workspace_id).join("notes");

    let owner = Browser::start().await.expect("headless Chromium (scripts/test installs it)");
    let editor = Browser::start().await.unwrap();
    let viewer = Browser::start().await.unwrap();
    owner.sign_in(&app.origin(), &app.login(&ada).await, &app.url(&format!("/w/{ws}"))).await.unwrap();

    // The owner shares the workspace with both groups from its page.
    for (group, role) in [("team-editors", "editor"), ("team-viewers", "viewer")] {
        owner.wait_for("#share-form", WAIT).await.unwrap();
        owner
            .execute(
                "document.getElementById('share-kind').value = 'group'; document.getElementById('share-role').value = arguments[0]; return true;",
                &[json!(role)],
            )
            .await
            .unwrap();
        owner.clear("#share-who").await.unwrap();
        owner.type_into("#share-who", group).await.unwrap();
        owner.click_when_ready("#share-form button[type=submit]", WAIT).await.unwrap();
        owner.wait_for_text("#shares-table", group, WAIT).await.unwrap();
    }
    let table = owner.text("#shares-table").await.unwrap();
    assert!(table.contains("team-editors") && table.contains("team-viewers"), "{table}");

    let page = app.url(&format!("/s/{session}"));
    owner.goto(&page).await.unwrap();
    editor.sign_in(&app.origin(), &editor_cookie, &page).await.unwrap();
    viewer.sign_in(&app.origin(), &viewer_cookie, &page).await.unwrap();
    viewer.wait_for("#viewer-note", WAIT).await.unwrap();
    assert!(viewer.find_all("#composer").await.unwrap().is_empty(), "a viewer gets no composer");
    editor.wait_for("#composer-message", WAIT).await.unwrap();
    owner.wait_for("#composer-message", WAIT).await.unwrap();

    // The owner asks; the viewer, whose page was open before, follows the answer live.
    mock.enqueue(Provider::OpenAi, plan_then_write("plan"));
    mock.enqueue(Provider::OpenAi, says_in_halves("I saved ", "saved", "notes/hello.md."));
    owner.type_into("#composer-message", "Save a hello note for the team").await.unwrap();
    owner.send_keys("#composer-message", "\u{E007}").await.unwrap();
    viewer.wait_for_text("#thread [data-status=streaming]", "Let me write", WAIT).await.unwrap();
    viewer.wait_for_text("#thread", "asked by ada", WAIT).await.unwrap();
    mock.open_gate("plan");

    // The run stops at the dialog: the editor decides it, the viewer may only watch.
    viewer.wait_for_text(".confirm", "Waiting for the decision", WAIT).await.unwrap();
    assert!(viewer.find_all(".confirm button[value=yes]").await.unwrap().is_empty());
    assert!(!folder.join("hello.md").exists(), "nothing is written before the decision");
    editor.click_when_ready(".confirm button[value=yes]", WAIT).await.unwrap();
    // Each page says who decided: on the resolved dialog, or on the call's card once the thread
    // reloaded to follow the run (on a busy machine the dialog's answer may be replaced by the
    // reloaded thread before a poll sees it).
    editor.wait_for_text("#thread", "approved by Erin Editor", WAIT).await.unwrap();
    owner.wait_for_text("#thread", "approved by Erin Editor", WAIT).await.unwrap();

    // The run goes on; the viewer follows its answer live again.
    viewer.wait_for_text("#thread [data-status=streaming]", "I saved", WAIT).await.unwrap();
    assert!(viewer.find_all("#thread .btn-stop").await.unwrap().is_empty(), "a viewer cannot stop the run");
    assert_eq!(std::fs::read_to_string(folder.join("hello.md")).unwrap(), "# Hello\nfrom the team\n");

    // The owner stops sharing with the viewers: the viewer's stream ends and the page says so.
    owner.goto(&app.url(&format!("/w/{ws}"))).await.unwrap();
    owner.wait_for_text("#shares-table", "team-viewers", WAIT).await.unwrap();
    owner.execute("window.confirm = () => true; return true;", &[]).await.unwrap();
    let row = owner
        .execute(
            "return [...document.querySelectorAll('#shares-table tr')].find(r => r.textContent.includes('team-viewers')).id;",
            &[],
        )
        .await
        .unwrap();
    let row = row.as_str().unwrap().to_string();
    owner.click_when_ready(&format!("#{row} button.btn-danger"), WAIT).await.unwrap();
    owner.wait_for_text("#workspace-shares", "No longer shared.", WAIT).await.unwrap();
    viewer.wait_for_text("#access-revoked", "no longer shared with you", WAIT).await.unwrap();

    // The editor still follows it to the end.
    mock.open_gate("saved");
    editor
        .wait_for_text(
            "#thread article:last-of-type.msg-assistant[data-status=complete] .markdown",
            "I saved notes/hello.md.",
            WAIT,
        )
        .await
        .unwrap();
    // And the viewer, reloading, finds nothing.
    let res = app.get(&format!("/s/{session}"), Some(&viewer_cookie)).await;
    assert_eq!(res.status(), 404);
    for browser in [owner, editor, viewer] {
        browser.close().await.unwrap();
    }
}
