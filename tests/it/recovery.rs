//! Runs that recover (issue 19): a tool call that a stopped run left unfinished is offered
//! again on the page ("Run it" or "Skip", saying truthfully how far it got), and the run goes
//! on from there. The server killed mid-call is in `crash.rs`.

use std::time::{Duration, Instant};

use arbor::domain::sessions::tree::{MessageStatus, Role};
use serde_json::json;

use crate::agent::{Agent, agent, calls, says, write_call};
use crate::support::mock_upstream::Provider;

const MODEL: &str = "openai/gpt-4o-mini";

impl Agent {
    async fn page(&self) -> String {
        self.c.app.get(&format!("/s/{}", self.c.session), Some(&self.c.s.cookie)).await.text().await.unwrap()
    }

    async fn resume(&self, call: uuid::Uuid, decision: &str) -> (u16, String) {
        let res = self
            .c
            .app
            .post_form(
                &format!("/s/{}/tool-calls/{call}/resume", self.c.session),
                &format!("decision={decision}"),
                Some(&self.c.s),
            )
            .await;
        (res.status().as_u16(), res.text().await.unwrap())
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_call_refused_by_stop_is_offered_again_and_run_it_goes_on() {
    let a = agent("suggest", |_| {}).await;
    a.c.mock.enqueue(Provider::OpenAi, write_call("notes/s.txt", "s"));
    a.c.send_ok("Write s", MODEL).await;
    let call = a.paused().await;
    assert_eq!(a.c.post(&format!("/s/{}/stop", a.c.session)).await.status(), 204);
    assert_eq!(a.ended().await, "cancelled");
    let page = a.page().await;
    assert!(page.contains("did not finish") && page.contains("it has had no effect"), "{page}");
    assert!(page.contains(&format!("/tool-calls/{call}/resume")), "{page}");

    // Bad input: only "Run it" or "Skip"; another member's call is not found.
    for bad in ["no", "always", "explain", "", "yes%00"] {
        let (status, body) = a.resume(call, bad).await;
        assert_eq!(status, 400, "{bad}: {body}");
        // A NUL is refused by the form reader before the choice is looked at.
        assert!(body.contains("Run it") || bad.contains("%00"), "{body}");
    }
    let bob = a.c.app.create_user("bob@example.com", arbor::domain::accounts::Role::Member).await;
    let bob_s = a.c.app.login_full(&bob).await;
    let url = format!("/s/{}/tool-calls/{call}/resume", a.c.session);
    assert_eq!(a.c.app.post_form(&url, "decision=yes", Some(&bob_s)).await.status(), 404);
    assert!(!a.folder.join("s.txt").exists(), "nothing ran");

    // Run it: the call runs now and the model answers after it.
    a.c.mock.enqueue(Provider::OpenAi, says("Written after all."));
    let (status, body) = a.resume(call, "yes").await;
    assert_eq!(status, 200, "{body}");
    assert_eq!(a.ended().await, "completed");
    assert_eq!(std::fs::read_to_string(a.folder.join("s.txt")).unwrap(), "s");
    let results = a.tool_results_sent(1);
    assert_eq!(results.len(), 1);
    assert_ne!(results[0]["content"], arbor::domain::runs::context::UNANSWERED_CALL);
    assert_eq!(a.path().await.last().unwrap().text(), "Written after all.");
    // Once resumed it cannot be resumed again, and the page offers nothing more.
    assert_eq!(a.resume(call, "yes").await.0, 409);
    assert!(!a.page().await.contains("/resume\""));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_call_stopped_while_it_ran_can_be_skipped_and_the_agent_goes_on() {
    let (hang, port) = crate::agent::hanging_server().await;
    let a = agent("full-auto", |c| c.agent.fetch_allow = vec!["127.0.0.0/8".into()]).await;
    a.c.mock.enqueue(
        Provider::OpenAi,
        calls(&[
            ("f1", "web_fetch", json!({"url": format!("http://127.0.0.1:{port}/slow")})),
            ("w1", "write_file", json!({"path": "notes/after.txt", "content": "after"})),
        ]),
    );
    a.c.send_ok("Fetch it, then write", MODEL).await;
    let start = Instant::now();
    loop {
        let path = a.path().await;
        if path.last().is_some_and(|m| m.role == Role::Tool && m.status == MessageStatus::Streaming) {
            break;
        }
        assert!(start.elapsed() < Duration::from_secs(20), "the tool never started");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    assert_eq!(a.c.post(&format!("/s/{}/stop", a.c.session)).await.status(), 204);
    assert_eq!(a.ended().await, "cancelled");
    let page = a.page().await;
    assert!(page.contains("stopped while this call was running") && page.contains("web_fetch"), "{page}");
    let fetch = a.calls().await[0].id;

    // Skip: the fetch is declined, the next call of the same answer runs (full-auto allows it),
    // and the model answers after both.
    a.c.mock.enqueue(Provider::OpenAi, says("Skipped the page; wrote the file."));
    let (status, body) = a.resume(fetch, "no_continue").await;
    assert_eq!(status, 200, "{body}");
    assert_eq!(a.ended().await, "completed");
    assert_eq!(std::fs::read_to_string(a.folder.join("after.txt")).unwrap(), "after");
    let results = a.tool_results_sent(1);
    assert_eq!(results.len(), 2, "{results:?}");
    assert!(results[0]["content"].as_str().unwrap().contains("declined"), "{results:?}");
    // The stopped result stays in the tree, beside the path.
    let path = a.path().await;
    assert!(path.iter().all(|m| m.status != MessageStatus::Stopped));
    assert!(a.c.messages().await.iter().any(|m| m.status == MessageStatus::Stopped));
    hang.abort();
}
