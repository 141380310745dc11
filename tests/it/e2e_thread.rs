//! The thread in Chromium: a long session opens at its latest turn, "Jump to latest" appears
//! when the reader scrolls up and brings them back, an answer being written is followed while
//! the reader is at the bottom; and the keyboard shortcuts.

use std::time::{Duration, Instant};

use crate::e2e::openai_text_reply;
use crate::runs::chat_with;
use crate::support::browser::Browser;
use crate::support::mock_upstream::Provider;

const MODEL: &str = "openai/gpt-4o-mini";

/// How far the bottom of the page is below the bottom of the window, in CSS pixels.
async fn distance_from_bottom(browser: &Browser) -> f64 {
    let v = browser
        .execute(
            "var r = document.scrollingElement || document.documentElement; \
             return r.scrollHeight - r.scrollTop - window.innerHeight;",
            &[],
        )
        .await
        .unwrap();
    v.as_f64().unwrap()
}

/// Where an element's top is in the window, in CSS pixels.
async fn top_of(browser: &Browser, id: &str) -> f64 {
    let script = format!("return document.getElementById('{id}').getBoundingClientRect().top;");
    browser.execute(&script, &[]).await.unwrap().as_f64().unwrap()
}

/// Waits until the page is scrolled to (near) its end.
async fn wait_at_bottom(browser: &Browser, what: &str) {
    let started = Instant::now();
    loop {
        let d = distance_from_bottom(browser).await;
        if d < 80.0 {
            return;
        }
        assert!(started.elapsed() < Duration::from_secs(10), "{what}: {d}px from the bottom");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_long_session_opens_at_its_latest_turn_and_follows_the_answer() {
    let c = chat_with(|_| {}).await;
    let long = "Branches keep every version of a conversation. ".repeat(12);
    for i in 0..8 {
        c.mock.enqueue(Provider::OpenAi, openai_text_reply(&format!("Answer {i}. {long}")));
        let answer = c.send_ok(&format!("Question {i}"), MODEL).await;
        c.settled(answer).await;
    }
    let browser = Browser::start().await.unwrap();
    browser.set_window_size(1280, 800).await.unwrap();
    browser.sign_in(&c.app.origin(), &c.s.cookie, &c.app.url(&format!("/s/{}", c.session))).await.unwrap();
    browser.wait_for_text("#thread", "Answer 7.", Duration::from_secs(10)).await.unwrap();

    // Opened at the latest turn, on a page much taller than the window.
    let height = browser
        .execute("return document.documentElement.scrollHeight - window.innerHeight;", &[])
        .await
        .unwrap();
    assert!(height.as_f64().unwrap() > 1000.0, "the page scrolls: {height}");
    wait_at_bottom(&browser, "on opening").await;
    assert_eq!(browser.attribute("#jump-latest", "hidden").await.unwrap().as_deref(), Some("true"));

    // Scrolled up: the button appears and brings the reader back.
    browser.execute("window.scrollTo(0, 0); return true;", &[]).await.unwrap();
    browser.wait_for("#jump-latest:not([hidden])", Duration::from_secs(10)).await.unwrap();
    browser.click("#jump-latest").await.unwrap();
    wait_at_bottom(&browser, "after Jump to latest").await;
    browser.wait_for("#jump-latest[hidden]", Duration::from_secs(10)).await.unwrap();

    // A new answer, longer than the window, is followed to its end.
    let reply = format!("Streaming answer. {}", "Each token lands at the bottom of the page. ".repeat(60));
    c.mock.enqueue(Provider::OpenAi, openai_text_reply(&reply));
    browser.type_into("#composer-message", "One more, please").await.unwrap();
    browser.send_keys("#composer-message", "\u{E007}").await.unwrap();
    browser.wait_for_text("#thread", "Streaming answer.", Duration::from_secs(20)).await.unwrap();
    let started = Instant::now();
    loop {
        let live = browser
            .execute("return document.querySelectorAll('#thread .is-streaming, #thread [data-status=streaming]').length;", &[])
            .await
            .unwrap();
        if live.as_u64() == Some(0) {
            break;
        }
        assert!(started.elapsed() < Duration::from_secs(20), "the answer never finished");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    wait_at_bottom(&browser, "after the streamed answer").await;
    // Screen readers were told it started and ended, not read every token.
    assert_eq!(browser.attribute("#thread", "aria-live").await.unwrap(), None);
    browser.wait_for_text("#run-status", "The answer is complete.", Duration::from_secs(5)).await.unwrap();

    // At the end of the thread the composer covers nothing: the last message's actions sit above
    // it, on the desktop and at phone width.
    for (width, height) in [(1280, 800), (390, 844)] {
        browser.set_window_size(width, height).await.unwrap();
        browser
            .execute("window.scrollTo(0, document.documentElement.scrollHeight); return true;", &[])
            .await
            .unwrap();
        wait_at_bottom(&browser, "resized").await;
        let gap = browser
            .execute(
                "var acts = document.querySelectorAll('#thread .msg-actions');                  var last = acts[acts.length - 1].getBoundingClientRect();                  var composer = document.querySelector('.composer').getBoundingClientRect();                  return composer.top - last.bottom;",
                &[],
            )
            .await
            .unwrap();
        assert!(gap.as_f64().unwrap() >= 0.0, "at {width}px the composer covers the last actions by {gap}px");
    }
    assert_eq!(browser.console_errors().await.unwrap(), Vec::<String>::new(), "console errors");
    browser.close().await.unwrap();
}

/// Which element has the focus: its id, or its tag name.
async fn focused(browser: &Browser) -> String {
    let v = browser
        .execute("var a = document.activeElement; return a ? (a.id || a.tagName.toLowerCase()) : '';", &[])
        .await
        .unwrap();
    v.as_str().unwrap_or_default().to_string()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn keyboard_shortcuts_open_help_focus_fields_and_stop_a_run() {
    use crate::support::mock_upstream::Reply;
    let c = chat_with(|_| {}).await;
    let browser = Browser::start().await.unwrap();
    browser.set_window_size(1280, 800).await.unwrap();
    browser.sign_in(&c.app.origin(), &c.s.cookie, &c.app.url(&format!("/s/{}", c.session))).await.unwrap();
    browser.wait_for("#composer-message", Duration::from_secs(10)).await.unwrap();

    // "?" opens the list, Escape closes it.
    browser.send_keys("body", "?").await.unwrap();
    browser.wait_for("#shortcuts[open]", Duration::from_secs(5)).await.unwrap();
    assert!(browser.text("#shortcuts").await.unwrap().contains("Stop the answer being written"));
    browser.send_keys("#shortcuts", "\u{E00C}").await.unwrap();
    browser.wait_for("#shortcuts:not([open])", Duration::from_secs(5)).await.unwrap();

    // "c" the composer, "/" the search; a letter typed in a field stays a letter.
    browser.send_keys("body", "c").await.unwrap();
    assert_eq!(focused(&browser).await, "composer-message");
    browser.send_keys("#composer-message", "n/c").await.unwrap();
    assert_eq!(browser.value("#composer-message").await.unwrap(), "n/c");
    browser.execute("document.activeElement.blur(); return true;", &[]).await.unwrap();
    browser.send_keys("body", "/").await.unwrap();
    assert_eq!(focused(&browser).await, "sidebar-q");
    browser.clear("#composer-message").await.unwrap();

    // Shift+Escape stops the answer being written.
    c.mock.enqueue(
        Provider::OpenAi,
        Reply::Fixture {
            path: "openai/many_small_chunks.sse".into(),
            chunk_delay_ms: 100,
            first_byte_delay_ms: 0,
        },
    );
    browser.type_into("#composer-message", "Tell me a long story").await.unwrap();
    browser.send_keys("#composer-message", "\u{E007}").await.unwrap();
    browser.wait_for("#thread .is-streaming", Duration::from_secs(10)).await.unwrap();
    browser.send_keys("#composer-message", "\u{E008}\u{E00C}").await.unwrap();
    browser.wait_for_text("#thread", "Stopped.", Duration::from_secs(15)).await.unwrap();

    // Saving a form that replaces its own section moves the focus to what replaced it.
    browser.goto(&c.app.url("/settings")).await.unwrap();
    browser.wait_for("#default-model", Duration::from_secs(10)).await.unwrap();
    browser.click("#settings form[hx-post='/settings/model'] button[type=submit]").await.unwrap();
    browser
        .wait_for_text("#settings .flash-ok", "Default model saved.", Duration::from_secs(10))
        .await
        .unwrap();
    let started = Instant::now();
    while focused(&browser).await != "settings" {
        assert!(started.elapsed() < Duration::from_secs(5), "focus on {}", focused(&browser).await);
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    browser.goto(&c.app.url(&format!("/s/{}", c.session))).await.unwrap();
    browser.wait_for("#composer-message", Duration::from_secs(10)).await.unwrap();

    // "n" starts a new session.
    browser.execute("document.activeElement.blur(); return true;", &[]).await.unwrap();
    browser.send_keys("body", "n").await.unwrap();
    let started = Instant::now();
    while browser.current_url().await.unwrap() != c.app.url("/") {
        assert!(started.elapsed() < Duration::from_secs(10), "n did not open a new session");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    assert_eq!(browser.console_errors().await.unwrap(), Vec::<String>::new(), "console errors");
    browser.close().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_member_chooses_dark_and_every_page_follows_in_screenshots() {
    let c = chat_with(|_| {}).await;
    c.mock.enqueue(Provider::OpenAi, openai_text_reply("Here is some `code` and a list:\n\n- one\n- two"));
    let answer = c.send_ok("Show me the themes", MODEL).await;
    c.settled(answer).await;
    let browser = Browser::start().await.unwrap();
    browser.sign_in(&c.app.origin(), &c.s.cookie, &c.app.url("/")).await.unwrap();
    let background = || async {
        let v =
            browser.execute("return getComputedStyle(document.body).backgroundColor;", &[]).await.unwrap();
        v.as_str().unwrap_or_default().to_string()
    };
    let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/artifacts");
    std::fs::create_dir_all(&dir).unwrap();
    let session_page = format!("/s/{}", c.session);
    let pages = [
        ("home", "/"),
        ("session", session_page.as_str()),
        ("settings", "/settings"),
        ("search", "/search?q=themes"),
    ];
    for theme in ["light", "dark"] {
        // Chosen in the settings, as a member does.
        browser.set_window_size(1280, 800).await.unwrap();
        browser.goto(&c.app.url("/settings")).await.unwrap();
        browser.wait_for("#theme-form", Duration::from_secs(10)).await.unwrap();
        browser
            .execute(&format!("document.getElementById('theme').value = '{theme}'; return true;"), &[])
            .await
            .unwrap();
        browser.click("#theme-form button[type=submit]").await.unwrap();
        browser
            .wait_for(&format!("html[data-theme={theme}] #theme-form"), Duration::from_secs(10))
            .await
            .unwrap();
        for (name, path) in pages {
            for (width, height, size) in [(1280, 800, "desktop"), (390, 844, "phone")] {
                browser.set_window_size(width, height).await.unwrap();
                browser.goto(&c.app.url(path)).await.unwrap();
                browser
                    .wait_for(&format!("html[data-theme={theme}] #content"), Duration::from_secs(10))
                    .await
                    .unwrap();
                let bg = background().await;
                let expected = if theme == "dark" { "rgb(19, 23, 22)" } else { "rgb(" };
                assert!(
                    bg.starts_with(expected) && (theme == "dark" || bg != "rgb(19, 23, 22)"),
                    "{theme} {name}: {bg}"
                );
                browser.screenshot(dir.join(format!("page-{name}-{size}-{theme}.png"))).await.unwrap();
            }
        }
    }
    assert_eq!(browser.console_errors().await.unwrap(), Vec::<String>::new(), "console errors");
    browser.close().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn earlier_turns_load_above_without_moving_what_is_on_screen() {
    let c = chat_with(|_| {}).await;
    // 22 turns: more than the 40 messages a session page shows at first.
    for i in 0..22 {
        c.mock.enqueue(Provider::OpenAi, openai_text_reply(&format!("Answer number {i}.")));
        let answer = c.send_ok(&format!("Question number {i}"), MODEL).await;
        c.settled(answer).await;
    }
    let browser = Browser::start().await.unwrap();
    browser.set_window_size(1280, 800).await.unwrap();
    browser.sign_in(&c.app.origin(), &c.s.cookie, &c.app.url(&format!("/s/{}", c.session))).await.unwrap();
    browser.wait_for_text("#thread", "Answer number 21.", Duration::from_secs(10)).await.unwrap();
    wait_at_bottom(&browser, "on opening").await;
    assert!(
        !browser.text("#thread").await.unwrap().contains("Question number 0"),
        "the first turns wait above"
    );

    // Up at the top, the older turns load above the first message shown, which stays where it
    // was on screen.
    let first_shown =
        browser.execute("return document.querySelector('#thread .msg').id;", &[]).await.unwrap();
    let id = first_shown.as_str().unwrap().to_string();
    // Measured in the same script as the scroll, before any request can answer.
    let before = browser
        .execute(
            &format!(
                "window.scrollTo(0, 0); return document.getElementById('{id}').getBoundingClientRect().top;"
            ),
            &[],
        )
        .await
        .unwrap()
        .as_f64()
        .unwrap();
    browser.wait_for_text("#thread", "Question number 0", Duration::from_secs(10)).await.unwrap();
    let after = top_of(&browser, &id).await;
    assert!((after - before).abs() < 2.0, "the message moved from {before} to {after}");
    assert_eq!(browser.console_errors().await.unwrap(), Vec::<String>::new(), "console errors");
    browser.close().await.unwrap();
}
