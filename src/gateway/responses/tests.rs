use serde_json::json;

use super::*;
use crate::providers::types::{FinishReason, ProviderEvent, ToolChoice, Usage};

/// The shape Codex CLI 0.169 sends (recorded from `codex exec` against a capturing server,
/// texts shortened): developer messages, typed message items, function tools beside a
/// namespace and web search, `reasoning.summary`, `store: false`, encrypted reasoning asked for.
#[test]
fn a_codex_request_is_accepted() {
    let body = json!({
        "model": "gpt-5-codex", "stream": true, "store": false, "parallel_tool_calls": true,
        "tool_choice": "auto", "reasoning": { "summary": "auto" }, "include": ["reasoning.encrypted_content"],
        "prompt_cache_key": "01a2", "client_metadata": { "thread_id": "01a2" },
        "input": [
            { "type": "message", "id": "msg_1", "role": "developer", "content": [{ "type": "input_text", "text": "You are a coding agent." }] },
            { "type": "message", "role": "user", "content": [{ "type": "input_text", "text": "read notes.txt" }] },
            { "type": "reasoning", "id": "rs_1", "summary": [{ "type": "summary_text", "text": "Look first." }], "encrypted_content": "gAAA" },
            { "type": "function_call", "call_id": "call_1", "name": "exec_command", "arguments": "{\"cmd\":\"cat notes.txt\"}" },
            { "type": "function_call_output", "call_id": "call_1", "output": "pineapple" }
        ],
        "tools": [
            { "type": "function", "name": "exec_command", "strict": false, "parameters": { "type": "object", "properties": { "cmd": { "type": "string" } } } },
            { "type": "namespace", "name": "multi_agent_v1", "tools": [] },
            { "type": "web_search" }
        ]
    });
    let p = parse_request(&body).expect("accepted");
    assert!(p.stream && !p.store);
    assert_eq!(p.request.system.as_deref(), Some("You are a coding agent."));
    let roles: Vec<ChatRole> = p.request.messages.iter().map(|m| m.role).collect();
    assert_eq!(roles, [ChatRole::User, ChatRole::Assistant, ChatRole::Tool]);
    assert!(
        matches!(&p.request.messages[1].parts[1], Part::ToolCall { arguments, .. } if arguments["cmd"] == "cat notes.txt")
    );
    assert!(
        matches!(&p.request.messages[2].parts[0], Part::ToolResult { name, content, .. } if name == "exec_command" && content == "pineapple")
    );
    assert_eq!(p.request.tools.len(), 1);
    assert_eq!(p.request.params.tool_choice, Some(ToolChoice::Auto));
    let warning = p.dropped.warning().unwrap();
    for named in ["namespace tools", "web_search tools", "encrypted reasoning"] {
        assert!(warning.contains(named), "{named} not in {warning}");
    }
}

#[test]
fn bad_requests_name_the_field() {
    for (body, param) in [
        (json!({ "input": "hi" }), "model"),
        (json!({ "model": "m" }), "input"),
        (json!({ "model": "m", "input": 5 }), "input"),
        (json!({ "model": "m", "input": [] }), "input"),
        (
            json!({ "model": "m", "input": [{ "type": "message", "role": "robot", "content": "x" }] }),
            "input[0].role",
        ),
        (
            json!({ "model": "m", "input": [{ "type": "function_call_output", "call_id": "nope", "output": "x" }] }),
            "input[0].call_id",
        ),
        (json!({ "model": "m", "input": "hi", "reasoning": { "effort": "huge" } }), "reasoning.effort"),
        (json!({ "model": "m", "input": "hi", "max_output_tokens": 0 }), "max_output_tokens"),
        (json!({ "model": "m", "input": "hi", "tools": [{ "name": "f" }] }), "tools[0]"),
        (json!({ "model": "m", "input": "hi", "tool_choice": "sometimes" }), "tool_choice"),
    ] {
        assert_eq!(parse_request(&body).expect_err("refused").param.as_deref(), Some(param), "{body}");
    }
    // A result for a call in the stored chain is named once the chain is joined.
    let p = parse_request(&json!({ "model": "m", "previous_response_id": "resp_1",
        "input": [{ "type": "function_call_output", "call_id": "call_9", "output": "x" }] }))
    .expect("continues");
    let mut messages = vec![ChatMessage {
        role: ChatRole::Assistant,
        parts: vec![Part::ToolCall {
            id: "call_9".into(),
            name: "f".into(),
            arguments: json!({}),
            signature: None,
        }],
    }];
    messages.extend(p.request.messages.clone());
    name_results(&mut messages).expect("named");
    assert!(matches!(&messages[1].parts[0], Part::ToolResult { name, .. } if name == "f"));
    let mut alone = p.request.messages;
    assert_eq!(name_results(&mut alone).expect_err("no call").status, 400);
}

#[test]
fn the_writer_makes_the_documented_event_sequence() {
    let mut w = Writer::new("resp_1", "openai/gpt-4o-mini", Echo::default(), None, true);
    let mut s = w.start();
    s += &w.push(ProviderEvent::ThoughtDelta("hmm".into()));
    s += &w.push(ProviderEvent::TextDelta("Hel".into()));
    s += &w.push(ProviderEvent::TextDelta("lo".into()));
    s += &w.push(ProviderEvent::ToolCall {
        id: "call_1".into(),
        name: "f".into(),
        arguments: json!({ "a": 1 }),
        signature: None,
    });
    s += &w.push(ProviderEvent::Usage(Usage {
        input_tokens: 5,
        output_tokens: 7,
        cached_input_tokens: 0,
        cache_written_input_tokens: 0,
    }));
    s += &w.push(ProviderEvent::Finish(FinishReason::ToolCalls));
    s += &w.finish();
    let kinds: Vec<&str> = s.lines().filter_map(|l| l.strip_prefix("event: ")).collect();
    assert_eq!(
        kinds,
        [
            "response.created",
            "response.in_progress",
            "response.output_item.added",
            "response.reasoning_summary_part.added",
            "response.reasoning_summary_text.delta",
            "response.reasoning_summary_text.done",
            "response.reasoning_summary_part.done",
            "response.output_item.done",
            "response.output_item.added",
            "response.content_part.added",
            "response.output_text.delta",
            "response.output_text.delta",
            "response.output_text.done",
            "response.content_part.done",
            "response.output_item.done",
            "response.output_item.added",
            "response.function_call_arguments.delta",
            "response.function_call_arguments.done",
            "response.output_item.done",
            "response.completed",
        ]
    );
    let numbers: Vec<u64> = s
        .lines()
        .filter_map(|l| l.strip_prefix("data: "))
        .map(|d| serde_json::from_str::<serde_json::Value>(d).unwrap()["sequence_number"].as_u64().unwrap())
        .collect();
    assert_eq!(numbers, (0..numbers.len() as u64).collect::<Vec<_>>());
    let whole = w.whole();
    assert_eq!(whole["status"], "completed");
    assert_eq!(whole["output"][1]["content"][0]["text"], "Hello");
    assert_eq!(whole["output"][2]["arguments"], "{\"a\":1}");
    assert_eq!(whole["usage"]["total_tokens"], 12);
    let kept = w.output_message().unwrap();
    assert_eq!(kept.parts.len(), 3);
    let failed = w.failed(&ApiError::new(502, "upstream", "down"));
    assert!(failed.starts_with("event: response.failed\n") && failed.contains("\"status\":\"failed\""));
}
