//! Browser journeys in headless Chromium. Later issues add theirs here.

use std::time::Duration;

use arbor::domain::accounts::Role;

use crate::support::TestApp;
use crate::support::browser::Browser;

/// Where screenshots go, for people to look at after a run.
fn artifacts_dir() -> std::path::PathBuf {
    let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/artifacts");
    std::fs::create_dir_all(&dir).unwrap();
    dir
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn home_page_renders_without_console_errors() {
    let app = TestApp::spawn().await;
    let browser = Browser::start().await.expect("headless Chromium (scripts/test installs it)");

    browser.goto(&app.url("/")).await.unwrap();
    browser.wait_for("#home", Duration::from_secs(10)).await.unwrap();
    assert_eq!(browser.title().await.unwrap(), "Arbor");
    // htmx and its SSE extension loaded under the strict CSP.
    let loaded = browser
        .execute("return typeof htmx !== 'undefined' && htmx.version + ' ' + (htmx.config.selfRequestsOnly === true) + ' ' + (htmx.config.allowEval === false);", &[])
        .await
        .unwrap();
    assert_eq!(loaded.as_str(), Some("2.0.11 true true"), "{loaded}");
    browser.screenshot(artifacts_dir().join("home-desktop.png")).await.unwrap();

    // Signed in, on a phone-sized window: the drawer toggle works.
    let user = app.create_user("ada@example.com", Role::Member).await;
    let cookie = app.login(&user).await;
    let token = cookie.trim_start_matches("arbor_session=");
    browser
        .execute(&format!("document.cookie = 'arbor_session={token}; path=/'; return true;"), &[])
        .await
        .unwrap();
    browser.set_window_size(390, 844).await.unwrap();
    browser.goto(&app.url("/")).await.unwrap();
    browser.wait_for_text("#home h2", "Welcome", Duration::from_secs(10)).await.unwrap();
    browser.click(".drawer-toggle").await.unwrap();
    let open = browser
        .execute("return document.getElementById('app').classList.contains('drawer-open');", &[])
        .await
        .unwrap();
    assert_eq!(open.as_bool(), Some(true));
    // Let the drawer finish sliding in before the picture.
    tokio::time::sleep(Duration::from_millis(400)).await;
    browser.screenshot(artifacts_dir().join("home-phone-drawer.png")).await.unwrap();

    // A missing page is the friendly 404, also without console errors other than the 404 itself.
    let errors = browser.console_errors().await.unwrap();
    assert!(errors.is_empty(), "console errors: {errors:#?}");
    browser.close().await.unwrap();
}

/// Console errors from Arbor's own pages (a third-party login page is not ours to judge).
async fn arbor_console_errors(browser: &Browser, app: &TestApp) -> Vec<String> {
    browser.console_errors().await.unwrap().into_iter().filter(|e| e.contains(&app.origin())).collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sign_in_with_a_local_account_in_the_browser() {
    let app = TestApp::spawn().await;
    app.state
        .accounts
        .create_local("ada@example.com", "Ada", "correct horse battery", 12, Role::Member)
        .await
        .unwrap();
    let browser = Browser::start().await.unwrap();
    browser.goto(&app.url("/account/sessions")).await.unwrap();
    // Anonymous: sent to the sign-in page, which remembers where we were going.
    browser.wait_for("#login", Duration::from_secs(10)).await.unwrap();
    assert!(browser.current_url().await.unwrap().contains("/login?next=/account/sessions"));
    browser.type_into("#login-email", "ada@example.com").await.unwrap();
    browser.type_into("#login-password", "wrong password!").await.unwrap();
    browser.click("#login button[type=submit]").await.unwrap();
    browser.wait_for_text("#login .flash-error", "do not match", Duration::from_secs(10)).await.unwrap();
    // The refused attempt answers 401, which the browser logs; nothing else may be there.
    let refused = arbor_console_errors(&browser, &app).await;
    assert!(refused.iter().all(|e| e.contains("/login") && e.contains("401")), "{refused:#?}");
    browser.clear("#login-password").await.unwrap();
    browser.type_into("#login-password", "correct horse battery").await.unwrap();
    browser.screenshot(artifacts_dir().join("login-desktop.png")).await.unwrap();
    browser.click("#login button[type=submit]").await.unwrap();
    browser
        .wait_for_text("#account-sessions h1", "Where you are signed in", Duration::from_secs(10))
        .await
        .unwrap();
    browser.screenshot(artifacts_dir().join("sessions-desktop.png")).await.unwrap();
    // Sign out through htmx (which sends the CSRF token from the meta tag).
    browser.click(".topbar-actions button[hx-post='/logout']").await.unwrap();
    browser.wait_for("#login", Duration::from_secs(10)).await.unwrap();
    let errors = arbor_console_errors(&browser, &app).await;
    assert!(errors.is_empty(), "console errors: {errors:#?}");
    browser.close().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sign_in_through_the_providers_own_login_page() {
    let (_idp, app) = crate::oidc_real::idp_and_app("RS256", |_| {}).await;
    let browser = Browser::start().await.unwrap();
    browser.goto(&app.url("/login")).await.unwrap();
    browser.wait_for(".oidc-button", Duration::from_secs(10)).await.unwrap();
    assert!(browser.text(".oidc-button").await.unwrap().contains("Sign in with Example SSO"));
    browser.click(".oidc-button").await.unwrap();
    // The provider's own login form.
    browser.wait_for("input[name=login]", Duration::from_secs(10)).await.unwrap();
    browser.type_into("input[name=login]", "alice").await.unwrap();
    browser.type_into("input[name=password]", "anything").await.unwrap();
    browser.screenshot(artifacts_dir().join("provider-login.png")).await.unwrap();
    browser.click("button[type=submit]").await.unwrap();
    browser.wait_for_text("#home h2", "Welcome, Alice Anders", Duration::from_secs(15)).await.unwrap();
    assert!(browser.current_url().await.unwrap().starts_with(&app.origin()));
    let admin_link = browser.find_all(".topbar-actions a[href='/admin']").await.unwrap();
    assert_eq!(admin_link.len(), 1, "arbor-admins maps to admin");
    let errors = arbor_console_errors(&browser, &app).await;
    assert!(errors.is_empty(), "console errors: {errors:#?}");
    browser.close().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_answer_streams_into_the_page_and_ends_as_markdown() {
    use crate::support::mock_upstream::{self, Provider, Reply};
    let mock = mock_upstream::start().await.unwrap();
    let app = TestApp::spawn_with(|c| crate::runs::use_mock(c, &mock)).await;
    let long = "openai/many_small_chunks.sse";
    let expected = crate::runs::fixture_text(&mock, long);
    // Slow enough that the page connects while the answer is still being written.
    mock.enqueue(
        Provider::OpenAi,
        Reply::Fixture { path: long.into(), chunk_delay_ms: 25, first_byte_delay_ms: 300 },
    );
    mock.enqueue(Provider::OpenAi, openai_text_reply(RICH_ANSWER));
    let browser = signed_in_browser(&app).await;
    browser.wait_for("#composer-message", Duration::from_secs(10)).await.unwrap();
    browser
        .execute("document.getElementById('composer-model').value = 'openai/gpt-4o-mini'; return true;", &[])
        .await
        .unwrap();
    browser.type_into("#composer-message", "Stream something long, please").await.unwrap();
    browser.click("#composer button[type=submit]").await.unwrap();

    // The new session's page shows the answer while it is written, then the finished markdown.
    browser.wait_for(".msg-assistant.is-streaming", Duration::from_secs(10)).await.unwrap();
    assert!(browser.current_url().await.unwrap().contains("/s/"));
    let first_words: String = expected.split_whitespace().take(2).collect::<Vec<_>>().join(" ");
    browser
        .wait_for_text(".msg-assistant .live .answer", &first_words, Duration::from_secs(10))
        .await
        .unwrap();
    browser.screenshot(artifacts_dir().join("session-streaming.png")).await.unwrap();
    browser
        .wait_for(".msg-assistant[data-status=complete] .markdown", Duration::from_secs(20))
        .await
        .unwrap();
    let shown = browser.text(".msg-assistant .markdown").await.unwrap();
    let words = |s: &str| s.split_whitespace().collect::<Vec<_>>().join(" ");
    assert_eq!(words(&shown), words(&expected), "every token once, in order");
    assert!(browser.find_all(".msg-assistant.is-streaming").await.unwrap().is_empty());

    // A reply from the session's own composer appears below, streamed the same way.
    browser.type_into("#composer-message", "And a short one").await.unwrap();
    browser.click("#composer button[type=submit]").await.unwrap();
    browser
        .wait_for_text(".msg-assistant:last-child .markdown", "Here is the code", Duration::from_secs(15))
        .await
        .unwrap();
    // Code is highlighted and gets a copy button; TeX is typeset by KaTeX; links open a new tab.
    browser
        .wait_for(".msg-assistant:last-child pre code.hljs .hljs-keyword", Duration::from_secs(5))
        .await
        .unwrap();
    assert_eq!(browser.find_all(".msg-assistant:last-child pre .code-copy").await.unwrap().len(), 1);
    browser.wait_for(".msg-assistant:last-child .math-inline .katex", Duration::from_secs(5)).await.unwrap();
    browser
        .wait_for(".msg-assistant:last-child .math-display .katex-display", Duration::from_secs(5))
        .await
        .unwrap();
    assert_eq!(
        browser.attribute(".msg-assistant:last-child .markdown a", "target").await.unwrap().as_deref(),
        Some("_blank")
    );
    assert_eq!(
        browser.attribute(".msg-assistant:last-child .markdown a", "rel").await.unwrap().as_deref(),
        Some("noopener noreferrer nofollow")
    );
    assert_eq!(browser.find_all(".msg-user").await.unwrap().len(), 2);
    assert_eq!(browser.value("#composer-message").await.unwrap(), "", "the composer was reset");
    browser.screenshot(artifacts_dir().join("session-desktop.png")).await.unwrap();

    // Reloading shows the same conversation from the database.
    browser.goto(&browser.current_url().await.unwrap()).await.unwrap();
    browser.wait_for(".msg-assistant .markdown", Duration::from_secs(10)).await.unwrap();
    assert_eq!(browser.find_all(".msg-assistant[data-status=complete]").await.unwrap().len(), 2);
    let errors = arbor_console_errors(&browser, &app).await;
    assert!(errors.is_empty(), "console errors: {errors:#?}");
    browser.close().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_branching_journey_from_a_new_workspace_to_a_reload() {
    use crate::support::mock_upstream::{self, Provider, Reply};
    let mock = mock_upstream::start().await.unwrap();
    let app = TestApp::spawn_with(|c| crate::runs::use_mock(c, &mock)).await;
    for _ in 0..2 {
        mock.enqueue(
            Provider::OpenAi,
            Reply::Fixture { path: "openai/text.sse".into(), chunk_delay_ms: 20, first_byte_delay_ms: 100 },
        );
    }
    let browser = signed_in_browser(&app).await;

    // A new workspace from the sidebar.
    browser.click(".new-workspace summary").await.unwrap();
    browser.type_into("#new-workspace-name", "Travel plans").await.unwrap();
    browser.click(".new-workspace button[type=submit]").await.unwrap();
    browser.wait_for_text("#workspace h1", "Travel plans", Duration::from_secs(10)).await.unwrap();
    browser.click("#workspace a[href^='/?w=']").await.unwrap();
    browser.wait_for_text("#home", "Travel plans", Duration::from_secs(10)).await.unwrap();
    browser
        .execute("document.getElementById('composer-model').value = 'openai/gpt-4o-mini'; return true;", &[])
        .await
        .unwrap();
    // Enter sends.
    browser.type_into("#composer-message", "Where should I go in May?").await.unwrap();
    browser.send_keys("#composer-message", "\u{E007}").await.unwrap();
    browser
        .wait_for_text(
            ".msg-assistant[data-status=complete] .markdown",
            "How can I help",
            Duration::from_secs(15),
        )
        .await
        .unwrap();
    let session_url = browser.current_url().await.unwrap();
    assert!(session_url.contains("/s/"), "{session_url}");
    let in_sidebar = browser.text(".ws-item .session-item.is-active").await.unwrap();
    assert!(in_sidebar.contains("Where should I go"), "{in_sidebar}");

    // Edit the first message: a second branch with its own answer.
    browser.click(".msg-user .msg-edit summary").await.unwrap();
    browser.clear(".msg-user .msg-edit-form textarea").await.unwrap();
    browser.type_into(".msg-user .msg-edit-form textarea", "Where should I go in June?").await.unwrap();
    browser.click(".msg-user .msg-edit-form button[type=submit]").await.unwrap();
    browser.wait_for_text(".msg-user .sib-pos", "2 / 2", Duration::from_secs(10)).await.unwrap();
    browser
        .wait_for_text(
            ".msg-assistant[data-status=complete] .markdown",
            "How can I help",
            Duration::from_secs(15),
        )
        .await
        .unwrap();
    assert!(browser.text(".msg-user .msg-body").await.unwrap().contains("June"));

    // Back to the first branch with ‹.
    browser.click(".msg-user .sib-prev").await.unwrap();
    browser.wait_for_text(".msg-user .sib-pos", "1 / 2", Duration::from_secs(10)).await.unwrap();
    assert!(browser.text(".msg-user .msg-body").await.unwrap().contains("May"));
    assert_eq!(browser.find_all(".msg-assistant[data-status=complete]").await.unwrap().len(), 1);

    // A reload shows the same path.
    browser.goto(&session_url).await.unwrap();
    browser.wait_for_text(".msg-user .sib-pos", "1 / 2", Duration::from_secs(10)).await.unwrap();
    assert!(browser.text(".msg-user .msg-body").await.unwrap().contains("May"));
    browser.click(".tree-overview summary").await.unwrap();
    browser.wait_for(".tree-overview .tree-node", Duration::from_secs(10)).await.unwrap();
    assert_eq!(browser.find_all(".tree-overview .tree-node").await.unwrap().len(), 4);
    browser.screenshot(artifacts_dir().join("session-branches-desktop.png")).await.unwrap();
    browser.set_window_size(390, 844).await.unwrap();
    tokio::time::sleep(Duration::from_millis(300)).await;
    browser.screenshot(artifacts_dir().join("session-branches-phone.png")).await.unwrap();
    let errors = arbor_console_errors(&browser, &app).await;
    assert!(errors.is_empty(), "console errors: {errors:#?}");
    browser.close().await.unwrap();
}

/// An answer with a code block, inline and display TeX, and a link.
const RICH_ANSWER: &str = "Here is the code:\n\n```rust\nfn main() {\n    let x = 2;\n}\n```\n\nIts square is $x^2$, and\n\n$$\\sum_{i=1}^{n} i = \\frac{n(n+1)}{2}$$\n\nSee [the book](https://doc.rust-lang.org/book/).";

/// An OpenAI Chat Completions stream that writes `text` in a few chunks.
pub(crate) fn openai_text_reply(text: &str) -> crate::support::mock_upstream::Reply {
    let chunk = |delta: serde_json::Value, finish: Option<&str>| {
        let body = serde_json::json!({
            "id": "chatcmpl-e2e", "object": "chat.completion.chunk", "created": 1, "model": "gpt-4o-mini",
            "choices": [{ "index": 0, "delta": delta, "finish_reason": finish }]
        });
        format!("data: {body}\n\n")
    };
    let mut events = vec![chunk(serde_json::json!({ "role": "assistant", "content": "" }), None)];
    let chars: Vec<char> = text.chars().collect();
    for piece in chars.chunks(24) {
        events.push(chunk(serde_json::json!({ "content": piece.iter().collect::<String>() }), None));
    }
    events.push(chunk(serde_json::json!({}), Some("stop")));
    events.push("data: [DONE]\n\n".into());
    crate::support::mock_upstream::Reply::Sse { events, chunk_delay_ms: 10 }
}

/// Chromium signed in as a new member, on the home page.
async fn signed_in_browser(app: &TestApp) -> Browser {
    let user = app.create_user("ada@example.com", Role::Member).await;
    let cookie = app.login(&user).await;
    let token = cookie.trim_start_matches("arbor_session=");
    let browser = Browser::start().await.unwrap();
    browser.goto(&app.url("/")).await.unwrap();
    browser
        .execute(&format!("document.cookie = 'arbor_session={token}; path=/'; return true;"), &[])
        .await
        .unwrap();
    browser.goto(&app.url("/")).await.unwrap();
    browser
}

/// Signs `browser` in as `user` by setting their session cookie, then opens `path`.
async fn browse_as(browser: &Browser, app: &TestApp, user: &arbor::domain::accounts::User, path: &str) {
    let cookie = app.login(user).await;
    let token = cookie.trim_start_matches("arbor_session=");
    browser
        .execute(&format!("document.cookie = 'arbor_session={token}; path=/'; return true;"), &[])
        .await
        .unwrap();
    browser.goto(&app.url(path)).await.unwrap();
}

/// On the console's providers page: adds an OpenAI-format provider at the mock with a shared
/// key (only its last four characters come back), discovers the models and keeps gpt-4o-mini.
async fn add_provider_in_console(
    browser: &Browser,
    mock: &crate::support::mock_upstream::MockUpstream,
    name: &str,
    label: &str,
    key: &str,
) {
    use crate::support::mock_upstream::{Provider, Reply};
    browser.wait_for("#add-provider", Duration::from_secs(10)).await.unwrap();
    browser.type_into("#p-name", name).await.unwrap();
    browser.type_into("#p-label", label).await.unwrap();
    browser.type_into("#p-base-url", &mock.url(Provider::OpenAi)).await.unwrap();
    browser.click("#add-provider button[type=submit]").await.unwrap();
    browser
        .wait_for_text("#admin-provider h1", &format!("Provider {name}"), Duration::from_secs(10))
        .await
        .unwrap();

    browser.type_into("#k-label", "Team key").await.unwrap();
    browser.type_into("#k-key", key).await.unwrap();
    browser.click("#add-shared-key button[type=submit]").await.unwrap();
    let last4 = format!("…{}", &key[key.len() - 4..]);
    browser.wait_for_text("#shared-keys", &last4, Duration::from_secs(10)).await.unwrap();
    assert!(!browser.page_source().await.unwrap().contains(key));

    mock.enqueue(Provider::OpenAi, Reply::fixture("openai/models.json"));
    browser.click("#admin-provider button[hx-post$='/test']").await.unwrap();
    browser
        .wait_for_text("#admin-provider .flash-ok", "The connection works", Duration::from_secs(10))
        .await
        .unwrap();
    assert!(browser.value("#p-models").await.unwrap().contains("o3-mini"));
    browser.clear("#p-models").await.unwrap();
    browser.type_into("#p-models", "gpt-4o-mini").await.unwrap();
    browser.click("#provider-settings button[type=submit]").await.unwrap();
    browser.wait_for_text("#admin-provider .flash-ok", "Saved", Duration::from_secs(10)).await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_admin_shares_a_provider_and_a_member_uses_it_then_usage_shows_it() {
    use crate::support::mock_upstream::{self, Provider};
    let mock = mock_upstream::start().await.unwrap();
    let app = TestApp::spawn_with(|c| {
        c.llm.detect_local_ollama = false;
        c.llm.infer_titles = false;
    })
    .await;
    let admin = app.create_user("root@example.com", Role::Admin).await;
    let member = app.create_user("ada@example.com", Role::Member).await;
    let browser = Browser::start().await.unwrap();
    browser.goto(&app.url("/")).await.unwrap();
    browse_as(&browser, &app, &admin, "/admin").await;
    browser.wait_for("#admin-users", Duration::from_secs(10)).await.unwrap();

    // Add a provider from the console.
    browser.click(".tabs a[href='/admin/providers']").await.unwrap();
    add_provider_in_console(&browser, &mock, "team", "Team OpenAI", "sk-browser-team-key-1234").await;
    browser.screenshot(artifacts_dir().join("admin-provider.png")).await.unwrap();

    // The member picks the shared model and gets an answer.
    mock.enqueue(Provider::OpenAi, openai_text_reply("Shared keys work for everyone on the team."));
    browse_as(&browser, &app, &member, "/").await;
    browser.wait_for("#composer-model", Duration::from_secs(10)).await.unwrap();
    let options = browser.execute(
        "return Array.from(document.querySelectorAll('#composer-model option')).map(o => o.value).join(',');",
        &[],
    )
    .await
    .unwrap();
    assert_eq!(options.as_str(), Some("team/gpt-4o-mini"), "only the enabled model is offered: {options}");
    browser.type_into("#composer-message", "Does the team key work?").await.unwrap();
    browser.send_keys("#composer-message", "\u{E007}").await.unwrap();
    browser
        .wait_for_text(
            ".msg-assistant[data-status=complete] .markdown",
            "work for everyone",
            Duration::from_secs(15),
        )
        .await
        .unwrap();
    let sent = mock.requests_for(Provider::OpenAi);
    assert_eq!(sent.last().unwrap().header("authorization"), Some("Bearer sk-browser-team-key-1234"));

    // Back as the admin: the usage page counts the member's request.
    browse_as(&browser, &app, &admin, "/admin/usage?days=7").await;
    browser.wait_for("#usage-models", Duration::from_secs(10)).await.unwrap();
    assert!(browser.text("#usage-models").await.unwrap().contains("team/gpt-4o-mini"));
    assert!(browser.text("#usage-users").await.unwrap().contains("ada@example.com"));
    assert!(browser.text("#usage-total").await.unwrap().starts_with("1 request,"));
    assert_eq!(browser.find_all("#admin-usage svg.chart").await.unwrap().len(), 4);
    browser.screenshot(artifacts_dir().join("admin-usage.png")).await.unwrap();
    let errors = arbor_console_errors(&browser, &app).await;
    assert!(errors.is_empty(), "console errors: {errors:#?}");
    browser.close().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_model_asks_to_write_a_file_the_user_approves_and_sees_the_diff() {
    use crate::agent::{agent, calls, says};
    use crate::support::mock_upstream::Provider;
    let a = agent("suggest", |_| {}).await;
    let browser = Browser::start().await.unwrap();
    browser.goto(&a.c.app.url("/")).await.unwrap();
    browse_as(&browser, &a.c.app, &a.c.user, &format!("/s/{}", a.c.session)).await;
    browser.wait_for("#composer-message", Duration::from_secs(10)).await.unwrap();

    a.c.mock.enqueue(
        Provider::OpenAi,
        calls(&[(
            "call_1",
            "write_file",
            serde_json::json!({"path": "notes/hello.md", "content": "# Hello\nfrom the agent\n"}),
        )]),
    );
    a.c.mock.enqueue(Provider::OpenAi, says("I saved notes/hello.md."));
    browser.type_into("#composer-message", "Save a hello note").await.unwrap();
    browser.send_keys("#composer-message", "\u{E007}").await.unwrap();

    // The dialog shows the exact call; nothing is written before the decision.
    let dialog = browser.wait_for_text(".confirm", "write_file", Duration::from_secs(15)).await.unwrap();
    assert!(dialog.contains("notes/hello.md"), "{dialog}");
    assert!(!a.folder.join("hello.md").exists());
    browser.screenshot(artifacts_dir().join("agent-confirm.png")).await.unwrap();

    // The page may swap or reload the dialog while it is clicked (its watcher): click it anew.
    browser.click_when_ready(".confirm button[value=yes]", Duration::from_secs(15)).await.unwrap();
    browser.wait_for_text(".msg-tool .diff", "+from the agent", Duration::from_secs(30)).await.unwrap();
    browser
        .wait_for_text(
            "#thread article:last-of-type.msg-assistant[data-status=complete] .markdown",
            "I saved notes/hello.md.",
            Duration::from_secs(30),
        )
        .await
        .unwrap();
    assert_eq!(std::fs::read_to_string(a.folder.join("hello.md")).unwrap(), "# Hello\nfrom the agent\n");
    assert!(browser.find_all(".confirm").await.unwrap().is_empty(), "the dialog is gone");
    browser.screenshot(artifacts_dir().join("agent-diff.png")).await.unwrap();
    assert_eq!(browser.console_errors().await.unwrap(), Vec::<String>::new());

    // After a reload the history is the same: the call, its diff, the answer.
    browser.goto(&a.c.app.url(&format!("/s/{}", a.c.session))).await.unwrap();
    browser.wait_for_text(".msg-tool .diff", "+from the agent", Duration::from_secs(30)).await.unwrap();
    browser.close().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_search_hit_on_another_branch_opens_that_branch_at_the_message() {
    use crate::agent::says;
    use crate::support::mock_upstream::Provider;
    let c = crate::runs::chat_with(|_| {}).await;
    let model = "openai/gpt-4o-mini";
    c.mock.enqueue(Provider::OpenAi, says("I will remember marmalade."));
    let first = c.send_ok("The password is marmalade", model).await;
    c.settled(first).await;
    let question = c
        .messages()
        .await
        .into_iter()
        .find(|m| m.text().contains("marmalade") && m.role == arbor::domain::sessions::tree::Role::User)
        .unwrap()
        .id;
    // Edit it: the active path now follows the new branch.
    c.mock.enqueue(Provider::OpenAi, says("Something else then."));
    let res = c
        .app
        .post_form(
            &format!("/s/{}/messages/{question}/edit", c.session),
            &crate::runs::form("Never mind the password", "edit-1", model),
            Some(&c.s),
        )
        .await;
    assert_eq!(res.status(), 200);
    tokio::time::sleep(Duration::from_millis(300)).await;
    c.app.state.search.settle().await;

    let browser = Browser::start().await.unwrap();
    browser.goto(&c.app.url("/")).await.unwrap();
    browse_as(&browser, &c.app, &c.user, &format!("/s/{}", c.session)).await;
    browser.wait_for("#sidebar-q", Duration::from_secs(10)).await.unwrap();
    assert!(
        !browser.page_source().await.unwrap().contains("The password is marmalade"),
        "another branch is active"
    );
    browser.type_into("#sidebar-q", "marmalade").await.unwrap();
    let hit = browser
        .wait_for_text("#search-live .search-hit", "marmalade", Duration::from_secs(10))
        .await
        .unwrap();
    assert!(hit.contains("First session") || hit.contains("password"), "{hit}");
    browser.screenshot(artifacts_dir().join("search-live.png")).await.unwrap();
    browser.click("#search-live .search-hit a").await.unwrap();
    browser.wait_for_text(".msg.is-focused", "marmalade", Duration::from_secs(10)).await.unwrap();
    browser.wait_for_text("#thread", "The password is marmalade", Duration::from_secs(10)).await.unwrap();
    browser.wait_for_text("#thread", "I will remember marmalade.", Duration::from_secs(10)).await.unwrap();
    // That branch is the active one now, for every later page.
    let path = c
        .app
        .state
        .sessions
        .conversation(&arbor::domain::accounts::Actor::for_tests(&c.user), c.session)
        .await
        .unwrap()
        .path;
    assert!(path.iter().any(|m| m.id == question));
    browser.screenshot(artifacts_dir().join("search-branch.png")).await.unwrap();
    assert_eq!(browser.console_errors().await.unwrap(), Vec::<String>::new());
    browser.close().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_picture_is_attached_uploaded_with_progress_sent_and_opens_in_a_lightbox() {
    use crate::agent::says;
    use crate::support::mock_upstream::Provider;
    let c = crate::runs::chat_with(|_| {}).await;
    let dir = tempfile::tempdir().unwrap();
    let picture = dir.path().join("sunset.png");
    image::RgbImage::from_fn(640, 480, |x, y| image::Rgb([(x % 256) as u8, (y % 256) as u8, 128]))
        .save(&picture)
        .unwrap();

    let browser = Browser::start().await.unwrap();
    browser.goto(&c.app.url("/")).await.unwrap();
    browse_as(&browser, &c.app, &c.user, &format!("/s/{}", c.session)).await;
    browser.wait_for("#composer-file", Duration::from_secs(10)).await.unwrap();
    // The file input sits behind the "Attach" label; WebDriver types the path into it.
    browser
        .execute("document.getElementById('composer-file').hidden = false; return true;", &[])
        .await
        .unwrap();
    browser.send_keys("#composer-file", &picture.to_string_lossy()).await.unwrap();
    browser.wait_for("#composer-files .upload-chip[data-upload] img", Duration::from_secs(15)).await.unwrap();
    let ids = browser.value("#composer-attachments").await.unwrap();
    assert_eq!(ids.split(',').count(), 1, "{ids}");

    c.mock.enqueue(Provider::OpenAi, says("A colourful gradient."));
    browser
        .execute("document.getElementById('composer-model').value = 'openai/gpt-4o-mini'; return true;", &[])
        .await
        .unwrap();
    browser.type_into("#composer-message", "What is in this picture?").await.unwrap();
    browser.send_keys("#composer-message", "\u{E007}").await.unwrap();
    browser
        .wait_for_text(
            ".msg-assistant[data-status=complete] .markdown",
            "A colourful gradient.",
            Duration::from_secs(15),
        )
        .await
        .unwrap();
    let thumb =
        browser.wait_for(".msg-user .msg-files .msg-image img", Duration::from_secs(10)).await.unwrap();
    let _ = thumb;
    // The model got the picture.
    let body = c.mock.requests_for(Provider::OpenAi)[0].json().unwrap();
    assert!(body["messages"].to_string().contains("data:image/png;base64,"));
    browser.screenshot(artifacts_dir().join("attachment.png")).await.unwrap();

    browser.click(".msg-user .msg-image").await.unwrap();
    browser.wait_for("dialog#lightbox[open] img", Duration::from_secs(5)).await.unwrap();
    browser.screenshot(artifacts_dir().join("lightbox.png")).await.unwrap();
    // Escape closes it.
    browser.send_keys("dialog#lightbox", "\u{E00C}").await.unwrap();
    browser.wait_for("dialog#lightbox:not([open])", Duration::from_secs(5)).await.unwrap();
    assert_eq!(browser.console_errors().await.unwrap(), Vec::<String>::new());
    browser.close().await.unwrap();
}

/// The README's "first ten minutes", as a new admin lives them: the setup link, the account,
/// a provider, a first answer. The screenshots are the README's (docs/first-ten-minutes/).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_first_ten_minutes_from_the_setup_link_to_a_first_answer() {
    use crate::support::mock_upstream::{self, Provider};
    let mock = mock_upstream::start().await.unwrap();
    let app = TestApp::spawn_with(|c| {
        c.llm.detect_local_ollama = false;
        c.llm.infer_titles = false;
    })
    .await;
    let token = app.state.accounts.open_setup().await.unwrap().expect("a setup link");
    let browser = Browser::start().await.unwrap();
    browser.set_window_size(1280, 800).await.unwrap();
    let shot = |name: &str| artifacts_dir().join(format!("first-ten-minutes-{name}.png"));

    // 1. The link printed at the first start: the account created there is the administrator.
    browser.goto(&app.url(&format!("/setup/{token}"))).await.unwrap();
    browser.wait_for_text("#signup", "becomes its administrator", Duration::from_secs(10)).await.unwrap();
    browser.type_into("#signup-name", "Grace").await.unwrap();
    browser.type_into("#signup-email", "grace@example.com").await.unwrap();
    browser.type_into("#signup-password", "correct horse battery staple").await.unwrap();
    browser.screenshot(shot("1-setup")).await.unwrap();
    browser.click("#signup button[type=submit]").await.unwrap();
    browser.wait_for("#composer-message, .empty-state, main", Duration::from_secs(10)).await.unwrap();

    // 2. A provider for everyone, from the admin console.
    browser.goto(&app.url("/admin/providers")).await.unwrap();
    add_provider_in_console(&browser, &mock, "openai", "OpenAI", "sk-first-ten-minutes-0042").await;
    browser.execute("window.scrollTo(0, 0); return true;", &[]).await.unwrap();
    browser.screenshot(shot("2-provider")).await.unwrap();

    // 3. A first question and its answer.
    mock.enqueue(
        Provider::OpenAi,
        openai_text_reply(
            "Welcome to Arbor. Edit or regenerate any message and a new branch grows; nothing is lost.",
        ),
    );
    browser.goto(&app.url("/")).await.unwrap();
    browser.wait_for("#composer-message", Duration::from_secs(10)).await.unwrap();
    browser.type_into("#composer-message", "What can I do here?").await.unwrap();
    browser.send_keys("#composer-message", "\u{E007}").await.unwrap();
    browser
        .wait_for_text(
            ".msg-assistant[data-status=complete] .markdown",
            "nothing is lost",
            Duration::from_secs(15),
        )
        .await
        .unwrap();
    browser.screenshot(shot("3-first-answer")).await.unwrap();
    // The sidebar is the same on pages that do not draw it themselves.
    for page in ["/settings", "/admin/providers"] {
        browser.goto(&app.url(page)).await.unwrap();
        browser
            .wait_for_text("#sidebar-nav .ws-sessions", "What can I do here?", Duration::from_secs(10))
            .await
            .unwrap();
    }
    let errors = arbor_console_errors(&browser, &app).await;
    assert!(errors.is_empty(), "console errors: {errors:#?}");
    browser.close().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_image_model_picked_in_the_composer_shows_its_picture_in_the_lightbox() {
    use crate::support::mock_upstream::{Provider, Reply};
    let c = crate::runs::chat_with(|cfg| {
        if let Some(p) = cfg.llm.providers.get_mut("openai") {
            p.models.push("gpt-image-1".into());
        }
    })
    .await;
    c.mock.enqueue(Provider::OpenAi, Reply::fixture("openai/images.json"));
    let browser = Browser::start().await.unwrap();
    browser.goto(&c.app.url("/")).await.unwrap();
    browse_as(&browser, &c.app, &c.user, &format!("/s/{}", c.session)).await;
    browser.wait_for("#composer-message", Duration::from_secs(10)).await.unwrap();
    browser
        .execute("document.getElementById('composer-model').value = 'openai/gpt-image-1'; return true;", &[])
        .await
        .unwrap();
    browser.type_into("#composer-message", "A lighthouse at dusk").await.unwrap();
    browser.send_keys("#composer-message", "\u{E007}").await.unwrap();
    // The answer's picture arrives with the run's end, without a reload.
    browser
        .wait_for(".msg-assistant[data-status=complete] .msg-files .msg-image img", Duration::from_secs(15))
        .await
        .unwrap();
    browser.screenshot(artifacts_dir().join("generated-image.png")).await.unwrap();
    browser.click(".msg-assistant .msg-image").await.unwrap();
    browser.wait_for("dialog#lightbox[open] img", Duration::from_secs(5)).await.unwrap();
    browser.send_keys("dialog#lightbox", "\u{E00C}").await.unwrap();
    browser.wait_for("dialog#lightbox:not([open])", Duration::from_secs(5)).await.unwrap();
    assert_eq!(browser.console_errors().await.unwrap(), Vec::<String>::new());
    browser.close().await.unwrap();
}
