//! Models the catalog does not know (every Ollama, vLLM or llama.cpp model): what their server
//! says they can do is asked for and used; they are offered tools by default, and one whose server refuses tool definitions is asked again without them, the member
//! is told in the reply, and it is not offered tools again. A server that reports no usage
//! still gets a context gauge.

use serde_json::json;

use crate::agent::{agent, calls, says};
use crate::support::mock_upstream::{Provider, Reply};

const LOCAL: &str = "openai/llama3.2:latest";
const TINY: &str = "openai/tiny-model";

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_unknown_model_gets_tools_and_one_that_refuses_them_answers_without() {
    let a = agent("auto-edit", |c| {
        if let Some(p) = c.llm.providers.get_mut("openai") {
            p.models.extend(["llama3.2:latest".to_string(), "tiny-model".to_string()]);
        }
    })
    .await;
    // An Ollama model the catalog does not know: its list says nothing, `/api/show` says it
    // takes tools and images and reads 131,072 tokens. Then a tool-using turn.
    a.c.mock.enqueue(Provider::OpenAi, Reply::fixture("openai/models_ollama.json"));
    a.c.mock.enqueue(Provider::OpenAi, Reply::fixture("openai/ollama_show.json"));
    a.c.mock.enqueue(
        Provider::OpenAi,
        calls(&[("call_w1", "write_file", json!({"path": "notes/plan.md", "content": "step one\n"}))]),
    );
    a.c.mock.enqueue(Provider::OpenAi, says("Written."));
    a.c.send_ok("Write the plan", LOCAL).await;
    assert_eq!(a.ended().await, "completed");
    assert_eq!(std::fs::read_to_string(a.folder.join("plan.md")).unwrap(), "step one\n");
    let sent = a.c.mock.requests_for(Provider::OpenAi);
    assert_eq!((sent[0].path.as_str(), sent[1].path.as_str()), ("/openai/v1/models", "/openai/api/show"));
    assert_eq!(sent[1].json().unwrap()["model"], "llama3.2:latest");
    let first = sent[2].json().unwrap();
    assert_eq!(first["model"], "llama3.2:latest");
    assert!(first["tools"].as_array().is_some_and(|t| !t.is_empty()), "tools offered: {first}");

    // A server that says nothing about a model and refuses tools when they come, as a small
    // llama.cpp or Ollama model without tool support does.
    a.c.mock.enqueue(Provider::OpenAi, Reply::fixture("openai/models_ollama.json"));
    a.c.mock.enqueue(Provider::OpenAi, Reply::json(404, r#"{"error":"model 'tiny-model' not found"}"#));
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
    let (refused, again) = (sent[6].json().unwrap(), sent[7].json().unwrap());
    assert!(refused.get("tools").is_some() && again.get("tools").is_none(), "asked again without tools");

    // The next run does not offer it tools at all.
    a.c.mock.enqueue(Provider::OpenAi, says("Still plain."));
    a.c.send_ok("Again", TINY).await;
    assert_eq!(a.ended().await, "completed");
    let next = a.c.mock.requests_for(Provider::OpenAi)[8].json().unwrap();
    assert!(next.get("tools").is_none(), "{next}");
    assert!(a.c.mock.problems().is_empty(), "{:?}", a.c.mock.problems());

    // What the provider said is cached: the third run asked nothing but the answer.
    assert_eq!(a.c.mock.requests_for(Provider::OpenAi).len(), 9);
    // The server reported no usage: Arbor's estimate fills the gauge, which never reads 0 %.
    let page = a.c.app.get(&format!("/s/{}", a.c.session), Some(&a.c.s.cookie)).await.text().await.unwrap();
    let gauge = page.split("class=\"gauge\"").nth(1).expect("a context gauge");
    let percent: u64 =
        gauge.split("% of context").next().unwrap().rsplit(['>', ' ']).next().unwrap().parse().unwrap();
    assert!((1..=100).contains(&percent), "{gauge}");
    assert!(gauge.contains("of 8192 tokens (window assumed: unknown model)"), "{gauge}");
    // The Ollama model's window is the one its server stated.
    let actor = arbor::domain::accounts::Actor::for_tests(&a.c.user);
    let local = a.c.app.state.engine.providers().resolve(&actor, LOCAL).await.unwrap();
    assert_eq!((local.info.context_window, local.info.tools, local.info.vision), (131_072, true, true));
    assert!(local.info.known, "a stated window is not assumed");
}
