//! Endpoints and request bodies.

use super::*;

// ---- endpoint and build_request ----

#[test]
fn endpoints() {
    assert_eq!(endpoint("https://api.openai.com/v1"), "https://api.openai.com/v1/chat/completions");
    assert_eq!(endpoint("https://api.openai.com/v1/"), "https://api.openai.com/v1/chat/completions");
    assert_eq!(endpoint("http://localhost:11434/v1//"), "http://localhost:11434/v1/chat/completions");
    assert_eq!(endpoint("https://api.deepseek.com"), "https://api.deepseek.com/chat/completions");
    assert_eq!(endpoint(" https://openrouter.ai/api/v1 "), "https://openrouter.ai/api/v1/chat/completions");
    assert_eq!(
        endpoint("https://api.groq.com/openai/v1/chat/completions"),
        "https://api.groq.com/openai/v1/chat/completions"
    );
}

fn user(text: &str) -> ChatMessage {
    ChatMessage { role: ChatRole::User, parts: vec![Part::Text { text: text.into() }] }
}

fn request(messages: Vec<ChatMessage>) -> ChatRequest {
    ChatRequest {
        model: "gpt-4o".into(),
        system: None,
        messages,
        tools: vec![],
        params: GenParams::default(),
        passthrough: None,
    }
}

#[test]
fn minimal_request() {
    assert_eq!(
        build_request(&request(vec![user("Hi")]), false),
        json!({ "model": "gpt-4o", "messages": [{ "role": "user", "content": "Hi" }], "stream": false })
    );
}

#[test]
fn full_request() {
    let req = ChatRequest {
        model: "o3-mini".into(),
        system: Some("You are terse.".into()),
        messages: vec![
            ChatMessage {
                role: ChatRole::User,
                parts: vec![
                    Part::Text { text: "What is in this image?".into() },
                    Part::Image { mime: "image/png".into(), data_base64: "iVBORw0KGgo=".into() },
                ],
            },
            ChatMessage {
                role: ChatRole::Assistant,
                parts: vec![
                    Part::Thought {
                        text: "Look closer.".into(),
                        signature: Some("sig".into()),
                        redacted: None,
                    },
                    Part::Text { text: "Let me zoom.".into() },
                    Part::ToolCall {
                        id: "call_1".into(),
                        name: "zoom".into(),
                        arguments: json!({ "factor": 2 }),
                        signature: None,
                    },
                    Part::ToolCall {
                        id: "call_2".into(),
                        name: "crop".into(),
                        arguments: Value::String("{\"x\":".into()),
                        signature: None,
                    },
                ],
            },
            ChatMessage {
                role: ChatRole::Tool,
                parts: vec![
                    Part::ToolResult {
                        call_id: "call_1".into(),
                        name: "zoom".into(),
                        content: "zoomed".into(),
                        is_error: false,
                    },
                    Part::ToolResult {
                        call_id: "call_2".into(),
                        name: "crop".into(),
                        content: "bad arguments".into(),
                        is_error: true,
                    },
                ],
            },
            ChatMessage {
                role: ChatRole::Assistant,
                parts: vec![Part::ToolCall {
                    id: "call_3".into(),
                    name: "zoom".into(),
                    arguments: json!({}),
                    signature: None,
                }],
            },
            ChatMessage {
                role: ChatRole::User,
                parts: vec![
                    Part::ToolResult {
                        call_id: "call_3".into(),
                        name: "zoom".into(),
                        content: "ok".into(),
                        is_error: false,
                    },
                    Part::Text { text: "And now?".into() },
                    Part::Text { text: "Be brief.".into() },
                ],
            },
        ],
        tools: vec![ToolSpec {
            name: "zoom".into(),
            description: "Zooms in.".into(),
            parameters: json!({ "type": "object", "properties": { "factor": { "type": "number" } } }).into(),
        }],
        params: GenParams {
            temperature: Some(0.7),
            max_output_tokens: Some(4096),
            reasoning_effort: Some(ReasoningEffort::High),
            thinking_budget: Some(2048),
            tool_choice: None,
        },
        passthrough: None,
    };
    assert_eq!(
        build_request(&req, true),
        json!({
            "model": "o3-mini",
            "messages": [
                { "role": "system", "content": "You are terse." },
                { "role": "user", "content": [
                    { "type": "text", "text": "What is in this image?" },
                    { "type": "image_url", "image_url": { "url": "data:image/png;base64,iVBORw0KGgo=" } }
                ] },
                { "role": "assistant", "content": "Let me zoom.", "tool_calls": [
                    { "id": "call_1", "type": "function", "function": { "name": "zoom", "arguments": "{\"factor\":2}" } },
                    { "id": "call_2", "type": "function", "function": { "name": "crop", "arguments": "{\"x\":" } }
                ] },
                { "role": "tool", "tool_call_id": "call_1", "content": "zoomed" },
                { "role": "tool", "tool_call_id": "call_2", "content": "bad arguments" },
                { "role": "assistant", "content": null, "tool_calls": [
                    { "id": "call_3", "type": "function", "function": { "name": "zoom", "arguments": "{}" } }
                ] },
                { "role": "tool", "tool_call_id": "call_3", "content": "ok" },
                { "role": "user", "content": "And now?\nBe brief." }
            ],
            "tools": [{ "type": "function", "function": {
                "name": "zoom",
                "description": "Zooms in.",
                "parameters": { "type": "object", "properties": { "factor": { "type": "number" } } }
            } }],
            "temperature": 0.7,
            "max_completion_tokens": 4096,
            "reasoning_effort": "high",
            "stream": true,
            "stream_options": { "include_usage": true }
        })
    );
}

#[test]
fn thought_only_assistant_message_is_omitted_and_empty_system_skipped() {
    let mut req = request(vec![
        user("a"),
        ChatMessage {
            role: ChatRole::Assistant,
            parts: vec![Part::Thought { text: "hmm".into(), signature: None, redacted: None }],
        },
        user("b"),
    ]);
    req.system = Some(String::new());
    let body = build_request(&req, false);
    assert_eq!(
        body.get("messages"),
        Some(&json!([{ "role": "user", "content": "a" }, { "role": "user", "content": "b" }]))
    );
    assert!(body.get("tools").is_none());
    assert!(body.get("stream_options").is_none());
}

#[test]
fn request_params() {
    let mut req = request(vec![user("x")]);
    for (effort, name) in
        [(ReasoningEffort::Low, "low"), (ReasoningEffort::Medium, "medium"), (ReasoningEffort::High, "high")]
    {
        req.params.reasoning_effort = Some(effort);
        assert_eq!(build_request(&req, false).get("reasoning_effort"), Some(&json!(name)));
    }
    req.params.temperature = Some(0.0);
    assert_eq!(build_request(&req, false).get("temperature"), Some(&json!(0.0)));
    req.params.temperature = Some(1.3);
    assert_eq!(build_request(&req, false).get("temperature"), Some(&json!(1.3)));
    req.params.temperature = Some(f32::NAN);
    assert_eq!(build_request(&req, false).get("temperature"), None);
    assert_eq!(build_request(&req, false).get("max_tokens"), None);
}
