use super::*;
use crate::providers::types::{ProviderEvent, Usage};

#[test]
fn a_request_with_tools_and_results_parses() {
    let body = json!({
        "model": "smart", "max_tokens": 64, "stream": true,
        "system": [{ "type": "text", "text": "Be kind." }],
        "messages": [
            { "role": "user", "content": "Weather?" },
            { "role": "assistant", "content": [{ "type": "tool_use", "id": "tu_1", "name": "weather", "input": { "city": "Oslo" } }] },
            { "role": "user", "content": [
                { "type": "tool_result", "tool_use_id": "tu_1", "content": "rain" },
                { "type": "text", "text": "Thanks" }
            ]}
        ],
        "tools": [{ "name": "weather", "input_schema": { "type": "object" } }],
        "thinking": { "type": "enabled", "budget_tokens": 2000 }
    });
    let p = parse_request(&body).expect("parses");
    assert!(p.stream);
    assert_eq!(p.request.system.as_deref(), Some("Be kind."));
    let roles: Vec<ChatRole> = p.request.messages.iter().map(|m| m.role).collect();
    assert_eq!(roles, [ChatRole::User, ChatRole::Assistant, ChatRole::Tool, ChatRole::User]);
    assert!(matches!(&p.request.messages[2].parts[0], Part::ToolResult { name, .. } if name == "weather"));
    assert_eq!(p.request.params.thinking_budget, Some(2000));
    assert_eq!(p.request.params.max_output_tokens, Some(64));
}

#[test]
fn bad_requests_name_the_field() {
    let ok = json!([{ "role": "user", "content": "hi" }]);
    for (body, param) in [
        (json!({ "max_tokens": 5, "messages": ok }), "model"),
        (json!({ "model": "m", "messages": ok }), "max_tokens"),
        (json!({ "model": "m", "max_tokens": 5, "messages": [] }), "messages"),
        (
            json!({ "model": "m", "max_tokens": 5, "messages": [{ "role": "robot", "content": "x" }] }),
            "messages.0.role",
        ),
        (
            json!({ "model": "m", "max_tokens": 5, "messages": [{ "role": "system", "content": "x" }] }),
            "messages",
        ),
        (
            json!({ "model": "m", "max_tokens": 5, "messages": ok, "tool_choice": { "type": "some" } }),
            "tool_choice",
        ),
        (
            json!({ "model": "m", "max_tokens": 5, "messages": ok, "output_config": { "effort": "extreme" } }),
            "output_config.effort",
        ),
        (json!({ "model": "m", "max_tokens": 5, "temperature": 3, "messages": ok }), "temperature"),
        (
            json!({ "model": "m", "max_tokens": 5, "messages": [{ "role": "user", "content": [{ "type": "image", "source": { "type": "base64", "media_type": "image/svg+xml", "data": "PHN2Zz4=" } }] }] }),
            "messages.0.content.0",
        ),
    ] {
        assert_eq!(parse_request(&body).expect_err("refused").param.as_deref(), Some(param), "{body}");
    }
}

#[test]
fn the_writer_makes_blocks_in_order() {
    let mut w = Writer::default();
    let mut s = Writer::start("msg_1", "openai/gpt-4o-mini", 3);
    s += &w.push(ProviderEvent::ThoughtDelta("hmm".into()));
    s += &w.push(ProviderEvent::TextDelta("Hel".into()));
    s += &w.push(ProviderEvent::TextDelta("lo".into()));
    s += &w.push(ProviderEvent::ToolCall {
        id: "c1".into(),
        name: "f".into(),
        arguments: json!({ "a": 1 }),
        signature: None,
    });
    w.push(ProviderEvent::Usage(Usage {
        input_tokens: 5,
        output_tokens: 7,
        cached_input_tokens: 0,
        cache_written_input_tokens: 0,
    }));
    s += &w.finish();
    let names: Vec<&str> = s.lines().filter_map(|l| l.strip_prefix("event: ")).collect();
    assert_eq!(
        names,
        [
            "message_start",
            "content_block_start",
            "content_block_delta",
            "content_block_stop",
            "content_block_start",
            "content_block_delta",
            "content_block_delta",
            "content_block_stop",
            "content_block_start",
            "content_block_delta",
            "content_block_stop",
            "message_delta",
            "message_stop"
        ]
    );
    let m = w.message("msg_1", "openai/gpt-4o-mini");
    assert_eq!(m["content"][1]["text"], "Hello");
    assert_eq!(m["content"][2]["input"]["a"], 1);
    assert_eq!(m["stop_reason"], "tool_use");
    assert_eq!(m["usage"]["output_tokens"], 7);
    assert_eq!(error_body(&ApiError::new(529, "overloaded", "busy"))["error"]["type"], "overloaded_error");
}

/// From an Anthropic upstream: redacted reasoning reaches the client as the same block (so it can
/// be sent back on the next turn, as the API requires with tools), and cache writes are counted
/// apart from plain input.
#[test]
fn redacted_thinking_and_cache_writes_are_relayed() {
    let mut w = Writer::default();
    let mut s = w.push(ProviderEvent::RedactedThought("EmwKAhgBEgy3va3pzix".into()));
    s += &w.push(ProviderEvent::TextDelta("Done.".into()));
    w.push(ProviderEvent::Usage(Usage {
        input_tokens: 1_000,
        output_tokens: 9,
        cached_input_tokens: 600,
        cache_written_input_tokens: 300,
    }));
    s += &w.finish();
    assert!(
        s.contains(r#""content_block":{"data":"EmwKAhgBEgy3va3pzix","type":"redacted_thinking"}"#),
        "{s}"
    );
    let m = w.message("msg_1", "claude-sonnet-4-5");
    assert_eq!(m["content"][0], json!({ "type": "redacted_thinking", "data": "EmwKAhgBEgy3va3pzix" }));
    assert_eq!(m["content"][1]["text"], "Done.");
    assert_eq!(
        m["usage"],
        json!({ "input_tokens": 100, "cache_read_input_tokens": 600, "cache_creation_input_tokens": 300, "output_tokens": 9 })
    );
}

/// The shape Claude Code 2.1 sends (recorded from `claude -p` against a capturing server, texts
/// shortened): a system-role message inside `messages`, adaptive thinking, an effort, context
/// management edits, cache control, a deferred tool and seven betas' fields.
#[test]
fn a_claude_code_request_is_accepted_and_what_is_left_out_is_named() {
    let body = json!({
        "model": "claude-opus-5-5",
        "max_tokens": 128000,
        "stream": true,
        "metadata": { "user_id": "{\"device_id\":\"c51f\"}" },
        "thinking": { "type": "adaptive", "display": "omitted" },
        "context_management": { "edits": [{ "type": "clear_thinking_20251015", "keep": "all" }] },
        "output_config": { "effort": "high" },
        "system": [
            { "type": "text", "text": "x-anthropic-billing-header: cc_version=2.1.332;" },
            { "type": "text", "text": "You are a Claude agent.", "cache_control": { "type": "ephemeral" } }
        ],
        "messages": [
            { "role": "user", "content": [
                { "type": "text", "text": "<system-reminder>notes</system-reminder>" },
                { "type": "text", "text": "read notes.txt" }
            ]},
            { "role": "system", "content": [{ "type": "text", "text": "# Environment", "cache_control": { "type": "ephemeral" } }] },
            { "role": "assistant", "content": [
                { "type": "thinking", "thinking": "", "signature": "sig" },
                { "type": "tool_use", "id": "toolu_1", "name": "Read", "input": { "file_path": "/w/notes.txt" } }
            ]},
            { "role": "user", "content": [
                { "type": "tool_result", "tool_use_id": "toolu_1", "content": [
                    { "type": "text", "text": "1\tpineapple" },
                    { "type": "image", "source": { "type": "base64", "media_type": "image/png", "data": "iVBORw0KGgo=" } }
                ]}
            ]}
        ],
        "tools": [
            { "name": "Read", "description": "Reads a file.", "input_schema": { "type": "object" } },
            { "name": "Later", "description": "Deferred.", "input_schema": { "type": "object" }, "defer_loading": true },
            { "type": "web_search_20250305", "name": "web_search", "max_uses": 5 }
        ],
        "tool_choice": { "type": "auto" }
    });
    let p = parse_request(&body).expect("accepted");
    let system = p.request.system.as_deref().unwrap_or_default();
    assert!(
        system.starts_with("x-anthropic-billing-header") && system.ends_with("# Environment"),
        "{system}"
    );
    let roles: Vec<ChatRole> = p.request.messages.iter().map(|m| m.role).collect();
    assert_eq!(roles, [ChatRole::User, ChatRole::Assistant, ChatRole::Tool]);
    assert!(
        matches!(&p.request.messages[2].parts[0], Part::ToolResult { name, content, .. } if name == "Read" && content == "1\tpineapple")
    );
    let names: Vec<&str> = p.request.tools.iter().map(|t| t.name.as_str()).collect();
    assert_eq!(names, ["Read", "Later"]);
    assert_eq!(p.request.params.reasoning_effort, Some(ReasoningEffort::High));
    assert_eq!(p.request.params.thinking_budget, None);
    assert_eq!(p.request.params.tool_choice, Some(ToolChoice::Auto));
    assert_eq!(p.request.params.max_output_tokens, Some(128000));
    let warning = p.dropped.warning().expect("a warning");
    for named in
        ["cache_control", "context_management", "web_search_20250305 tools", "tool_result image blocks"]
    {
        assert!(warning.contains(named), "{named} not in {warning}");
    }
    assert!(!warning.contains("metadata"), "{warning}");
}

#[test]
fn thinking_and_effort_map_to_the_neutral_parameters() {
    let base = |extra: Value| {
        let mut b =
            json!({ "model": "m", "max_tokens": 9, "messages": [{ "role": "user", "content": "hi" }] });
        for (k, v) in extra.as_object().unwrap() {
            b[k] = v.clone();
        }
        parse_request(&b).expect("parses").request.params
    };
    let p = base(json!({ "thinking": { "type": "adaptive" } }));
    assert_eq!((p.reasoning_effort, p.thinking_budget), (Some(ReasoningEffort::Medium), None));
    let p = base(json!({ "thinking": { "type": "disabled" }, "output_config": { "effort": "low" } }));
    assert_eq!((p.reasoning_effort, p.thinking_budget), (None, None));
    let p = base(
        json!({ "thinking": { "type": "enabled", "budget_tokens": 1024 }, "output_config": { "effort": "max" } }),
    );
    assert_eq!((p.reasoning_effort, p.thinking_budget), (Some(ReasoningEffort::High), Some(1024)));
    let p = base(json!({ "tool_choice": { "type": "tool", "name": "Read" } }));
    assert_eq!(p.tool_choice, Some(ToolChoice::Tool("Read".into())));
    let p = base(json!({ "tool_choice": { "type": "any" } }));
    assert_eq!(p.tool_choice, Some(ToolChoice::Required));
}

#[test]
fn documents_are_carried_and_url_sources_are_named_not_fetched() {
    let body = json!({ "model": "m", "max_tokens": 9, "messages": [{ "role": "user", "content": [
        { "type": "document", "title": "a.pdf", "source": { "type": "base64", "media_type": "application/pdf", "data": "JVBERi0=" } },
        { "type": "document", "source": { "type": "text", "media_type": "text/plain", "data": "plain words" } },
        { "type": "document", "source": { "type": "url", "url": "http://169.254.169.254/" } },
        { "type": "image", "source": { "type": "url", "url": "http://127.0.0.1/x.png" } },
        { "type": "search_result", "source": "s", "title": "t", "content": [] }
    ]}]});
    let p = parse_request(&body).expect("parses");
    let parts = &p.request.messages[0].parts;
    assert!(matches!(&parts[0], Part::Document { name, .. } if name == "a.pdf"));
    assert!(matches!(&parts[1], Part::Text { text } if text == "plain words"));
    assert_eq!(parts.len(), 2);
    let warning = p.dropped.warning().unwrap();
    for named in ["document url sources", "image url sources", "search_result blocks"] {
        assert!(warning.contains(named), "{named} not in {warning}");
    }
}
