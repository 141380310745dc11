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
