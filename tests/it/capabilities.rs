//! Models the catalog does not know (every Ollama, vLLM or llama.cpp model): they are offered
//! tools, and one whose server refuses tool definitions is asked again without them, the member
//! is told in the reply, and it is not offered tools again. A server that reports no usage
//! still gets a context gauge.

use serde_json::json;

use crate::agent::{agent, calls, says};
use crate::support::mock_upstream::{Provider, Reply};

const LOCAL: &str = "openai/my-local-llama";
const TINY: &str = "openai/tiny-model";

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_unknown_model_gets_tools_and_one_that_refuses_them_answers_without() {
    let a = agent("auto-edit", |c| {
        if let Some(p) = c.llm.providers.get_mut("openai") {
            p.models.extend(["my-local-llama".to_string(), "tiny-model".to_string()]);
        }
    })
    .await;
    // A tool-using turn on a model nothing is known about.
    a.c.mock.enqueue(
        Provider::OpenAi,
        calls(&[("call_w1", "write_file", json!({"path": "notes/plan.md", "content": "step one\n"}))]),
    );
    a.c.mock.enqueue(Provider::OpenAi, says("Written."));
    a.c.send_ok("Write the plan", LOCAL).await;
    assert_eq!(a.ended().await, "completed");
    assert_eq!(std::fs::read_to_string(a.folder.join("plan.md")).unwrap(), "step one\n");
    let first = a.c.mock.requests_for(Provider::OpenAi)[0].json().unwrap();
    assert_eq!(first["model"], "my-local-llama");
    assert!(first["tools"].as_array().is_some_and(|t| !t.is_empty()), "tools offered: {first}");

    // A server that refuses tools, as Ollama does for a model without tool support.
    let refusal = json!({ "error": { "message": "registry.ollama.ai/library/tiny-model:latest does not support tools",
        "type": "api_error", "param": null, "code": null } });
    a.c.mock.enqueue(Provider::OpenAi, Reply::json(400, refusal.to_string()));
    a.c.mock.enqueue(Provider::OpenAi, says("A plain answer."));
    a.c.send_ok("Hello", TINY).await;
    assert_eq!(a.ended().await, "completed");
    let path = a.path().await;
    let last = path.last().unwrap();
    assert_eq!(last.text(), "A plain answer.");
    let parts = serde_json::to_string(&last.parts).unwrap();
    assert!(parts.contains("does not take tool definitions"), "the member is told: {parts}");
    let sent = a.c.mock.requests_for(Provider::OpenAi);
    let (refused, again) = (sent[2].json().unwrap(), sent[3].json().unwrap());
    assert!(refused.get("tools").is_some() && again.get("tools").is_none(), "asked again without tools");

    // The next run does not offer it tools at all.
    a.c.mock.enqueue(Provider::OpenAi, says("Still plain."));
    a.c.send_ok("Again", TINY).await;
    assert_eq!(a.ended().await, "completed");
    let next = a.c.mock.requests_for(Provider::OpenAi)[4].json().unwrap();
    assert!(next.get("tools").is_none(), "{next}");
    assert!(a.c.mock.problems().is_empty(), "{:?}", a.c.mock.problems());

    // The server reported no usage: Arbor's estimate fills the gauge, which never reads 0 %.
    let page = a.c.app.get(&format!("/s/{}", a.c.session), Some(&a.c.s.cookie)).await.text().await.unwrap();
    let gauge = page.split("class=\"gauge\"").nth(1).expect("a context gauge");
    let percent: u64 =
        gauge.split("% of context").next().unwrap().rsplit(['>', ' ']).next().unwrap().parse().unwrap();
    assert!((1..=100).contains(&percent), "{gauge}");
    assert!(gauge.contains("of 8192 tokens (window assumed: unknown model)"), "{gauge}");
}
