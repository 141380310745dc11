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
    arbor::domain::accounts::create_local(
        &app.state.db,
        "ada@example.com",
        "Ada",
        "correct horse battery",
        12,
        Role::Member,
    )
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
    let admin_link = browser.find_all(".topbar-actions a[href='/admin/invitations']").await.unwrap();
    assert_eq!(admin_link.len(), 1, "arbor-admins maps to admin");
    let errors = arbor_console_errors(&browser, &app).await;
    assert!(errors.is_empty(), "console errors: {errors:#?}");
    browser.close().await.unwrap();
}
