//! The gateway's Responses and Google GenAI surfaces and its answers in each caller's dialect:
//! unknown routes and methods, oversized bodies, too many tools, malformed and unknown items,
//! another member's stored response, and a stream the upstream cuts (recorded once).

use arbor::domain::accounts::Role;
use serde_json::{Value, json};

use crate::gateway::{api_with, token};
use crate::support::mock_upstream::{Provider, Reply};

/// The three error shapes.
fn is_openai_error(v: &Value) -> bool {
    v["error"]["message"].is_string() && v["error"]["type"].is_string()
}

fn is_anthropic_error(v: &Value) -> bool {
    v["type"] == "error" && v["error"]["type"].is_string() && v["error"]["message"].is_string()
}

fn is_google_error(v: &Value, code: u16) -> bool {
    v["error"]["code"] == code && v["error"]["status"].is_string() && v["error"]["message"].is_string()
}

#[tokio::test]
async fn unknown_routes_and_methods_answer_json_in_the_callers_dialect() {
    let api = api_with(|_| {}).await;
    let t = token(&api, "api", "").await;
    let send = |method: reqwest::Method, path: &str| {
        api.app
            .client
            .request(method, api.app.url(path))
            .header("Authorization", format!("Bearer {t}"))
            .send()
    };
    let res = send(reqwest::Method::POST, "/v1/no/such/route").await.unwrap();
    assert_eq!(res.status(), 404);
    assert!(res.headers()["content-type"].to_str().unwrap().starts_with("application/json"));
    assert!(is_openai_error(&res.json().await.unwrap()));
    let res = send(reqwest::Method::GET, "/v1/chat/completions").await.unwrap();
    assert_eq!(res.status(), 405);
    assert!(is_openai_error(&res.json().await.unwrap()));
    let res = send(reqwest::Method::PUT, "/v1/messages").await.unwrap();
    assert_eq!(res.status(), 405);
    assert!(is_anthropic_error(&res.json().await.unwrap()));
    let res = send(reqwest::Method::POST, "/v1beta/cachedContents").await.unwrap();
    assert_eq!(res.status(), 404);
    assert!(is_google_error(&res.json().await.unwrap(), 404));
    let res = send(reqwest::Method::POST, "/v1beta/models/imagen-4:predict").await.unwrap();
    assert_eq!(res.status(), 404);
    assert!(is_google_error(&res.json().await.unwrap(), 404));
    // Gemini's clients send their key as x-goog-api-key: no CSRF refusal, no HTML.
    let res = api
        .app
        .client
        .post(api.app.url("/v1beta/models/gemini-2.5-flash:generateContent"))
        .header("x-goog-api-key", "arb_wrong")
        .json(&json!({ "contents": [{ "parts": [{ "text": "hi" }] }] }))
        .send()
        .await
        .unwrap();
    assert_eq!(res.status(), 401);
    assert!(is_google_error(&res.json().await.unwrap(), 401));
    // The key may also come as ?key=.
    let res = api.app.client.get(api.app.url(&format!("/v1beta/models?key={t}"))).send().await.unwrap();
    assert_eq!(res.status(), 200);
    let models: Value = res.json().await.unwrap();
    assert!(models["models"].as_array().unwrap().iter().any(|m| m["name"] == "models/openai/gpt-4o-mini"));
    let res =
        api.app.client.get(api.app.url(&format!("/v1beta/models/openai/gpt-4o-mini?key={t}"))).send().await;
    assert_eq!(res.unwrap().json::<Value>().await.unwrap()["name"], "models/openai/gpt-4o-mini");
    // Pages are still HTML.
    let res = api.app.get("/no/such/page", None).await;
    assert_eq!(res.status(), 404);
    assert!(res.headers()["content-type"].to_str().unwrap().starts_with("text/html"));
}

#[tokio::test]
async fn oversized_bodies_and_too_many_tools_are_refused_in_each_dialect() {
    let api = api_with(|_| {}).await;
    let t = token(&api, "api", "").await;
    let big = vec![b'x'; 50 * 1024 * 1024];
    let many_tools: Vec<Value> = (0..10_000).map(|i| json!({ "name": format!("t{i}") })).collect();
    let gemini_tools = json!([{ "functionDeclarations": many_tools }]);
    let responses_tools: Vec<Value> =
        (0..10_000).map(|i| json!({ "type": "function", "name": format!("t{i}") })).collect();
    for (path, tools_body, shape) in [
        (
            "/v1/responses",
            json!({ "model": "openai/gpt-4o-mini", "input": "hi", "tools": responses_tools }),
            "openai",
        ),
        (
            "/v1/messages",
            json!({ "model": "openai/gpt-4o-mini", "max_tokens": 5, "messages": [{ "role": "user", "content": "hi" }], "tools": many_tools }),
            "anthropic",
        ),
        (
            "/v1beta/models/gpt-4o-mini:generateContent",
            json!({ "contents": [{ "parts": [{ "text": "hi" }] }], "tools": gemini_tools }),
            "google",
        ),
    ] {
        let res = api
            .app
            .client
            .post(api.app.url(path))
            .header("Authorization", format!("Bearer {t}"))
            .header("Content-Type", "application/json")
            .body(big.clone())
            .send()
            .await
            .unwrap();
        assert_eq!(res.status(), 413, "{path}");
        let body: Value = res.json().await.unwrap();
        let right = match shape {
            "openai" => is_openai_error(&body),
            "anthropic" => is_anthropic_error(&body),
            _ => is_google_error(&body, 413),
        };
        assert!(right, "{path}: {body}");
        let res = api.call(path, &t, Some(tools_body)).await;
        assert_eq!(res.status(), 400, "{path}");
        let text = res.text().await.unwrap();
        assert!(text.contains("at most 512 tools"), "{path}: {text}");
    }
    assert!(api.mock.requests().is_empty(), "nothing reached the upstream");
    assert!(api.app.get("/healthz", None).await.status().is_success());
}

#[tokio::test]
async fn malformed_items_are_refused_and_unknown_ones_named() {
    let api = api_with(|_| {}).await;
    let t = token(&api, "api", "").await;
    for (path, body, param) in [
        (
            "/v1/responses",
            json!({ "model": "openai/gpt-4o-mini", "input": [{ "type": "function_call", "name": "f" }] }),
            "input[0]",
        ),
        (
            "/v1/responses",
            json!({ "model": "openai/gpt-4o-mini", "input": [{ "role": "user", "content": 5 }] }),
            "input[0].content",
        ),
        (
            "/v1beta/models/gpt-4o-mini:generateContent",
            json!({ "contents": [{ "role": "model", "parts": [{ "functionCall": {} }] }] }),
            "contents[0].parts[0]",
        ),
    ] {
        let res = api.call(path, &t, Some(body)).await;
        assert_eq!(res.status(), 400, "{path}");
        let v: Value = res.json().await.unwrap();
        let param_named =
            v["error"]["param"] == param || v["error"]["message"].as_str().is_some_and(|m| !m.is_empty());
        assert!(param_named, "{v}");
    }
    // Unknown item and tool types are left out and named, not refused.
    api.mock.enqueue(Provider::OpenAi, Reply::fixture("openai/text.sse"));
    let body = json!({ "model": "openai/gpt-4o-mini", "store": false,
        "input": [{ "type": "message", "role": "user", "content": "hi" }, { "type": "web_search_call", "id": "ws_1" }],
        "tools": [{ "type": "file_search", "vector_store_ids": ["vs_1"] }] });
    let res = api.call("/v1/responses", &t, Some(body)).await;
    assert_eq!(res.status(), 200);
    let warning = res.headers()["warning"].to_str().unwrap().to_string();
    assert!(warning.contains("web_search_call items") && warning.contains("file_search tools"), "{warning}");
    assert_eq!(
        res.json::<Value>().await.unwrap()["output"][0]["content"][0]["text"],
        "Hello! How can I help you today? 👋"
    );
}

#[tokio::test]
async fn another_members_stored_response_is_not_found() {
    let api = api_with(|_| {}).await;
    let t = token(&api, "api", "").await;
    api.mock.enqueue(Provider::OpenAi, Reply::fixture("openai/text.sse"));
    let res =
        api.call("/v1/responses", &t, Some(json!({ "model": "openai/gpt-4o-mini", "input": "hi" }))).await;
    assert_eq!(res.status(), 200);
    let id = res.json::<Value>().await.unwrap()["id"].as_str().unwrap().to_string();
    assert_eq!(api.call(&format!("/v1/responses/{id}"), &t, None).await.status(), 200);

    let other = api.app.create_user("eve@example.com", Role::Member).await;
    let other_token = api
        .app
        .state
        .accounts
        .tokens
        .issue_for_operator(&other.email, "eve", arbor::domain::accounts::api_tokens::Scope::Api, None)
        .await
        .unwrap()
        .token;
    let eve = other_token.expose();
    let res = api.call(&format!("/v1/responses/{id}"), eve, None).await;
    assert_eq!(res.status(), 404);
    let res = api
        .call(
            "/v1/responses",
            eve,
            Some(json!({ "model": "openai/gpt-4o-mini", "input": "hi", "previous_response_id": id })),
        )
        .await;
    assert_eq!(res.status(), 404);
    assert_eq!(res.json::<Value>().await.unwrap()["error"]["param"], "previous_response_id");
    let res = api
        .app
        .client
        .delete(api.app.url(&format!("/v1/responses/{id}")))
        .bearer_auth(eve)
        .send()
        .await
        .unwrap();
    assert_eq!(res.status(), 404);
    // Still the owner's.
    assert_eq!(api.call(&format!("/v1/responses/{id}"), &t, None).await.status(), 200);
    assert_eq!(api.mock.requests_for(Provider::OpenAi).len(), 1, "nothing of Eve's reached the upstream");

    // Past the retention it is gone, as at OpenAI.
    use arbor::storage::entities::stored_response;
    use sea_orm::{ColumnTrait, EntityTrait, QueryFilter, sea_query::Expr};
    let aged = chrono::Utc::now() - chrono::Duration::days(arbor::domain::gateway::stored::KEEP_DAYS + 1);
    stored_response::Entity::update_many()
        .col_expr(stored_response::Column::CreatedAt, Expr::value(aged))
        .filter(stored_response::Column::Id.eq(id.as_str()))
        .exec(&api.app.state.db)
        .await
        .unwrap();
    assert_eq!(api.call(&format!("/v1/responses/{id}"), &t, None).await.status(), 404);
}

#[tokio::test]
async fn a_stream_cut_by_the_upstream_fails_in_each_dialect_and_is_recorded_once() {
    let api = api_with(|_| {}).await;
    let t = token(&api, "api", "").await;
    for _ in 0..2 {
        api.mock
            .enqueue(Provider::OpenAi, Reply::ResetAfterEvents { path: "openai/text.sse".into(), events: 3 });
    }
    let body = json!({ "model": "openai/gpt-4o-mini", "input": "hi", "stream": true });
    let text = api.call("/v1/responses", &t, Some(body)).await.text().await.unwrap();
    assert!(text.contains("event: response.output_text.delta"), "{text}");
    assert!(text.contains("event: response.failed") && !text.contains("response.completed"), "{text}");
    let body = json!({ "contents": [{ "parts": [{ "text": "hi" }] }] });
    let text = api
        .call("/v1beta/models/gpt-4o-mini:streamGenerateContent?alt=sse", &t, Some(body))
        .await
        .text()
        .await
        .unwrap();
    let last: Value =
        serde_json::from_str(text.trim_end().lines().last().unwrap().trim_start_matches("data: ")).unwrap();
    assert!(last["error"]["status"].is_string(), "{text}");
    let rows = crate::gateway::usage_rows(&api.app, 2).await;
    assert_eq!(rows.len(), 2, "one usage row per call");
    // Waits (at most ten seconds) for a third row that must never come.
    assert_eq!(crate::gateway::usage_rows(&api.app, 3).await.len(), 2, "nothing recorded twice");
}

#[tokio::test]
async fn an_anthropic_provider_receives_the_callers_body_and_betas_as_they_came() {
    let api = api_with(|_| {}).await;
    let t = token(&api, "api", "").await;
    let body = |model: &str| {
        json!({
            "model": model, "max_tokens": 64,
            "system": [{ "type": "text", "text": "Be kind.", "cache_control": { "type": "ephemeral" } }],
            "messages": [{ "role": "user", "content": "Hi" }, { "role": "system", "content": "The user is in Oslo." }],
            "thinking": { "type": "adaptive" },
            "context_management": { "edits": [{ "type": "clear_thinking_20251015", "keep": "all" }] },
            "tools": [{ "type": "web_search_20250305", "name": "web_search", "max_uses": 1 }]
        })
    };
    let send = |model: &'static str| {
        api.app
            .client
            .post(api.app.url("/v1/messages"))
            .header("x-api-key", &t)
            .header("anthropic-beta", "context-management-2025-06-27,effort-2025-11-24")
            .json(&body(model))
            .send()
    };
    api.mock.enqueue(Provider::Anthropic, Reply::fixture("anthropic/text.sse"));
    let res = send("anthropic/claude-sonnet-4-5").await.unwrap();
    assert_eq!(res.status(), 200);
    assert!(res.headers().get("warning").is_none(), "nothing was left out");
    let sent = &api.mock.requests_for(Provider::Anthropic)[0];
    assert_eq!(sent.header("anthropic-beta"), Some("context-management-2025-06-27,effort-2025-11-24"));
    let upstream = sent.json().unwrap();
    let mut expected = body("claude-sonnet-4-5");
    expected["stream"] = json!(true);
    assert_eq!(upstream, expected, "the caller's body, with only model and stream set by Arbor");
    assert!(!sent.body_text().contains(&t), "the caller's token is not passed on");

    // Another vendor's provider gets what has a counterpart, and the rest is named.
    api.mock.enqueue(Provider::OpenAi, Reply::fixture("openai/text.sse"));
    let res = send("openai/gpt-4o-mini").await.unwrap();
    assert_eq!(res.status(), 200);
    let warning = res.headers()["warning"].to_str().unwrap().to_string();
    for named in ["cache_control", "context_management", "web_search_20250305 tools"] {
        assert!(warning.contains(named), "{named} not in {warning}");
    }
    let sent = api.mock.requests_for(Provider::OpenAi)[0].json().unwrap();
    assert_eq!(sent["messages"][0]["content"], "Be kind.\n\nThe user is in Oslo.");
    assert!(sent.get("context_management").is_none());
}
