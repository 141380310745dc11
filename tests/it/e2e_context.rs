//! Managing a long session in Chromium (issue 19): `/compress` leaves a summary card that opens
//! in place, `/task` starts a task the agent finishes, and the "Files in context" panel lists the
//! file the agent read and drops it.

use std::time::Duration;

use serde_json::json;

use crate::agent::{agent, calls, says};
use crate::e2e::openai_text_reply;
use crate::support::browser::Browser;
use crate::support::mock_upstream::Provider;

const WAIT: Duration = Duration::from_secs(20);

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn compress_a_task_and_the_files_panel_work_in_the_browser() {
    let a = agent("auto-edit", |_| {}).await;
    let c = &a.c;
    let page = c.app.url(&format!("/s/{}", c.session));
    let browser = Browser::start().await.unwrap();
    browser.set_window_size(1280, 900).await.unwrap();
    browser.sign_in(&c.app.origin(), &c.s.cookie, &page).await.unwrap();
    browser.wait_for("#composer-message", WAIT).await.unwrap();

    c.mock.enqueue(Provider::OpenAi, openai_text_reply("Hello, Ada."));
    browser.type_into("#composer-message", "Hello").await.unwrap();
    browser.press_enter("#composer-message").await.unwrap();
    browser.wait_for_text("#thread", "Hello, Ada.", WAIT).await.unwrap();

    // /compress: the summary card appears, closed, and opens in place.
    c.mock.enqueue(Provider::OpenAi, openai_text_reply("## Goals\nGreet Ada warmly."));
    browser.type_into("#composer-message", "/compress").await.unwrap();
    browser.press_enter("#composer-message").await.unwrap();
    browser.wait_for("#thread .msg-summary .summary-card", WAIT).await.unwrap();
    browser.click("#thread .msg-summary .summary-card > summary").await.unwrap();
    browser.wait_for("#thread .msg-summary .summary-card[open]", WAIT).await.unwrap();
    browser.wait_for_text("#thread .msg-summary", "Greet Ada warmly.", WAIT).await.unwrap();

    // /task: the agent writes a file inside the task and finishes it.
    c.mock.enqueue(
        Provider::OpenAi,
        calls(&[("w1", "write_file", json!({"path": "notes/x.md", "content": "ex"}))]),
    );
    c.mock
        .enqueue(Provider::OpenAi, calls(&[("f1", "finish_task", json!({"summary": "Wrote notes/x.md."}))]));
    c.mock.enqueue(Provider::OpenAi, says("The task is done."));
    browser.type_into("#composer-message", "/task Write notes/x.md").await.unwrap();
    browser.press_enter("#composer-message").await.unwrap();
    browser.wait_for("#thread .msg-task_start", WAIT).await.unwrap();
    assert_eq!(a.ended().await, "completed");
    browser.goto(&page).await.unwrap();
    browser.wait_for_text("#thread", "The task is done.", WAIT).await.unwrap();
    browser.wait_for("#thread .msg-task_end .task-card", WAIT).await.unwrap();
    assert!(browser.text("#thread .msg-task_start").await.unwrap().contains("Write notes/x.md"));

    // What the task did stays inside it: the file it wrote is not carried until touched again.
    assert!(browser.text("#context-files > summary").await.unwrap().contains("(0)"));
    c.mock.enqueue(Provider::OpenAi, calls(&[("r1", "read_file", json!({"path": "notes/x.md"}))]));
    c.mock.enqueue(Provider::OpenAi, says("It says ex."));
    browser.type_into("#composer-message", "Read notes/x.md").await.unwrap();
    browser.press_enter("#composer-message").await.unwrap();
    // Seven calls in all by the end of this run (hello, summary, three in the task, two here).
    let started = std::time::Instant::now();
    while c.mock.requests_for(Provider::OpenAi).len() < 7 {
        assert!(started.elapsed() < WAIT, "the read never reached the model");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    assert_eq!(a.ended().await, "completed");
    browser.goto(&page).await.unwrap();
    browser.wait_for_text("#thread", "It says ex.", WAIT).await.unwrap();

    // The panel lists the file the agent read; Drop stops sending it.
    // The thread opened at its latest turn: bring the panel (above it) out from under the bar.
    let center = "document.querySelector(arguments[0]).scrollIntoView({block: 'center'}); return true;";
    browser.execute(center, &[json!("#context-files")]).await.unwrap();
    browser.click("#context-files > summary").await.unwrap();
    browser.wait_for_text("#context-files", "notes/x.md", WAIT).await.unwrap();
    assert!(browser.text("#context-files > summary").await.unwrap().contains("(1)"));
    browser.execute(center, &[json!("#context-files .context-file button[value=drop]")]).await.unwrap();
    browser.click("#context-files .context-file button[value=drop]").await.unwrap();
    browser.wait_for("#context-files .context-file-dropped", WAIT).await.unwrap();
    assert!(browser.text("#context-files > summary").await.unwrap().contains("(0)"));
    assert_eq!(browser.console_errors().await.unwrap(), Vec::<String>::new(), "console errors");
    browser.close().await.unwrap();
}
