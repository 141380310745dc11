//! Ambient files (issue 19): the files the agent read or wrote go with each request once, as
//! they are on disk now; earlier read_file results of them are sent as a pointer; the member
//! pins and drops files in the session's "Files in context" panel.

use serde_json::{Value, json};

use crate::agent::{Agent, agent, calls, says};
use crate::support::mock_upstream::Provider;

const MODEL: &str = "openai/gpt-4o-mini";

fn last_sent(a: &Agent) -> String {
    let body: Value = a.c.mock.requests_for(Provider::OpenAi).last().unwrap().json().unwrap();
    // Newlines as they are, not as JSON escapes them.
    body["messages"].to_string().replace("\\n", "\n")
}

async fn choose(a: &Agent, body: &str, s: &crate::support::TestSession) -> (u16, String) {
    let res = a.c.app.post_form(&format!("/s/{}/files", a.c.session), body, Some(s)).await;
    (res.status().as_u16(), res.text().await.unwrap())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn files_go_once_in_their_latest_version_and_the_member_pins_and_drops_them() {
    let a = agent("auto-edit", |_| {}).await;
    std::fs::create_dir_all(&a.folder).unwrap();
    std::fs::write(a.folder.join("a.md"), "alpha version one").unwrap();

    // The agent reads a.md: the next call carries it once, in its result (it has not changed).
    a.c.mock.enqueue(Provider::OpenAi, calls(&[("r1", "read_file", json!({"path": "notes/a.md"}))]));
    a.c.mock.enqueue(Provider::OpenAi, says("Read it."));
    a.c.send_ok("Read notes/a.md", MODEL).await;
    assert_eq!(a.ended().await, "completed");
    let sent = last_sent(&a);
    assert_eq!(sent.matches("alpha version one").count(), 1, "{sent}");
    assert!(!sent.contains("=== notes/a.md ==="), "an unchanged file is not repeated: {sent}");

    // Changed on disk: the next request carries the new version once, in the block, and the
    // old result points at it.
    std::fs::write(a.folder.join("a.md"), "alpha version two").unwrap();
    a.c.mock.enqueue(Provider::OpenAi, says("It says version two."));
    a.c.send_ok("What does it say now?", MODEL).await;
    assert_eq!(a.ended().await, "completed");
    let sent = last_sent(&a);
    assert!(sent.contains("alpha version two") && !sent.contains("alpha version one"), "{sent}");
    assert_eq!(sent.matches("=== notes/a.md ===").count(), 1);
    assert!(sent.contains("Files in context") && sent.contains("is not repeated here"), "{sent}");

    // A file the agent writes is tracked too.
    a.c.mock.enqueue(
        Provider::OpenAi,
        calls(&[("w1", "write_file", json!({"path": "notes/b.md", "content": "bravo"}))]),
    );
    a.c.mock.enqueue(Provider::OpenAi, says("Wrote b."));
    a.c.send_ok("Write notes/b.md", MODEL).await;
    assert_eq!(a.ended().await, "completed");
    assert!(last_sent(&a).contains("=== notes/b.md ===\nbravo"), "{}", last_sent(&a));

    // The panel lists both; dropping a.md stops sending it (its old result goes as it was).
    let page = a.c.app.get(&format!("/s/{}", a.c.session), Some(&a.c.s.cookie)).await.text().await.unwrap();
    assert!(page.contains("Files in context (2)") && page.contains("<code>notes/a.md</code>"), "{page}");
    let (status, panel) = choose(&a, "path=notes%2Fa.md&choice=drop", &a.c.s).await;
    assert_eq!(status, 200, "{panel}");
    assert!(panel.contains("context-file-dropped") && panel.contains("Files in context (1)"), "{panel}");
    // Pinning a file the path never touched sends it too.
    std::fs::write(a.folder.join("c.md"), "charlie").unwrap();
    assert_eq!(choose(&a, "path=notes%2Fc.md&choice=pin", &a.c.s).await.0, 200);
    a.c.mock.enqueue(Provider::OpenAi, says("Noted."));
    a.c.send_ok("And now?", MODEL).await;
    assert_eq!(a.ended().await, "completed");
    let sent = last_sent(&a);
    assert!(!sent.contains("=== notes/a.md ===") && sent.contains("alpha version one"), "{sent}");
    assert!(sent.contains("=== notes/c.md ===\ncharlie") && sent.contains("=== notes/b.md ==="), "{sent}");
    // Sending it again brings a.md back.
    assert_eq!(choose(&a, "path=notes%2Fa.md&choice=track", &a.c.s).await.0, 200);
    a.c.mock.enqueue(Provider::OpenAi, says("Back."));
    a.c.send_ok("Again?", MODEL).await;
    assert_eq!(a.ended().await, "completed");
    assert!(last_sent(&a).contains("=== notes/a.md ===\nalpha version two"));

    // Bad input: no path, an unknown choice, a control character, a path too long; another
    // member's session is not found.
    let long = format!("path={}&choice=pin", "a".repeat(1_025));
    for bad in ["path=&choice=pin", "path=notes%2Fa.md&choice=burn", "path=a%01b&choice=pin", long.as_str()] {
        let (status, body) = choose(&a, bad, &a.c.s).await;
        assert_eq!(status, 400, "{bad}: {body}");
    }
    // At most 200 choices in a session; changing one already made is still allowed.
    for i in 0..199 {
        let body = format!("path=notes%2Fp{i}.md&choice=pin");
        assert_eq!(choose(&a, &body, &a.c.s).await.0, 200, "{i}");
    }
    let (status, body) = choose(&a, "path=notes%2Fone-more.md&choice=pin", &a.c.s).await;
    assert_eq!(status, 400, "{body}");
    assert!(body.contains("At most 200"), "{body}");
    assert_eq!(choose(&a, "path=notes%2Fp0.md&choice=drop", &a.c.s).await.0, 200);
    let bob = a.c.app.create_user("bob@example.com", arbor::domain::accounts::Role::Member).await;
    let bob_s = a.c.app.login_full(&bob).await;
    assert_eq!(choose(&a, "path=notes%2Fa.md&choice=pin", &bob_s).await.0, 404);
}
