use serde_json::json;

use super::*;
use crate::providers::types::{FinishReason, ProviderEvent, Usage};

/// The shape Gemini CLI 0.61 sends (recorded from `gemini -p` against a capturing server, texts
/// shortened): JSON-Schema parameters, thinking levels, a routing call with a response schema.
#[test]
fn a_gemini_cli_request_is_accepted() {
    let body = json!({
        "contents": [{ "role": "user", "parts": [{ "text": "<session_context>…</session_context>" }, { "text": "read notes.txt" }] },
            { "role": "model", "parts": [
                { "text": "Let me look.", "thought": true },
                { "functionCall": { "name": "read_file", "args": { "file_path": "notes.txt" } }, "thoughtSignature": "c2ln" }
            ]},
            { "role": "user", "parts": [{ "functionResponse": { "name": "read_file", "response": { "output": "pineapple" } } }] }
        ],
        "systemInstruction": { "parts": [{ "text": "You are Gemini CLI." }] },
        "tools": [{ "functionDeclarations": [
            { "name": "read_file", "description": "Reads.", "parametersJsonSchema": { "type": "object", "properties": { "file_path": { "type": "string" } } } },
            { "name": "old_style", "parameters": { "type": "OBJECT", "properties": { "n": { "type": "INTEGER" } } } }
        ]}, { "googleSearch": {} }],
        "toolConfig": { "functionCallingConfig": { "mode": "ANY", "allowedFunctionNames": ["read_file"] } },
        "generationConfig": { "temperature": 1, "topP": 0.95, "topK": 64, "maxOutputTokens": 100,
            "thinkingConfig": { "includeThoughts": true, "thinkingLevel": "HIGH" } },
        "safetySettings": [{ "category": "HARM_CATEGORY_HARASSMENT", "threshold": "BLOCK_NONE" }]
    });
    let p = parse_request("gemini-3.1-pro-preview", &body).expect("accepted");
    assert_eq!(p.request.system.as_deref(), Some("You are Gemini CLI."));
    let roles: Vec<ChatRole> = p.request.messages.iter().map(|m| m.role).collect();
    assert_eq!(roles, [ChatRole::User, ChatRole::Assistant, ChatRole::Tool]);
    let Part::ToolCall { id, signature, .. } = &p.request.messages[1].parts[1] else { panic!("a call") };
    assert_eq!((id.as_str(), signature.as_deref()), ("call_1", Some("c2ln")));
    assert!(matches!(&p.request.messages[2].parts[0],
        Part::ToolResult { call_id, content, .. } if call_id == "call_1" && content == "pineapple"));
    assert_eq!(p.request.tools[1].parameters["properties"]["n"]["type"], "integer");
    assert_eq!(p.request.params.tool_choice, Some(ToolChoice::Tool("read_file".into())));
    assert_eq!(p.request.params.reasoning_effort, Some(ReasoningEffort::High));
    assert_eq!(p.request.params.max_output_tokens, Some(100));
    let warning = p.dropped.warning().unwrap();
    for named in ["googleSearch tools", "generationConfig.topP", "generationConfig.topK"] {
        assert!(warning.contains(named), "{named} not in {warning}");
    }
    assert!(!warning.contains("safetySettings"), "{warning}");
}

#[test]
fn bad_requests_name_the_field() {
    let ok = json!([{ "role": "user", "parts": [{ "text": "hi" }] }]);
    for (body, param) in [
        (json!({}), "contents"),
        (json!({ "contents": [] }), "contents"),
        (json!({ "contents": [{ "role": "robot", "parts": [] }] }), "contents[0].role"),
        (json!({ "contents": [{ "role": "user", "parts": "x" }] }), "contents[0].parts"),
        (
            json!({ "contents": [{ "role": "user", "parts": [{ "functionResponse": { "name": "f", "response": {} } }] }] }),
            "contents[0].parts[0]",
        ),
        (json!({ "contents": ok, "generationConfig": { "temperature": 9 } }), "generationConfig.temperature"),
        (
            json!({ "contents": ok, "generationConfig": { "maxOutputTokens": -1 } }),
            "generationConfig.maxOutputTokens",
        ),
        (
            json!({ "contents": ok, "toolConfig": { "functionCallingConfig": { "mode": "SOMETIMES" } } }),
            "toolConfig.functionCallingConfig.mode",
        ),
        (
            json!({ "contents": ok, "tools": [{ "functionDeclarations": [{ "description": "no name" }] }] }),
            "tools[0].functionDeclarations[0]",
        ),
    ] {
        assert_eq!(parse_request("m", &body).expect_err("refused").param.as_deref(), Some(param), "{body}");
    }
    assert_eq!(
        split_target("models/gemini-2.5-pro:generateContent"),
        Some(("gemini-2.5-pro", "generateContent"))
    );
    assert_eq!(
        split_target("openai/gpt-4o-mini:streamGenerateContent"),
        Some(("openai/gpt-4o-mini", "streamGenerateContent"))
    );
    assert_eq!(split_target("no-method"), None);
    assert_eq!(split_target(":countTokens"), None);
}

#[test]
fn the_writer_makes_chunks_and_a_whole_response() {
    let mut w = Writer::default();
    assert!(w.push(ProviderEvent::ThoughtDelta("hmm".into())).is_some());
    assert!(w.push(ProviderEvent::TextDelta("Hel".into())).is_some());
    let part = w.push(ProviderEvent::TextDelta("lo".into())).unwrap();
    assert_eq!(w.chunk(part, "m", "r")["candidates"][0]["content"]["parts"][0]["text"], "lo");
    assert!(w.push(ProviderEvent::ThoughtSignature("sig".into())).is_none());
    let call = w
        .push(ProviderEvent::ToolCall {
            id: "c1".into(),
            name: "f".into(),
            arguments: json!({ "a": 1 }),
            signature: None,
        })
        .unwrap();
    assert_eq!(call["thoughtSignature"], "sig");
    w.push(ProviderEvent::Usage(Usage {
        input_tokens: 5,
        output_tokens: 7,
        cached_input_tokens: 0,
        cache_written_input_tokens: 0,
    }));
    w.push(ProviderEvent::Finish(FinishReason::ToolCalls));
    let whole = w.response("openai/gpt-4o-mini", "r1");
    let parts = &whole["candidates"][0]["content"]["parts"];
    assert_eq!(parts[0], json!({ "text": "hmm", "thought": true }));
    assert_eq!(parts[1], json!({ "text": "Hello" }));
    assert_eq!(parts[2]["functionCall"]["args"]["a"], 1);
    assert_eq!(whole["candidates"][0]["finishReason"], "STOP");
    assert_eq!(whole["usageMetadata"]["totalTokenCount"], 12);
    assert_eq!(w.last_chunk("m", "r")["usageMetadata"]["candidatesTokenCount"], 7);
    let e = error_body(&ApiError::new(429, "rate_limit", "slow down"));
    assert_eq!(
        e,
        json!({ "error": { "code": 429, "message": "slow down", "status": "RESOURCE_EXHAUSTED" } })
    );
}
