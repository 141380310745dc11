//! The `/v1` gateway over HTTP: API tokens (both headers, scopes, revoked, expired, disabled
//! users), model listing, chat completions whole and streamed, across wire formats, aliases
//! and fallback (before the first byte only), quotas and bad input.

use arbor::domain::accounts::Role;
use serde_json::{Value, json};

use crate::runs::use_mock;
use crate::support::mock_upstream::{self, MockUpstream, Provider, Reply};
use crate::support::{TestApp, TestSession};

pub(crate) struct Api {
    pub(crate) app: TestApp,
    pub(crate) mock: MockUpstream,
    pub(crate) s: TestSession,
    user: arbor::domain::accounts::User,
}

pub(crate) async fn api_with(adjust: impl FnOnce(&mut arbor::config::Config)) -> Api {
    let mock = mock_upstream::start().await.unwrap();
    let app = TestApp::spawn_with(|c| {
        use_mock(c, &mock);
        c.llm.max_attempts = 1;
        adjust(c);
    })
    .await;
    let user = app.create_user("ada@example.com", Role::Member).await;
    let s = app.login_full(&user).await;
    Api { app, mock, s, user }
}

/// Creates a token through the settings page and returns it (shown once).
pub(crate) async fn token(api: &Api, scope: &str, days: &str) -> String {
    let res = api
        .app
        .post_form(
            "/settings/tokens",
            &format!("name=test-{scope}&scope={scope}&expires_days={days}"),
            Some(&api.s),
        )
        .await;
    assert_eq!(res.status(), 200);
    let html = res.text().await.unwrap();
    let at =
        html.find("class=\"token-value\">").expect("the new token is shown") + "class=\"token-value\">".len();
    html[at..].split('<').next().unwrap().to_string()
}

impl Api {
    pub(crate) async fn call(&self, path: &str, token: &str, body: Option<Value>) -> reqwest::Response {
        let req = match body {
            Some(b) => self.app.client.post(self.app.url(path)).json(&b),
            None => self.app.client.get(self.app.url(path)),
        };
        req.header("Authorization", format!("Bearer {token}")).send().await.unwrap()
    }

    async fn chat(&self, token: &str, body: Value) -> reqwest::Response {
        self.call("/v1/chat/completions", token, Some(body)).await
    }
}

fn hello(model: &str, stream: bool) -> Value {
    json!({
        "model": model,
        "stream": stream,
        "stream_options": { "include_usage": true },
        "messages": [{ "role": "system", "content": "Be kind." }, { "role": "user", "content": "Hi" }]
    })
}

/// The `data:` payloads of an event stream, `[DONE]` included.
fn data_lines(body: &str) -> Vec<String> {
    body.lines().filter_map(|l| l.strip_prefix("data: ")).map(str::to_string).collect()
}

/// The usage rows once there are `n` (the API writes them in the background, in batches).
pub(crate) async fn usage_rows(app: &TestApp, n: usize) -> Vec<arbor::storage::entities::usage::Model> {
    use sea_orm::EntityTrait;
    let began = std::time::Instant::now();
    loop {
        let rows = arbor::storage::entities::usage::Entity::find().all(&app.state.db).await.unwrap();
        if rows.len() >= n || began.elapsed() > std::time::Duration::from_secs(10) {
            return rows;
        }
        tokio::time::sleep(std::time::Duration::from_millis(10)).await;
    }
}

#[tokio::test]
async fn tokens_are_shown_once_and_checked_on_every_call() {
    let api = api_with(|_| {}).await;
    let t = token(&api, "api", "30").await;
    assert!(t.starts_with("arb_") && t.len() > 40, "{t}");
    let listing = api.app.get("/settings/tokens", Some(&api.s.cookie)).await.text().await.unwrap();
    assert!(!listing.contains(&t), "the token is shown only once");
    assert!(listing.contains(&t[..12]), "its prefix is listed");

    // Either header works; the models list has the configured models and the user's aliases.
    api.app.post_form("/settings/aliases", "alias=smart&target=openai%2Fgpt-4o-mini", Some(&api.s)).await;
    let res = api.call("/v1/models", &t, None).await;
    assert_eq!(res.status(), 200);
    let list: Value = res.json().await.unwrap();
    let ids: Vec<&str> = list["data"].as_array().unwrap().iter().map(|m| m["id"].as_str().unwrap()).collect();
    assert!(ids.contains(&"openai/gpt-4o-mini") && ids.contains(&"anthropic/claude-sonnet-4-5"), "{ids:?}");
    assert!(ids.contains(&"smart"));
    let res = api.app.client.get(api.app.url("/v1/models")).header("x-api-key", &t).send().await.unwrap();
    assert_eq!(res.status(), 200);

    // No token, a wrong one: 401 in the OpenAI shape.
    for auth in [None, Some("Bearer arb_not-a-real-token"), Some("Bearer sk-something")] {
        let mut req = api.app.client.get(api.app.url("/v1/models"));
        if let Some(a) = auth {
            req = req.header("Authorization", a);
        }
        let res = req.send().await.unwrap();
        assert_eq!(res.status(), 401, "{auth:?}");
        let body: Value = res.json().await.unwrap();
        assert_eq!(body["error"]["type"], "authentication_error");
    }

    // An api-scoped token cannot manage the account; a full one can, without CSRF tokens.
    let res = api
        .app
        .client
        .get(api.app.url("/settings"))
        .header("Authorization", format!("Bearer {t}"))
        .send()
        .await
        .unwrap();
    assert_eq!(res.status(), 403);
    let full = token(&api, "full", "").await;
    let res = api
        .app
        .client
        .get(api.app.url("/settings"))
        .header("Authorization", format!("Bearer {full}"))
        .send()
        .await
        .unwrap();
    assert_eq!(res.status(), 200);
    let res = api
        .app
        .client
        .post(api.app.url("/settings/model"))
        .header("Authorization", format!("Bearer {full}"))
        .header("Content-Type", "application/x-www-form-urlencoded")
        .body("model=")
        .send()
        .await
        .unwrap();
    assert_eq!(res.status(), 200, "a bearer token needs no CSRF token");

    // Revoked and expired tokens stop at once; so do a disabled user's.
    let listing = api.app.get("/settings/tokens", Some(&api.s.cookie)).await.text().await.unwrap();
    let revoke_at = listing.find("/revoke\"").unwrap();
    let id_start = listing[..revoke_at].rfind("/settings/tokens/").unwrap() + "/settings/tokens/".len();
    let id = &listing[id_start..revoke_at];
    let res = api.app.post_form(&format!("/settings/tokens/{id}/revoke"), "", Some(&api.s)).await;
    assert_eq!(res.status(), 200);
    let revoked_first = api.call("/v1/models", &t, None).await.status() == 401;
    let full_after = api.call("/v1/models", &full, None).await.status();
    assert!(revoked_first || full_after == 401, "one of the two tokens was revoked");
    {
        use sea_orm::{ConnectionTrait, Statement};
        let db = &api.app.state.db;
        db.execute_raw(Statement::from_sql_and_values(
            db.get_database_backend(),
            if db.get_database_backend() == sea_orm::DbBackend::Postgres {
                "UPDATE api_tokens SET expires_at = $1"
            } else {
                "UPDATE api_tokens SET expires_at = ?"
            },
            [(chrono::Utc::now() - chrono::Duration::minutes(1)).into()],
        ))
        .await
        .unwrap();
        // Written behind the server's back: say so, as every write through storage does.
        arbor::storage::changes::changed(arbor::storage::changes::Kept::Accounts);
    }
    assert_eq!(api.call("/v1/models", &full, None).await.status(), 401, "expired");
    let fresh = token(&api, "api", "").await;
    assert_eq!(api.call("/v1/models", &fresh, None).await.status(), 200);
    arbor::storage::repos::users::set_status(
        &api.app.state.db,
        api.user.id,
        arbor::domain::accounts::UserStatus::Disabled,
    )
    .await
    .unwrap();
    assert_eq!(api.call("/v1/models", &fresh, None).await.status(), 403, "a disabled user's token");
}

#[tokio::test]
async fn chat_completions_are_served_whole_and_streamed_by_any_provider() {
    let api = api_with(|_| {}).await;
    let t = token(&api, "api", "").await;

    // Whole, from the OpenAI-format provider.
    api.mock.enqueue(Provider::OpenAi, Reply::fixture("openai/text.sse"));
    let mut body = hello("openai/gpt-4o-mini", false);
    // Fields that would redirect the call are ignored.
    body["base_url"] = json!("http://169.254.169.254/v1");
    body["api_key"] = json!("sk-attacker");
    let res = api.chat(&t, body).await;
    assert_eq!(res.status(), 200);
    let c: Value = res.json().await.unwrap();
    assert_eq!(c["object"], "chat.completion");
    assert_eq!(c["model"], "openai/gpt-4o-mini");
    assert_eq!(c["choices"][0]["message"]["content"], "Hello! How can I help you today? 👋");
    assert_eq!(c["choices"][0]["finish_reason"], "stop");
    assert!(c["usage"]["total_tokens"].as_u64().unwrap() > 0);
    let sent = api.mock.requests_for(Provider::OpenAi);
    let upstream = sent.last().unwrap();
    assert_eq!(upstream.header("authorization"), Some("Bearer sk-test-openai-SECRETKEY"), "the server's key");
    let upstream_body = upstream.json().unwrap();
    assert_eq!(upstream_body["model"], "gpt-4o-mini");
    assert_eq!(upstream_body["messages"][0]["role"], "system");

    // Streamed, from the Anthropic-format provider: OpenAI chunks, a usage chunk, [DONE].
    api.mock.enqueue(Provider::Anthropic, Reply::fixture("anthropic/text.sse"));
    let res = api.chat(&t, hello("anthropic/claude-sonnet-4-5", true)).await;
    assert_eq!(res.status(), 200);
    assert_eq!(res.headers()["content-type"], "text/event-stream");
    let lines = data_lines(&res.text().await.unwrap());
    assert_eq!(lines.last().map(String::as_str), Some("[DONE]"));
    let chunks: Vec<Value> =
        lines[..lines.len() - 1].iter().map(|l| serde_json::from_str(l).unwrap()).collect();
    assert_eq!(chunks[0]["choices"][0]["delta"]["role"], "assistant");
    let text: String = chunks
        .iter()
        .filter_map(|c| c["choices"][0]["delta"]["content"].as_str())
        .collect::<Vec<_>>()
        .concat();
    assert_eq!(text, "Hello! How can I help you today? Ünïcödé ✓ — 日本語");
    assert!(chunks.iter().all(|c| c["model"] == "anthropic/claude-sonnet-4-5"));
    let usage = chunks.last().unwrap();
    assert_eq!(usage["choices"], json!([]));
    assert!(usage["usage"]["prompt_tokens"].as_u64().unwrap() > 0);
    let finish: Vec<&Value> = chunks.iter().filter(|c| !c["choices"][0]["finish_reason"].is_null()).collect();
    assert_eq!(finish.len(), 1);
    assert_eq!(
        api.mock.requests_for(Provider::Anthropic).last().unwrap().json().unwrap()["system"],
        "Be kind."
    );

    // Both calls are in the usage table, marked as API calls.
    let rows = usage_rows(&api.app, 2).await;
    assert_eq!(rows.len(), 2);
    assert!(rows.iter().all(|r| r.via == "api" && r.session_id.is_none() && r.user_id == Some(api.user.id)));
}

#[tokio::test]
async fn aliases_and_fallback_move_on_only_before_the_first_byte() {
    let api = api_with(|_| {}).await;
    let t = token(&api, "api", "").await;
    let res = api
        .app
        .post_form(
            "/settings/aliases",
            "alias=smart&target=openai%2Fgpt-4o-mini%2Canthropic%2Fclaude-sonnet-4-5",
            Some(&api.s),
        )
        .await;
    assert_eq!(res.status(), 200);

    // The first model fails before answering: the second serves, and says so.
    let overloaded = api.mock.fixture_text("openai/error_429.json").unwrap();
    api.mock.enqueue(Provider::OpenAi, Reply::Json { status: 500, headers: vec![], body: overloaded });
    api.mock.enqueue(Provider::Anthropic, Reply::fixture("anthropic/text.sse"));
    let res = api.chat(&t, hello("smart", false)).await;
    assert_eq!(res.status(), 200);
    let c: Value = res.json().await.unwrap();
    assert_eq!(c["model"], "anthropic/claude-sonnet-4-5");

    // A failure after the first token is the answer's end: no fallback, the error in the stream.
    api.mock.enqueue(Provider::OpenAi, Reply::fixture("openai/error_midstream.sse"));
    let before = api.mock.requests_for(Provider::Anthropic).len();
    let res = api.chat(&t, hello("smart", true)).await;
    assert_eq!(res.status(), 200);
    let lines = data_lines(&res.text().await.unwrap());
    assert!(lines.iter().any(|l| l.contains("\"error\"")), "{lines:?}");
    assert_eq!(api.mock.requests_for(Provider::Anthropic).len(), before, "no fallback after the first byte");

    // A comma-separated chain in the request itself, and unprefixed names, work too.
    api.mock.enqueue(Provider::OpenAi, Reply::json(503, "{}"));
    api.mock.enqueue(Provider::Gemini, Reply::fixture("gemini/text.sse"));
    let res = api.chat(&t, hello("nonexistent/x,gpt-4o-mini,gemini-2.5-flash", false)).await;
    assert_eq!(res.status(), 200);
    assert_eq!(res.json::<Value>().await.unwrap()["model"], "gemini/gemini-2.5-flash");

    // When the whole chain fails, the caller gets the last error in its own format.
    let limited = api.mock.fixture_text("anthropic/error_429.json").unwrap();
    api.mock.enqueue(Provider::OpenAi, Reply::json(500, "{}"));
    api.mock.enqueue(
        Provider::Anthropic,
        Reply::Json { status: 429, headers: vec![("retry-after".into(), "7".into())], body: limited },
    );
    let res = api.chat(&t, hello("smart", false)).await;
    assert_eq!(res.status(), 429);
    assert_eq!(res.headers()["retry-after"], "7");
    let e: Value = res.json().await.unwrap();
    assert_eq!(e["error"]["type"], "rate_limit_error");
}

#[tokio::test]
async fn bad_requests_unknown_models_and_quotas_answer_in_the_openai_shape() {
    let api = api_with(|_| {}).await;
    let t = token(&api, "api", "").await;
    let res = api
        .app
        .client
        .post(api.app.url("/v1/chat/completions"))
        .header("Authorization", format!("Bearer {t}"))
        .header("Content-Type", "application/json")
        .body("{not json")
        .send()
        .await
        .unwrap();
    assert_eq!(res.status(), 400);
    assert_eq!(res.json::<Value>().await.unwrap()["error"]["type"], "invalid_request_error");
    let res = api.chat(&t, json!({ "model": "openai/gpt-4o-mini", "messages": "hi" })).await;
    assert_eq!(res.status(), 400);
    assert_eq!(res.json::<Value>().await.unwrap()["error"]["param"], "messages");
    let res = api.chat(&t, hello("no-such-model", false)).await;
    assert_eq!(res.status(), 404);
    assert_eq!(res.json::<Value>().await.unwrap()["error"]["code"], "model_not_found");
    let huge = "x".repeat(arbor::web::handlers::api::MAX_BODY + 1);
    let res = api
        .chat(&t, json!({ "model": "openai/gpt-4o-mini", "messages": [{ "role": "user", "content": huge }] }))
        .await;
    assert_eq!(res.status(), 413);
    assert!(api.mock.requests().is_empty(), "nothing reached a provider");

    // A quota that one call used up: 429 with Retry-After, and no further provider call.
    api.mock.enqueue(Provider::OpenAi, Reply::fixture("openai/text.sse"));
    assert_eq!(api.chat(&t, hello("openai/gpt-4o-mini", false)).await.status(), 200);
    assert_eq!(usage_rows(&api.app, 1).await.len(), 1);
    let admin = api.app.create_user("root@example.com", Role::Admin).await;
    let admin = api.app.login_full(&admin).await;
    assert_eq!(api.app.post_form("/admin/quotas", "tokens_day=5", Some(&admin)).await.status(), 200);
    let res = api.chat(&t, hello("openai/gpt-4o-mini", true)).await;
    assert_eq!(res.status(), 429);
    assert!(res.headers().get("retry-after").is_some());
    let e: Value = res.json().await.unwrap();
    assert_eq!(e["error"]["type"], "rate_limit_error");
    assert!(e["error"]["message"].as_str().unwrap().contains("daily allowance"));
    assert_eq!(api.mock.requests_for(Provider::OpenAi).len(), 1);
}

fn anthropic_hello(model: &str, stream: bool) -> Value {
    json!({
        "model": model,
        "max_tokens": 256,
        "stream": stream,
        "system": "Be kind.",
        "messages": [{ "role": "user", "content": "Hi" }]
    })
}

/// The `event:` names and `data:` objects of an Anthropic stream.
fn anthropic_events(body: &str) -> Vec<(String, Value)> {
    let mut out = Vec::new();
    let mut name = String::new();
    for line in body.lines() {
        if let Some(n) = line.strip_prefix("event: ") {
            name = n.to_string();
        } else if let Some(d) = line.strip_prefix("data: ") {
            out.push((name.clone(), serde_json::from_str(d).unwrap()));
        }
    }
    out
}

#[tokio::test]
async fn the_anthropic_route_serves_any_provider_and_counts_tokens() {
    let api = api_with(|_| {}).await;
    let t = token(&api, "api", "").await;

    // A Gemini model behind the Anthropic format, whole; the key may come as x-api-key.
    api.mock.enqueue(Provider::Gemini, Reply::fixture("gemini/text.sse"));
    let res = api
        .app
        .client
        .post(api.app.url("/v1/messages"))
        .header("x-api-key", &t)
        .header("anthropic-version", "2023-06-01")
        .json(&anthropic_hello("gemini/gemini-2.5-flash", false))
        .send()
        .await
        .unwrap();
    assert_eq!(res.status(), 200);
    let m: Value = res.json().await.unwrap();
    assert_eq!((m["type"].as_str(), m["role"].as_str()), (Some("message"), Some("assistant")));
    assert_eq!(m["model"], "gemini/gemini-2.5-flash");
    assert_eq!(m["content"][0]["type"], "text");
    assert!(!m["content"][0]["text"].as_str().unwrap().is_empty());
    assert_eq!(m["stop_reason"], "end_turn");
    let gemini_body = api.mock.requests_for(Provider::Gemini).last().unwrap().json().unwrap();
    assert!(gemini_body.to_string().contains("Be kind."), "the system prompt reached Gemini");

    // An OpenAI model behind the Anthropic format, streamed: the documented event order.
    api.mock.enqueue(Provider::OpenAi, Reply::fixture("openai/text.sse"));
    let res = api.call("/v1/messages", &t, Some(anthropic_hello("openai/gpt-4o-mini", true))).await;
    assert_eq!(res.status(), 200);
    let events = anthropic_events(&res.text().await.unwrap());
    let names: Vec<&str> = events.iter().map(|(n, _)| n.as_str()).collect();
    assert_eq!(names.first(), Some(&"message_start"));
    assert_eq!(names.last(), Some(&"message_stop"));
    assert!(names.contains(&"content_block_start") && names.contains(&"message_delta"));
    let text: String = events
        .iter()
        .filter_map(|(_, d)| d.pointer("/delta/text").and_then(Value::as_str))
        .collect::<Vec<_>>()
        .concat();
    assert_eq!(text, "Hello! How can I help you today? 👋");
    assert_eq!(events[0].1["message"]["model"], "openai/gpt-4o-mini");

    // Errors in the Anthropic shape.
    let res =
        api.call("/v1/messages", &t, Some(json!({ "model": "openai/gpt-4o-mini", "messages": [] }))).await;
    assert_eq!(res.status(), 400);
    let e: Value = res.json().await.unwrap();
    assert_eq!(
        (e["type"].as_str(), e["error"]["type"].as_str()),
        (Some("error"), Some("invalid_request_error"))
    );
    let res = api
        .app
        .client
        .post(api.app.url("/v1/messages"))
        .json(&anthropic_hello("x", false))
        .send()
        .await
        .unwrap();
    assert_eq!(res.status(), 401);
    assert_eq!(res.json::<Value>().await.unwrap()["error"]["type"], "authentication_error");

    // Token counting: exact from Anthropic, an estimate with a warning from OpenAI.
    api.mock.enqueue(Provider::Anthropic, Reply::fixture("anthropic/count_tokens.json"));
    let mut body = anthropic_hello("anthropic/claude-sonnet-4-5", false);
    body.as_object_mut().unwrap().remove("max_tokens");
    let res = api.call("/v1/messages/count_tokens", &t, Some(body.clone())).await;
    assert_eq!(res.status(), 200);
    assert!(res.headers().get("warning").is_none());
    let exact: Value = res.json().await.unwrap();
    let expected: Value =
        serde_json::from_str(&api.mock.fixture_text("anthropic/count_tokens.json").unwrap()).unwrap();
    assert_eq!(exact["input_tokens"], expected["input_tokens"]);
    body["model"] = json!("openai/gpt-4o-mini");
    let res = api.call("/v1/messages/count_tokens", &t, Some(body)).await;
    assert_eq!(res.status(), 200);
    assert!(res.headers()["warning"].to_str().unwrap().starts_with("199 - \""));
    // Arbor's own count: the tokenizer the context gauge uses, over the system prompt and text.
    let counted =
        arbor::providers::tokens::count_text("Be kind.") + arbor::providers::tokens::count_text("Hi");
    assert_eq!(res.json::<Value>().await.unwrap()["input_tokens"].as_u64().unwrap(), counted);

    // The OpenAPI document needs no token.
    let doc: Value = api.app.get("/v1/openapi.json", None).await.json().await.unwrap();
    assert!(doc["paths"]["/v1/messages"]["post"].is_object());
}

/// The Python with the official SDKs: `ARBOR_SDK_PYTHON`, else the venv `scripts/test` makes.
pub(crate) fn sdk_python() -> std::path::PathBuf {
    if let Ok(p) = std::env::var("ARBOR_SDK_PYTHON") {
        return p.into();
    }
    let home = std::env::var("HOME").unwrap_or_else(|_| "/root".into());
    std::path::Path::new(&home).join(".cache/arbor-sdk-venv/bin/python")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_official_openai_anthropic_and_google_sdks_work_against_the_gateway() {
    let python = sdk_python();
    assert!(
        python.exists(),
        "{} is missing: run scripts/test (it installs tests/sdk/requirements.txt into a venv)",
        python.display()
    );
    let api = api_with(|c| {
        // The embedding models, enabled beside the chat models.
        for (provider, model) in [("openai", "text-embedding-3-small"), ("gemini", "gemini-embedding-001")] {
            if let Some(p) = c.llm.providers.get_mut(provider) {
                p.models.push(model.into());
            }
        }
    })
    .await;
    let t = token(&api, "api", "").await;
    for reply in ["openai/text.sse", "openai/text.sse", "openai/tool_calls_parallel.sse"] {
        api.mock.enqueue(Provider::OpenAi, Reply::fixture(reply));
    }
    let limited = api.mock.fixture_text("openai/error_429.json").unwrap();
    api.mock.enqueue(Provider::OpenAi, Reply::Json { status: 429, headers: vec![], body: limited });
    api.mock.enqueue(Provider::OpenAi, Reply::fixture("openai/text.sse"));
    for reply in [
        "anthropic/text.sse",
        "anthropic/text.sse",
        "anthropic/tool_use_parallel.sse",
        "anthropic/count_tokens.json",
        "anthropic/text.sse",
    ] {
        api.mock.enqueue(Provider::Anthropic, Reply::fixture(reply));
    }
    // Responses: create, stream (continuing it), tools; embeddings; Google GenAI: cross-provider.
    for reply in [
        "openai/text.sse",
        "openai/text.sse",
        "openai/tool_calls_parallel.sse",
        "openai/embeddings.json",
        "openai/text.sse",
    ] {
        api.mock.enqueue(Provider::OpenAi, Reply::fixture(reply));
    }
    // Google GenAI: generate, stream, count tokens, function calling, embeddings.
    for reply in [
        "gemini/text.sse",
        "gemini/text.sse",
        "gemini/count_tokens.json",
        "gemini/function_calls_parallel.sse",
        "gemini/batch_embed.json",
    ] {
        api.mock.enqueue(Provider::Gemini, Reply::fixture(reply));
    }
    let script = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/sdk/check.py");
    let out = tokio::process::Command::new(&python)
        .arg(&script)
        .arg(api.app.origin())
        .arg(&t)
        .env_remove("OPENAI_BASE_URL")
        .env_remove("ANTHROPIC_BASE_URL")
        .output()
        .await
        .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    let paths: Vec<String> = api.mock.requests().iter().map(|r| r.path.clone()).collect();
    assert!(
        out.status.success(),
        "{stdout}\n{}\nupstream calls: {paths:?}",
        String::from_utf8_lossy(&out.stderr)
    );
    for check in [
        "openai.create",
        "openai.stream",
        "openai.tools",
        "openai.errors",
        "anthropic.create",
        "anthropic.stream",
        "anthropic.tools",
        "anthropic.count_tokens",
        "anthropic.errors",
        "anthropic.cross",
        "anthropic.beta_fields",
        "responses.create",
        "responses.stream",
        "responses.tools",
        "responses.stored",
        "openai.unknown_route",
        "openai.embeddings",
        "genai.embed",
        "genai.generate",
        "genai.stream",
        "genai.count_tokens",
        "genai.tools",
        "genai.cross",
        "genai.errors",
    ] {
        assert!(stdout.lines().any(|l| l == format!("ok {check}")), "{check} did not pass:\n{stdout}");
    }
    assert_eq!(
        api.mock.pending(Provider::OpenAi)
            + api.mock.pending(Provider::Anthropic)
            + api.mock.pending(Provider::Gemini),
        0,
        "every reply was used"
    );
    // The continued response carried the first one's turn upstream.
    let continued = api
        .mock
        .requests_for(Provider::OpenAi)
        .into_iter()
        .filter_map(|r| r.json().ok())
        .find(|b| b["messages"].as_array().is_some_and(|m| m.len() == 4))
        .expect("the continued response sent the chain");
    assert_eq!(continued["messages"][0]["content"], "Be kind.", "the chain's instructions");
    assert_eq!(continued["messages"][2]["content"], "Hello! How can I help you today? 👋");
    assert!(api.mock.problems().is_empty(), "{:?}", api.mock.problems());
}

#[tokio::test]
async fn shared_keys_rotate_on_429_behind_the_gateway_too() {
    let api = api_with(|_| {}).await;
    let admin = api.app.create_user("root@example.com", Role::Admin).await;
    let admin = api.app.login_full(&admin).await;
    let provider =
        crate::admin::add_provider(&api.app, &admin, "team", &api.mock.url(Provider::OpenAi), "").await;
    crate::admin::add_shared_key(&api.app, &admin, provider, "one", "sk-gw-shared-ONE-1111").await;
    crate::admin::add_shared_key(&api.app, &admin, provider, "two", "sk-gw-shared-TWO-2222").await;
    let t = token(&api, "api", "").await;
    let limited = api.mock.fixture_text("openai/error_429.json").unwrap();
    api.mock.enqueue(Provider::OpenAi, Reply::Json { status: 429, headers: vec![], body: limited });
    api.mock.enqueue(Provider::OpenAi, Reply::fixture("openai/text.sse"));
    let res = api.chat(&t, hello("team/gpt-4o-mini", false)).await;
    assert_eq!(res.status(), 200);
    assert_eq!(res.json::<Value>().await.unwrap()["model"], "team/gpt-4o-mini");
    let keys: Vec<String> = api
        .mock
        .requests_for(Provider::OpenAi)
        .iter()
        .filter_map(|r| r.header("authorization").map(str::to_string))
        .collect();
    assert_eq!(keys, ["Bearer sk-gw-shared-ONE-1111", "Bearer sk-gw-shared-TWO-2222"]);
}

#[tokio::test]
async fn images_cross_formats_and_rate_limits_and_expired_tokens_are_handled() {
    let api = api_with(|_| {}).await;
    let t = token(&api, "api", "").await;

    // An inline image in the OpenAI format reaches an Anthropic model as an image block.
    api.mock.enqueue(Provider::Anthropic, Reply::fixture("anthropic/text.sse"));
    let body = json!({
        "model": "anthropic/claude-sonnet-4-5",
        "messages": [{ "role": "user", "content": [
            { "type": "text", "text": "What is in the picture?" },
            { "type": "image_url", "image_url": { "url": "data:image/png;base64,iVBORw0KGgo=" } }
        ]}]
    });
    assert_eq!(api.chat(&t, body).await.status(), 200);
    let sent = api.mock.requests_for(Provider::Anthropic).last().unwrap().json().unwrap();
    let blocks = sent["messages"][0]["content"].as_array().unwrap().clone();
    assert!(
        blocks.iter().any(|b| b["type"] == "image" && b["source"]["data"] == "iVBORw0KGgo="),
        "{blocks:?}"
    );

    // A provider's per-minute limit answers 429 in the caller's format, before any call.
    let admin = api.app.create_user("root@example.com", Role::Admin).await;
    let admin = api.app.login_full(&admin).await;
    let provider =
        crate::admin::add_provider(&api.app, &admin, "team", &api.mock.url(Provider::OpenAi), "&rpm=1").await;
    crate::admin::add_shared_key(&api.app, &admin, provider, "k", "sk-gw-rpm-1234").await;
    api.mock.enqueue(Provider::OpenAi, Reply::fixture("openai/text.sse"));
    assert_eq!(api.chat(&t, hello("team/gpt-4o-mini", false)).await.status(), 200);
    let res = api.call("/v1/messages", &t, Some(anthropic_hello("team/gpt-4o-mini", false))).await;
    assert_eq!(res.status(), 429);
    assert!(res.headers().get("retry-after").is_some());
    assert_eq!(res.json::<Value>().await.unwrap()["error"]["type"], "rate_limit_error");
    assert_eq!(api.mock.requests_for(Provider::OpenAi).len(), 1);

    // An expired full token no longer opens account pages.
    let full = token(&api, "full", "1").await;
    let settings = |tok: String| {
        let app = &api.app;
        async move {
            app.client
                .get(app.url("/settings"))
                .header("Authorization", format!("Bearer {tok}"))
                .send()
                .await
                .unwrap()
                .status()
        }
    };
    assert_eq!(settings(full.clone()).await, 200);
    {
        use sea_orm::{ConnectionTrait, Statement};
        let db = &api.app.state.db;
        let sql = "UPDATE api_tokens SET expires_at = created_at WHERE name = 'test-full'";
        db.execute_raw(Statement::from_string(db.get_database_backend(), sql)).await.unwrap();
        // Written behind the server's back: say so, as every write through storage does (the
        // token's check is kept in memory until then).
        arbor::storage::changes::changed(arbor::storage::changes::Kept::Accounts);
    }
    assert_eq!(settings(full).await, 401);
}

#[tokio::test]
async fn bad_token_and_alias_forms_are_refused_with_a_reason() {
    let api = api_with(|_| {}).await;
    for (body, needle) in [
        ("name=x&scope=root&expires_days=30", "Pick what the token may do"),
        ("name=x&scope=api&expires_days=soon", "Pick when the token expires"),
        ("name=x&scope=api&expires_days=0", "1 to 3650 days"),
        ("name=&scope=api&expires_days=30", "Give the token a name"),
    ] {
        let res = api.app.post_form("/settings/tokens", body, Some(&api.s)).await;
        assert_eq!(res.status(), 400, "{body}");
        let html = res.text().await.unwrap();
        assert!(html.contains(needle), "{body}: {html}");
        assert!(!html.contains("class=\"token-value\""), "no token was made for {body}");
    }
    for (body, needle) in [
        ("alias=a%2Fb&target=openai%2Fgpt-4o-mini", "letters, digits"),
        ("alias=ok&target=", "one to ten models"),
        ("alias=ok&target=a+b", "spaces"),
    ] {
        let res = api.app.post_form("/settings/aliases", body, Some(&api.s)).await;
        assert_eq!(res.status(), 400, "{body}");
        assert!(res.text().await.unwrap().contains(needle), "{body}");
    }
    assert_eq!(api.app.post_form("/settings/aliases/nope/delete", "", Some(&api.s)).await.status(), 404);
    let actor = arbor::domain::accounts::Actor::for_tests(&api.user);
    assert!(api.app.state.aliases.list(&actor).await.unwrap().is_empty());
    assert!(api.app.state.accounts.tokens.list(&actor).await.unwrap().is_empty());
}

/// SECURITY.md 19: the gateway is stateless (every request carries its whole conversation), so
/// there is no chat, session or conversation id to take over; this shows that naming another
/// member's session, message or user in any of the fields clients use for that (`user`,
/// `conversation_id`, `session_id`, `previous_response_id`, `metadata`) reaches none of it: the
/// upstream request holds only what the caller sent, and the other member's session is unchanged.
#[tokio::test]
async fn another_members_session_ids_in_an_api_call_reach_nothing_of_theirs() {
    let api = api_with(|_| {}).await;
    // Ada's session with a secret in it.
    let (_, ada_session) = api.app.create_session(&api.user).await;
    let secret = "ADA-PRIVATE-PLAN-7731";
    let ada_message = crate::support::seed_message(&api.app.state.db, ada_session, secret).await;
    let before =
        arbor::storage::repos::messages::session_messages(&api.app.state.db, ada_session).await.unwrap();

    // Bob's own API token.
    let bob = api.app.create_user("bob@example.com", Role::Member).await;
    let bob_s = api.app.login_full(&bob).await;
    let res = api
        .app
        .post_form("/settings/tokens", "name=bob&scope=api&expires_days=", Some(&bob_s))
        .await
        .text()
        .await
        .unwrap();
    let at = res.find("class=\"token-value\">").unwrap() + "class=\"token-value\">".len();
    let bob_token = res[at..].split('<').next().unwrap().to_string();

    for stream in [false, true] {
        // Arbor streams from the provider whether or not the client asked for a stream.
        api.mock.enqueue(Provider::OpenAi, Reply::fixture("openai/text.sse"));
        let mut body = hello("openai/gpt-4o-mini", stream);
        body["user"] = json!(api.user.id.to_string());
        body["conversation_id"] = json!(ada_session.to_string());
        body["session_id"] = json!(ada_session.to_string());
        body["previous_response_id"] = json!(ada_message.to_string());
        body["metadata"] =
            json!({ "session_id": ada_session.to_string(), "message_id": ada_message.to_string() });
        let res = api.chat(&bob_token, body).await;
        let status = res.status().as_u16();
        let text = res.text().await.unwrap();
        assert_eq!(status, 200, "{text}");
        assert!(!text.contains(secret), "Ada's message came back to Bob");
    }
    for request in api.mock.requests_for(Provider::OpenAi) {
        let sent = request.body_text();
        assert!(!sent.contains(secret), "Ada's message was sent upstream for Bob: {sent}");
        assert!(!sent.contains(&ada_session.to_string()), "Ada's session id was passed upstream: {sent}");
    }
    let after =
        arbor::storage::repos::messages::session_messages(&api.app.state.db, ada_session).await.unwrap();
    assert_eq!(after.len(), before.len(), "Ada's session is unchanged");
    // Bob's usage is his own; nothing was recorded against Ada.
    let rows = usage_rows(&api.app, 1).await;
    assert!(rows.iter().all(|r| r.user_id == Some(bob.id)), "usage recorded against someone else");
}

/// SECURITY.md 54: calls running at once hold what they may spend, so they cannot spend the
/// same quota together; the hold goes once the call's usage is stored.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn calls_running_at_once_cannot_spend_the_same_quota() {
    let api = api_with(|_| {}).await;
    let t = token(&api, "api", "").await;
    let admin = api.app.create_user("root@example.com", Role::Admin).await;
    let admin = api.app.login_full(&admin).await;
    assert_eq!(api.app.post_form("/admin/quotas", "tokens_day=5000", Some(&admin)).await.status(), 200);
    let slow =
        Reply::Fixture { path: "openai/text.sse".into(), chunk_delay_ms: 20, first_byte_delay_ms: 1500 };
    api.mock.enqueue(Provider::OpenAi, slow);
    // Each call may write 5,000 tokens: while one runs, nothing of the quota is left to another.
    let mut body = hello("openai/gpt-4o-mini", false);
    body["max_tokens"] = json!(5000);
    let second = async {
        let start = std::time::Instant::now();
        while api.mock.requests().is_empty() {
            assert!(start.elapsed() < std::time::Duration::from_secs(10), "the first call never started");
            tokio::time::sleep(std::time::Duration::from_millis(10)).await;
        }
        api.chat(&t, body.clone()).await
    };
    let (first, second) = tokio::join!(api.chat(&t, body.clone()), second);
    assert_eq!(first.status(), 200);
    assert_eq!(second.status(), 429);
    let e: Value = second.json().await.unwrap();
    assert!(e["error"]["message"].as_str().unwrap().contains("daily allowance of 5000 tokens"), "{e}");
    assert_eq!(api.mock.requests().len(), 1, "the refused call reached the provider");
    // The first call spent little of what it held: once its usage is stored, there is room again.
    let spent: i64 = usage_rows(&api.app, 1).await.iter().map(|r| r.tokens_in + r.tokens_out).sum();
    assert!(spent < 5000, "{spent}");
    api.mock.enqueue(Provider::OpenAi, Reply::fixture("openai/text.sse"));
    let start = std::time::Instant::now();
    loop {
        let res = api.chat(&t, body.clone()).await;
        if res.status() == 200 {
            break;
        }
        assert_eq!(res.status(), 429);
        assert!(start.elapsed() < std::time::Duration::from_secs(10), "the hold was never given back");
        tokio::time::sleep(std::time::Duration::from_millis(20)).await;
    }
}

/// A caller that hangs up mid-answer: the provider is no longer read, and the usage of what was
/// relayed (estimated: no usage chunk came) is recorded once, when the response body is dropped.
#[tokio::test]
async fn a_caller_that_hangs_up_mid_stream_leaves_one_usage_row_for_what_it_got() {
    use futures_util::StreamExt;
    let api = api_with(|_| {}).await;
    let t = token(&api, "api", "").await;
    let mut events = vec![crate::agent::chunk(json!({"role": "assistant", "content": ""}), None)];
    events.extend((0..200).map(|i| crate::agent::chunk(json!({"content": format!("word{i} ")}), None)));
    events.push(crate::agent::chunk(json!({}), Some("stop")));
    events.push("data: [DONE]\n\n".into());
    api.mock.enqueue(Provider::OpenAi, Reply::Sse { events, chunk_delay_ms: 20 });
    let res = api.chat(&t, hello("openai/gpt-4o-mini", true)).await;
    assert_eq!(res.status(), 200);
    let mut body = res.bytes_stream();
    let mut seen = String::new();
    while !seen.contains("word1 ") {
        let chunk = body.next().await.expect("the answer goes on").unwrap();
        seen.push_str(&String::from_utf8_lossy(&chunk));
    }
    drop(body);
    let rows = usage_rows(&api.app, 1).await;
    assert_eq!(rows.len(), 1, "one row once the caller is gone");
    assert!(rows[0].estimated, "no usage chunk came, so it is estimated");
    // The whole answer would be some 400 tokens; what was relayed before the hang-up is a few.
    assert!(rows[0].tokens_out < 100, "{} tokens out: the provider was read on", rows[0].tokens_out);
    tokio::time::sleep(std::time::Duration::from_millis(500)).await;
    use sea_orm::{EntityTrait, PaginatorTrait};
    let count = arbor::storage::entities::usage::Entity::find().count(&api.app.state.db).await.unwrap();
    assert_eq!(count, 1, "recorded once");
}

/// A user deleted while their last call's usage row was gathering for its batch: the row is
/// kept without them (as deleting a user does to the rows already written), and the other
/// rows of the same batch are written with it. Before, the row's foreign key failed the whole
/// batch and every row in it was lost.
#[tokio::test]
async fn a_usage_row_of_a_user_deleted_meanwhile_loses_neither_itself_nor_its_batch() {
    use arbor::model::messages::MessageUsage;
    use arbor::storage::entities::usage;
    use arbor::storage::repos::messages::UsageRow;
    use sea_orm::EntityTrait;
    let app = TestApp::spawn().await;
    let stays = app.create_user("stays@example.com", Role::Member).await;
    let goes = app.create_user("goes@example.com", Role::Member).await;
    arbor::storage::repos::users::delete(&app.state.db, goes.id).await.unwrap();
    let row = |user_id, tokens| UsageRow {
        user_id,
        session_id: None,
        message_id: None,
        provider: "openai",
        model: "gpt-4o-mini",
        usage: MessageUsage { output: tokens, ..MessageUsage::default() },
        latency_ms: 5,
        via: "api",
    };
    app.state.usage.write(&row(stays.id, 11));
    app.state.usage.write(&row(goes.id, 22));
    app.state.usage.write(&row(stays.id, 33));
    app.state.usage.flush().await;
    let mut rows = usage::Entity::find().all(&app.state.db).await.unwrap();
    rows.sort_by_key(|r| r.tokens_out);
    let written: Vec<_> = rows.iter().map(|r| (r.tokens_out, r.user_id)).collect();
    assert_eq!(written, [(11, Some(stays.id)), (22, None), (33, Some(stays.id))]);
}
