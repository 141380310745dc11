//! Accessibility in Chromium with axe-core (from npm, tests/services): no serious or critical
//! violation on any page a member or an admin sees, in the light and the dark theme.

use std::time::{Duration, Instant};

use arbor::domain::accounts::{Role, Theme};

use crate::e2e::openai_text_reply;
use crate::runs::chat_with;
use crate::support::browser::Browser;
use crate::support::mock_upstream::Provider;

/// Where a page's screenshot goes: tests/artifacts/page-<path>-<size>-<theme>.png.
fn shot(path: &str, size: &str, theme: &str) -> std::path::PathBuf {
    let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/artifacts");
    std::fs::create_dir_all(&dir).unwrap();
    let name: String = path
        .trim_matches('/')
        .chars()
        .map(|c| if c.is_ascii_alphanumeric() { c } else { '-' })
        .take(40)
        .collect();
    dir.join(format!("page-{}-{size}-{theme}.png", if name.is_empty() { "home" } else { &name }))
}

/// Visible controls smaller than 44 × 44 px, one line each. Not counted, as WCAG 2.5.8 allows:
/// links inside a sentence, text in answers, and checkboxes whose label takes the tap too.
async fn small_targets(browser: &Browser) -> serde_json::Value {
    browser
        .execute(
            "return Array.from(document.querySelectorAll('a[href], button, input, select, textarea, summary, label.btn'))                .filter(function (e) { var r = e.getBoundingClientRect(); var s = getComputedStyle(e);                  return r.width > 0 && r.height > 0 && s.visibility !== 'hidden' && !e.closest('.markdown') \
                 && !(/^(checkbox|radio)$/.test(e.type) && e.labels && e.labels.length) \
                 && !(e.tagName === 'A' && e.closest('p')) && (r.height < 44 || r.width < 44); })                .map(function (e) { var r = e.getBoundingClientRect(); return e.tagName + '.' + e.className + ' ' + (e.textContent || e.value || '').trim().slice(0, 20) + ' ' + Math.round(r.width) + 'x' + Math.round(r.height); });",
            &[],
        )
        .await
        .unwrap()
}

/// The serious and critical violations axe-core finds on the page now, one line each.
async fn serious_violations(browser: &Browser) -> Vec<String> {
    let path = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/services/node_modules/axe-core/axe.min.js");
    let source =
        std::fs::read_to_string(&path).expect("axe-core is installed by scripts/test (tests/services)");
    browser.execute(&format!("{source}\nreturn true;"), &[]).await.unwrap();
    browser
        .execute(
            "window.__axe = null; axe.run(document, { resultTypes: ['violations'] }).then(function (r) { \
               window.__axe = r.violations.filter(function (v) { return v.impact === 'serious' || v.impact === 'critical'; }) \
                 .map(function (v) { return v.impact + ' ' + v.id + ': ' + v.help + ' @ ' + \
                   v.nodes.slice(0, 3).map(function (n) { return n.target.join(' '); }).join(' | '); }); \
             }, function (e) { window.__axe = ['axe failed: ' + e]; }); return true;",
            &[],
        )
        .await
        .unwrap();
    let started = Instant::now();
    loop {
        let v = browser.execute("return window.__axe;", &[]).await.unwrap();
        if let Some(list) = v.as_array() {
            return list.iter().filter_map(|x| x.as_str().map(str::to_string)).collect();
        }
        assert!(started.elapsed() < Duration::from_secs(30), "axe-core did not finish");
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn no_page_has_a_serious_or_critical_accessibility_violation() {
    let c = chat_with(|_| {}).await;
    c.mock.enqueue(
        Provider::OpenAi,
        openai_text_reply("Code:\n\n```rust\nfn main() {}\n```\n\nMaths: $e^{i\\pi} + 1 = 0$\n\n| a | b |\n|---|---|\n| 1 | 2 |"),
    );
    let answer = c.send_ok("Show me everything", "openai/gpt-4o-mini").await;
    c.settled(answer).await;
    let admin = c.app.create_user("root@example.com", Role::Admin).await;
    let admin_session = c.app.login_full(&admin).await;
    let base = c.mock.url(Provider::OpenAi);
    let provider = crate::admin::add_provider(&c.app, &admin_session, "team", &base, "").await;
    let provider_page = format!("/admin/providers/{provider}");
    let delete_page = format!("/admin/users/{}/delete", c.user.id);
    let browser = Browser::start().await.unwrap();
    browser.goto(&c.app.url("/login")).await.unwrap();
    browser.wait_for("#content", Duration::from_secs(10)).await.unwrap();
    let mut found = Vec::new();
    for v in serious_violations(&browser).await {
        found.push(format!("/login: {v}"));
    }
    let session_page = format!("/s/{}", c.session);
    let member_pages = [
        "/",
        session_page.as_str(),
        "/search?q=everything",
        "/settings",
        "/settings/tokens",
        "/settings/aliases",
        "/settings/approvals",
        "/settings/mcp",
        "/settings/prompts",
        "/settings/links",
        "/account/sessions",
        "/account/password",
    ];
    let admin_pages = [
        "/admin/users",
        "/admin/invitations",
        "/admin/providers",
        "/admin/quotas",
        "/admin/usage",
        "/admin/audit",
        "/admin/mcp",
        "/admin/groups",
        "/admin/links",
        "/admin/host-folders",
        provider_page.as_str(),
        delete_page.as_str(),
    ];
    for theme in [Theme::Light, Theme::Dark] {
        for (user, pages) in [(&c.user, &member_pages[..]), (&admin, &admin_pages[..])] {
            arbor::storage::repos::users::set_theme(&c.app.state.db, user.id, theme).await.unwrap();
            let cookie = c.app.login(user).await;
            browser.sign_in(&c.app.origin(), &cookie, &c.app.url("/")).await.unwrap();
            for path in pages {
                browser.goto(&c.app.url(path)).await.unwrap();
                browser.wait_for("#content", Duration::from_secs(10)).await.unwrap();
                for v in serious_violations(&browser).await {
                    found.push(format!("{path} ({}): {v}", theme.as_str()));
                }
                browser.screenshot(shot(path, "desktop", theme.as_str())).await.unwrap();
            }
        }
    }
    // On the phone every tap target is at least 44 px (and every page's phone screenshots).
    browser.set_window_size(390, 844).await.unwrap();
    for (theme, (user, pages)) in [Theme::Light, Theme::Dark]
        .into_iter()
        .flat_map(|t| [(t, (&c.user, &member_pages[..])), (t, (&admin, &admin_pages[..]))])
    {
        arbor::storage::repos::users::set_theme(&c.app.state.db, user.id, theme).await.unwrap();
        let cookie = c.app.login(user).await;
        browser.sign_in(&c.app.origin(), &cookie, &c.app.url("/")).await.unwrap();
        for path in pages {
            browser.goto(&c.app.url(path)).await.unwrap();
            browser.wait_for("#content", Duration::from_secs(10)).await.unwrap();
            browser.screenshot(shot(path, "phone", theme.as_str())).await.unwrap();
            let small = small_targets(&browser).await;
            if small != serde_json::json!([]) {
                found.push(format!("{path} (phone): small tap targets {small}"));
            }
        }
    }
    assert_eq!(browser.console_errors().await.unwrap(), Vec::<String>::new(), "console errors");
    browser.close().await.unwrap();
    assert!(found.is_empty(), "{} violations:\n{}", found.len(), found.join("\n"));
}

/// A session with a tool card, an image and a confirmation dialog waiting, in both themes; and
/// a control that axe-core really runs (a nameless button is found).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_session_with_tools_an_image_and_a_waiting_dialog_has_no_serious_violation() {
    use crate::agent::{agent, calls, says};
    use crate::files::{chip_ids, png, upload};
    use serde_json::json;
    let a = agent("suggest", |_| {}).await;
    let c = &a.c;
    std::fs::create_dir_all(&a.folder).unwrap();
    std::fs::write(a.folder.join("readme.md"), "hello from the folder\n").unwrap();
    c.mock.enqueue(Provider::OpenAi, calls(&[("call_r", "read_file", json!({ "path": "notes/readme.md" }))]));
    c.mock.enqueue(Provider::OpenAi, says("It says hello."));
    let first = c.send_ok("Read the readme", "openai/gpt-4o-mini").await;
    c.settled(first).await;

    let res = upload(c, &c.s, "red.png", png()).await;
    assert_eq!(res.status(), 200);
    let (upload_id, _) = chip_ids(&res.text().await.unwrap());
    c.mock.enqueue(Provider::OpenAi, says("A red square."));
    let form = format!(
        "{}&attachments={upload_id}",
        crate::runs::form("What is this?", &uuid::Uuid::new_v4().simple().to_string(), "openai/gpt-4o-mini")
    );
    let res = c.app.post_form(&format!("/s/{}/messages", c.session), &form, Some(&c.s)).await;
    assert_eq!(res.status(), 200);
    c.settled(crate::runs::streaming_id(&res.text().await.unwrap())).await;

    c.mock.enqueue(
        Provider::OpenAi,
        calls(&[("call_w", "write_file", json!({ "path": "notes/todo.md", "content": "# Notes\n" }))]),
    );
    c.send_ok("Save a note", "openai/gpt-4o-mini").await;
    a.paused().await;

    let browser = Browser::start().await.unwrap();
    let mut found = Vec::new();
    for theme in [Theme::Light, Theme::Dark] {
        arbor::storage::repos::users::set_theme(&c.app.state.db, c.user.id, theme).await.unwrap();
        browser.sign_in(&c.app.origin(), &c.s.cookie, &c.app.url("/")).await.unwrap();
        browser.goto(&c.app.url(&format!("/s/{}", c.session))).await.unwrap();
        browser.wait_for(".confirm", Duration::from_secs(10)).await.unwrap();
        browser.wait_for(".msg-tool", Duration::from_secs(10)).await.unwrap();
        browser.wait_for("#thread img", Duration::from_secs(10)).await.unwrap();
        for v in serious_violations(&browser).await {
            found.push(format!("({}): {v}", theme.as_str()));
        }
    }
    assert!(found.is_empty(), "{} violations:\n{}", found.len(), found.join("\n"));
    browser.set_window_size(390, 844).await.unwrap();
    browser.goto(&c.app.url(&format!("/s/{}", c.session))).await.unwrap();
    browser.wait_for(".confirm", Duration::from_secs(10)).await.unwrap();
    let small = small_targets(&browser).await;
    assert_eq!(small, serde_json::json!([]), "tap targets under 44 px on the phone");
    // The control: a button without a name is a critical violation axe-core reports.
    browser
        .execute(
            "document.getElementById('content').appendChild(document.createElement('button')); return true;",
            &[],
        )
        .await
        .unwrap();
    let control = serious_violations(&browser).await;
    assert!(control.iter().any(|v| v.contains("button-name")), "{control:?}");
    assert_eq!(browser.console_errors().await.unwrap(), Vec::<String>::new(), "console errors");
    browser.close().await.unwrap();
}
