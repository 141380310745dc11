//! Request bodies: messages, tool calls and results, thinking, images, tools.

use super::*;

// ---- requests ---------------------------------------------------------------------------

fn msg(role: ChatRole, parts: Vec<Part>) -> ChatMessage {
    ChatMessage { role, parts }
}

fn ptext(s: &str) -> Part {
    Part::Text { text: s.into() }
}

fn request(messages: Vec<ChatMessage>) -> ChatRequest {
    ChatRequest {
        model: "claude-sonnet-4-5".into(),
        system: None,
        messages,
        tools: vec![],
        params: GenParams::default(),
        passthrough: None,
    }
}

#[test]
fn minimal_request() {
    let mut req = request(vec![msg(ChatRole::User, vec![ptext("Hello")])]);
    req.system = Some("Be brief.".into());
    req.params.temperature = Some(0.7);
    assert_eq!(
        build_request(&req, true),
        json!({
            "model": "claude-sonnet-4-5",
            "max_tokens": 4096,
            "system": "Be brief.",
            "messages": [{ "role": "user", "content": [{ "type": "text", "text": "Hello" }] }],
            "temperature": 0.7,
            "stream": true,
        })
    );
    req.system = Some("  ".into());
    req.params.temperature = Some(1.8);
    req.params.max_output_tokens = Some(100);
    let body = build_request(&req, false);
    assert!(body.get("system").is_none());
    assert!(body.get("tools").is_none());
    assert_eq!(body["temperature"], json!(1.0));
    assert_eq!(body["max_tokens"], json!(100));
    assert_eq!(body["stream"], json!(false));
}

#[test]
fn adjacent_same_role_messages_are_merged() {
    let req = request(vec![
        msg(ChatRole::User, vec![ptext("one")]),
        msg(ChatRole::User, vec![ptext("two")]),
        msg(ChatRole::Assistant, vec![ptext("three")]),
        msg(ChatRole::Assistant, vec![ptext("   ")]),
        msg(ChatRole::User, vec![]),
        msg(ChatRole::Assistant, vec![ptext("four")]),
        msg(ChatRole::User, vec![ptext("five")]),
    ]);
    assert_eq!(
        build_request(&req, false)["messages"],
        json!([
            { "role": "user", "content": [{ "type": "text", "text": "one" }, { "type": "text", "text": "two" }] },
            { "role": "assistant", "content": [
                { "type": "text", "text": "three" }, { "type": "text", "text": "four" }
            ] },
            { "role": "user", "content": [{ "type": "text", "text": "five" }] },
        ])
    );
}

#[test]
fn tool_calls_and_results() {
    let result = |id: &str, content: &str, is_error: bool| Part::ToolResult {
        call_id: id.into(),
        name: "get_weather".into(),
        content: content.into(),
        is_error,
    };
    let req = request(vec![
        msg(ChatRole::User, vec![ptext("Weather in SF and Paris?")]),
        msg(
            ChatRole::Assistant,
            vec![
                ptext("Checking."),
                Part::ToolCall {
                    id: "toolu_a".into(),
                    name: "get_weather".into(),
                    arguments: json!({ "location": "SF" }),
                    signature: None,
                },
                Part::ToolCall {
                    id: "toolu_b".into(),
                    name: "get_weather".into(),
                    arguments: Value::String("{broken".into()),
                    signature: Some("gemini-only".into()),
                },
            ],
        ),
        msg(ChatRole::Tool, vec![result("toolu_a", "15°C", false)]),
        msg(ChatRole::Tool, vec![result("toolu_b", "bad arguments", true)]),
        msg(ChatRole::User, vec![ptext("Thanks")]),
    ]);
    assert_eq!(
        build_request(&req, false)["messages"],
        json!([
            { "role": "user", "content": [{ "type": "text", "text": "Weather in SF and Paris?" }] },
            { "role": "assistant", "content": [
                { "type": "text", "text": "Checking." },
                { "type": "tool_use", "id": "toolu_a", "name": "get_weather", "input": { "location": "SF" } },
                { "type": "tool_use", "id": "toolu_b", "name": "get_weather", "input": {} },
            ] },
            { "role": "user", "content": [
                { "type": "tool_result", "tool_use_id": "toolu_a", "content": "15°C", "is_error": false },
                { "type": "tool_result", "tool_use_id": "toolu_b", "content": "bad arguments", "is_error": true },
                { "type": "text", "text": "Thanks" },
            ] },
        ])
    );
}

#[test]
fn tool_results_lead_a_merged_user_message() {
    let req = request(vec![
        msg(ChatRole::User, vec![ptext("note first")]),
        msg(
            ChatRole::Tool,
            vec![Part::ToolResult {
                call_id: "t1".into(),
                name: "f".into(),
                content: "ok".into(),
                is_error: false,
            }],
        ),
    ]);
    assert_eq!(
        build_request(&req, false)["messages"][0]["content"],
        json!([
            { "type": "tool_result", "tool_use_id": "t1", "content": "ok", "is_error": false },
            { "type": "text", "text": "note first" },
        ])
    );
}

#[test]
fn thinking_blocks_go_back_verbatim_and_first() {
    let signature = "EqQBCgIYAhIM1gbcDa9GJwZA2b3hGgxBdjrkzLoky3dl1pkiMOYds/+4QPH==";
    let req = request(vec![
        msg(ChatRole::User, vec![ptext("27 * 453?")]),
        msg(
            ChatRole::Assistant,
            vec![
                ptext("27 * 453 = 12,231"),
                Part::Thought {
                    text: "Let me solve this step by step:\n\n1. ".into(),
                    signature: Some(signature.into()),
                    redacted: None,
                },
                Part::ToolCall {
                    id: "toolu_c".into(),
                    name: "calc".into(),
                    arguments: json!({ "expr": "27*453" }),
                    signature: None,
                },
                Part::Thought {
                    text: String::new(),
                    signature: None,
                    redacted: Some("EmwKAhgBEgy3va3p".into()),
                },
                Part::Thought {
                    text: "unsigned, from another provider".into(),
                    signature: None,
                    redacted: None,
                },
            ],
        ),
        msg(
            ChatRole::User,
            vec![
                Part::Thought { text: "not ours".into(), signature: Some("x".into()), redacted: None },
                ptext("ok"),
            ],
        ),
    ]);
    let body = build_request(&req, false);
    assert_eq!(
        body["messages"][1]["content"],
        json!([
            { "type": "thinking", "thinking": "Let me solve this step by step:\n\n1. ", "signature": signature },
            { "type": "redacted_thinking", "data": "EmwKAhgBEgy3va3p" },
            { "type": "text", "text": "27 * 453 = 12,231" },
            { "type": "tool_use", "id": "toolu_c", "name": "calc", "input": { "expr": "27*453" } },
        ])
    );
    assert_eq!(body["messages"][2]["content"], json!([{ "type": "text", "text": "ok" }]));
}

#[test]
fn images_are_base64_sources() {
    let req = request(vec![msg(
        ChatRole::User,
        vec![
            Part::Image { mime: "image/png".into(), data_base64: "iVBORw0KGgo=".into() },
            ptext("What is this?"),
        ],
    )]);
    assert_eq!(
        build_request(&req, false)["messages"][0]["content"],
        json!([
            { "type": "image", "source": { "type": "base64", "media_type": "image/png", "data": "iVBORw0KGgo=" } },
            { "type": "text", "text": "What is this?" },
        ])
    );
}

#[test]
fn tools_are_declared_with_input_schema() {
    let mut req = request(vec![msg(ChatRole::User, vec![ptext("hi")])]);
    req.tools = vec![
        ToolSpec {
            name: "get_weather".into(),
            description: "Get the weather".into(),
            parameters: json!({ "type": "object", "properties": { "location": { "type": "string" } }, "required": ["location"] }).into(),
        },
        ToolSpec { name: "now".into(), description: "The time".into(), parameters: Value::Null.into() },
    ];
    assert_eq!(
        build_request(&req, false)["tools"],
        json!([
            {
                "name": "get_weather",
                "description": "Get the weather",
                "input_schema": { "type": "object", "properties": { "location": { "type": "string" } }, "required": ["location"] },
            },
            { "name": "now", "description": "The time", "input_schema": { "type": "object", "properties": {} } },
        ])
    );
}

#[test]
fn thinking_budget_sets_thinking_drops_temperature_and_lifts_max_tokens() {
    let mut req = request(vec![msg(ChatRole::User, vec![ptext("hi")])]);
    req.params.temperature = Some(0.3);
    req.params.thinking_budget = Some(10_000);
    let body = build_request(&req, true);
    assert_eq!(body["thinking"], json!({ "type": "enabled", "budget_tokens": 10_000 }));
    assert!(body.get("temperature").is_none());
    assert_eq!(body["max_tokens"], json!(14_096));

    req.params.max_output_tokens = Some(2_000);
    assert_eq!(build_request(&req, true)["max_tokens"], json!(12_000));

    req.params.max_output_tokens = Some(32_000);
    assert_eq!(build_request(&req, true)["max_tokens"], json!(32_000));

    req.params.max_output_tokens = Some(10_000);
    assert_eq!(build_request(&req, true)["max_tokens"], json!(20_000), "equal is not enough");

    req.params.max_output_tokens = None;
    req.params.thinking_budget = Some(100);
    let body = build_request(&req, true);
    assert_eq!(body["thinking"]["budget_tokens"], json!(MIN_THINKING_BUDGET));
    assert_eq!(body["max_tokens"], json!(4096));

    req.params.thinking_budget = Some(0);
    let body = build_request(&req, true);
    assert!(body.get("thinking").is_none());
    assert_eq!(body["temperature"], json!(0.3));
}

#[test]
fn every_thinking_budget_is_below_max_tokens() {
    for budget in [1, 1023, 1024, 4095, 4096, 4097, 50_000, u32::MAX - 1] {
        for max in [None, Some(1), Some(1024), Some(4096), Some(60_000)] {
            let mut req = request(vec![msg(ChatRole::User, vec![ptext("hi")])]);
            req.params.thinking_budget = Some(budget);
            req.params.max_output_tokens = max;
            let body = build_request(&req, false);
            let b = body["thinking"]["budget_tokens"].as_u64().unwrap();
            let m = body["max_tokens"].as_u64().unwrap();
            assert!(b >= u64::from(MIN_THINKING_BUDGET));
            assert!(m > b || m == u64::from(u32::MAX), "budget {budget} max {max:?}: {m} <= {b}");
        }
    }
}

#[test]
fn count_tokens_body_has_no_generation_settings() {
    let mut req = request(vec![msg(ChatRole::User, vec![ptext("Hello, Claude")])]);
    req.system = Some("You are a scientist".into());
    req.params.temperature = Some(0.5);
    req.params.max_output_tokens = Some(10);
    assert_eq!(
        build_count_tokens(&req),
        json!({
            "model": "claude-sonnet-4-5",
            "system": "You are a scientist",
            "messages": [{ "role": "user", "content": [{ "type": "text", "text": "Hello, Claude" }] }],
        })
    );
    req.params.thinking_budget = Some(2048);
    assert_eq!(build_count_tokens(&req)["thinking"], json!({ "type": "enabled", "budget_tokens": 2048 }));
}

#[test]
fn a_passed_through_body_is_sent_as_it_came_with_model_and_stream_set() {
    let caller = json!({
        "model": "claude-opus-5-5", "max_tokens": 9, "stream": false,
        "messages": [{ "role": "user", "content": [{ "type": "text", "text": "hi", "cache_control": { "type": "ephemeral" } }] }],
        "context_management": { "edits": [] }
    });
    let mut req = request(vec![]);
    req.passthrough = Some(Passthrough { body: caller.clone(), beta: None });
    let mut expected = caller;
    expected["model"] = json!("claude-sonnet-4-5");
    expected["stream"] = json!(true);
    assert_eq!(build_request(&req, true), expected);
    let count = build_count_tokens(&req);
    assert!(count.get("max_tokens").is_none() && count.get("stream").is_none());
    assert!(count.get("context_management").is_some());
}
