//! Request bodies: contents, signatures, generation config, and tool schemas.

use super::*;

// ---- requests ---------------------------------------------------------------------------

pub(super) fn msg(role: ChatRole, parts: Vec<Part>) -> ChatMessage {
    ChatMessage { role, parts }
}

pub(super) fn text_part(s: &str) -> Part {
    Part::Text { text: s.into() }
}

pub(super) fn request(messages: Vec<ChatMessage>) -> ChatRequest {
    ChatRequest {
        model: "gemini-2.5-flash".into(),
        system: None,
        messages,
        tools: Vec::new(),
        params: GenParams::default(),
        passthrough: None,
    }
}

pub(super) fn weather_tool() -> ToolSpec {
    ToolSpec {
        name: "get_weather".into(),
        description: "Current weather for a place.".into(),
        parameters: json!({
            "$schema": "http://json-schema.org/draft-07/schema#",
            "type": "object",
            "properties": {
                "location": {"type": "string", "description": "City and country"},
                "unit": {"type": "string", "enum": ["celsius", "fahrenheit"]}
            },
            "required": ["location"],
            "additionalProperties": false
        })
        .into(),
    }
}

#[test]
fn full_request_body() {
    let req = ChatRequest {
        model: "models/gemini-3-pro-preview".into(),
        system: Some("You are terse.".into()),
        messages: vec![
            msg(
                ChatRole::User,
                vec![
                    text_part("What's the weather in Paris and London? Here is my sky:"),
                    Part::Image { mime: "image/jpeg".into(), data_base64: "/9j/4AAQSkZJRg==".into() },
                ],
            ),
            msg(
                ChatRole::Assistant,
                vec![
                    Part::Thought {
                        text: "Two cities: two calls.".into(),
                        signature: Some("c2lnLXRob3VnaHQ=".into()),
                        redacted: None,
                    },
                    Part::ToolCall {
                        id: "call_R_0".into(),
                        name: "get_weather".into(),
                        arguments: json!({"location": "Paris"}),
                        signature: Some("c2lnLWNhbGw+/A==".into()),
                    },
                    Part::ToolCall {
                        id: "call_R_1".into(),
                        name: "get_weather".into(),
                        arguments: json!({"location": "London"}),
                        signature: None,
                    },
                ],
            ),
            msg(
                ChatRole::Tool,
                vec![
                    Part::ToolResult {
                        call_id: "call_R_0".into(),
                        name: "get_weather".into(),
                        content: "18 °C, sunny".into(),
                        is_error: false,
                    },
                    Part::ToolResult {
                        call_id: "call_R_1".into(),
                        name: "get_weather".into(),
                        content: "upstream timeout".into(),
                        is_error: true,
                    },
                ],
            ),
            msg(ChatRole::User, vec![text_part("Thanks. And Rome?")]),
        ],
        tools: vec![weather_tool()],
        params: GenParams {
            temperature: Some(0.7),
            max_output_tokens: Some(1024),
            reasoning_effort: None,
            thinking_budget: Some(2048),
            tool_choice: None,
        },
        passthrough: None,
    };
    let expected = json!({
        "contents": [
            {"role": "user", "parts": [
                {"text": "What's the weather in Paris and London? Here is my sky:"},
                {"inlineData": {"mimeType": "image/jpeg", "data": "/9j/4AAQSkZJRg=="}}
            ]},
            {"role": "model", "parts": [
                {"text": "Two cities: two calls.", "thought": true, "thoughtSignature": "c2lnLXRob3VnaHQ="},
                {"functionCall": {"name": "get_weather", "args": {"location": "Paris"}},
                 "thoughtSignature": "c2lnLWNhbGw+/A=="},
                {"functionCall": {"name": "get_weather", "args": {"location": "London"}}}
            ]},
            {"role": "user", "parts": [
                {"functionResponse": {"name": "get_weather", "response": {"output": "18 °C, sunny"}}},
                {"functionResponse": {"name": "get_weather", "response": {"error": "upstream timeout"}}},
                {"text": "Thanks. And Rome?"}
            ]}
        ],
        "systemInstruction": {"parts": [{"text": "You are terse."}]},
        "tools": [{"functionDeclarations": [{
            "name": "get_weather",
            "description": "Current weather for a place.",
            "parameters": {
                "type": "object",
                "properties": {
                    "location": {"type": "string", "description": "City and country"},
                    "unit": {"type": "string", "enum": ["celsius", "fahrenheit"]}
                },
                "required": ["location"]
            }
        }]}],
        "generationConfig": {
            "temperature": 0.7,
            "maxOutputTokens": 1024,
            "thinkingConfig": {"thinkingBudget": 2048, "includeThoughts": true}
        }
    });
    assert_eq!(build_request(&req), expected);
}

#[test]
fn minimal_request_has_no_optional_sections() {
    let req = request(vec![msg(ChatRole::User, vec![text_part("Hi")])]);
    assert_eq!(build_request(&req), json!({"contents": [{"role": "user", "parts": [{"text": "Hi"}]}]}));
    let blank_system = ChatRequest { system: Some("  ".into()), ..req };
    assert!(build_request(&blank_system).get("systemInstruction").is_none());
}

#[test]
fn adjacent_turns_of_one_role_merge() {
    let req = request(vec![
        msg(ChatRole::User, vec![text_part("one")]),
        msg(ChatRole::User, vec![text_part("two")]),
        msg(ChatRole::Assistant, vec![text_part("three")]),
        // Nothing Gemini can take: skipped, so it does not split the model turn.
        msg(ChatRole::User, vec![text_part("")]),
        msg(ChatRole::Assistant, vec![text_part("four")]),
        msg(
            ChatRole::Tool,
            vec![Part::ToolResult {
                call_id: "call_0".into(),
                name: "f".into(),
                content: "{\"ok\":true}".into(),
                is_error: false,
            }],
        ),
        msg(ChatRole::User, vec![text_part("five")]),
        msg(ChatRole::Assistant, vec![]),
    ]);
    assert_eq!(
        build_request(&req)["contents"],
        json!([
            {"role": "user", "parts": [{"text": "one"}, {"text": "two"}]},
            {"role": "model", "parts": [{"text": "three"}, {"text": "four"}]},
            {"role": "user", "parts": [
                {"functionResponse": {"name": "f", "response": {"output": "{\"ok\":true}"}}},
                {"text": "five"}
            ]}
        ])
    );
}

#[test]
fn provider_ids_are_echoed_and_made_up_ones_are_not() {
    let req = request(vec![
        msg(
            ChatRole::Assistant,
            vec![
                Part::ToolCall { id: "fc-7".into(), name: "f".into(), arguments: json!({}), signature: None },
                Part::ToolCall {
                    id: "call_3".into(),
                    name: "g".into(),
                    arguments: Value::Null,
                    signature: None,
                },
                Part::ToolCall { id: "".into(), name: "h".into(), arguments: json!([1, 2]), signature: None },
            ],
        ),
        msg(
            ChatRole::Tool,
            vec![
                Part::ToolResult {
                    call_id: "fc-7".into(),
                    name: "f".into(),
                    content: "a".into(),
                    is_error: false,
                },
                Part::ToolResult {
                    call_id: "call_3".into(),
                    name: "g".into(),
                    content: "b".into(),
                    is_error: false,
                },
            ],
        ),
    ]);
    assert_eq!(
        build_request(&req)["contents"],
        json!([
            {"role": "model", "parts": [
                {"functionCall": {"id": "fc-7", "name": "f", "args": {}}},
                {"functionCall": {"name": "g", "args": {}}},
                {"functionCall": {"name": "h", "args": {"value": [1, 2]}}}
            ]},
            {"role": "user", "parts": [
                {"functionResponse": {"id": "fc-7", "name": "f", "response": {"output": "a"}}},
                {"functionResponse": {"name": "g", "response": {"output": "b"}}}
            ]}
        ])
    );
}

#[test]
fn thoughts_are_replayed_only_in_model_turns() {
    let thought_part = |text: &str, signature: Option<&str>, redacted: Option<&str>| Part::Thought {
        text: text.into(),
        signature: signature.map(str::to_string),
        redacted: redacted.map(str::to_string),
    };
    let req = request(vec![
        msg(ChatRole::User, vec![thought_part("user-side thought", Some("x"), None), text_part("q")]),
        msg(
            ChatRole::Assistant,
            vec![
                thought_part("visible", None, None),
                thought_part("", Some("only+sig/=="), None),
                thought_part("", None, Some("anthropic-redacted-data")),
                thought_part("", Some(""), None),
                text_part("a"),
            ],
        ),
    ]);
    assert_eq!(
        build_request(&req)["contents"],
        json!([
            {"role": "user", "parts": [{"text": "q"}]},
            {"role": "model", "parts": [
                {"text": "visible", "thought": true},
                {"text": "", "thought": true, "thoughtSignature": "only+sig/=="},
                {"text": "a"}
            ]}
        ])
    );
}

/// What an assembler does with the events: deltas appended, a signature attached to the
/// current thought (or to a new, empty one), tool calls kept whole.
fn assemble(events: &[ProviderEvent]) -> Vec<Part> {
    let mut parts: Vec<Part> = Vec::new();
    for event in events {
        match event {
            ProviderEvent::TextDelta(t) => match parts.last_mut() {
                Some(Part::Text { text }) => text.push_str(t),
                _ => parts.push(Part::Text { text: t.clone() }),
            },
            ProviderEvent::ThoughtDelta(t) => match parts.last_mut() {
                Some(Part::Thought { text, signature: None, .. }) => text.push_str(t),
                _ => parts.push(Part::Thought { text: t.clone(), signature: None, redacted: None }),
            },
            ProviderEvent::ThoughtSignature(s) => {
                let open = parts.iter_mut().rev().find_map(|p| match p {
                    Part::Thought { signature: sig @ None, .. } => Some(sig),
                    _ => None,
                });
                match open {
                    Some(sig) => *sig = Some(s.clone()),
                    None => parts.push(Part::Thought {
                        text: String::new(),
                        signature: Some(s.clone()),
                        redacted: None,
                    }),
                }
            }
            ProviderEvent::ToolCall { id, name, arguments, signature } => parts.push(Part::ToolCall {
                id: id.clone(),
                name: name.clone(),
                arguments: arguments.clone(),
                signature: signature.clone(),
            }),
            _ => {}
        }
    }
    parts
}

#[test]
fn streamed_signatures_round_trip_verbatim() {
    // Thinking: the signature goes back with the thought.
    let (events, _) = decode_every_way(THINKING_SSE);
    let req = request(vec![
        msg(ChatRole::User, vec![text_part("How many primes are below 100?")]),
        msg(ChatRole::Assistant, assemble(&events)),
    ]);
    let model_parts = &build_request(&req)["contents"][1]["parts"];
    assert_eq!(model_parts[0]["thought"], json!(true));
    assert_eq!(model_parts[0]["thoughtSignature"], json!(SIG_THINKING));
    assert_eq!(
        model_parts[1],
        json!({"text": "There are **25** prime numbers less than 100. The largest of them is 97."})
    );

    // Parallel calls: the first call carries its signature back, the second carries none;
    // the made-up ids stay on our side.
    let (events, _) = decode_every_way(CALLS_SSE);
    let calls = assemble(&events);
    let results = calls
        .iter()
        .filter_map(|p| match p {
            Part::ToolCall { id, name, .. } => Some(Part::ToolResult {
                call_id: id.clone(),
                name: name.clone(),
                content: "15 °C".into(),
                is_error: false,
            }),
            _ => None,
        })
        .collect();
    let req = request(vec![
        msg(ChatRole::User, vec![text_part("Weather in Paris and London?")]),
        msg(ChatRole::Assistant, calls),
        msg(ChatRole::Tool, results),
    ]);
    assert_eq!(
        build_request(&req)["contents"],
        json!([
            {"role": "user", "parts": [{"text": "Weather in Paris and London?"}]},
            {"role": "model", "parts": [
                {"functionCall": {"name": "get_weather", "args": {"location": "Paris, France", "unit": "celsius"}},
                 "thoughtSignature": SIG_CALL},
                {"functionCall": {"name": "get_weather", "args": {"location": "London, UK", "unit": "celsius"}}}
            ]},
            {"role": "user", "parts": [
                {"functionResponse": {"name": "get_weather", "response": {"output": "15 °C"}}},
                {"functionResponse": {"name": "get_weather", "response": {"output": "15 °C"}}}
            ]}
        ])
    );
    // The fixture's signature, byte for byte, in the serialized body.
    let body = serde_json::to_string(&build_request(&req)).unwrap();
    assert!(body.contains(&format!("\"thoughtSignature\":\"{SIG_CALL}\"")));
}

#[test]
fn generation_config_variants() {
    let config = |params: GenParams| build_request(&ChatRequest { params, ..request(vec![]) });
    assert!(config(GenParams::default()).get("generationConfig").is_none());
    assert_eq!(
        config(GenParams { temperature: Some(0.7), ..Default::default() })["generationConfig"],
        json!({"temperature": 0.7})
    );
    assert_eq!(
        config(GenParams { temperature: Some(f32::NAN), ..Default::default() }).get("generationConfig"),
        None
    );
    assert_eq!(
        config(GenParams { thinking_budget: Some(0), ..Default::default() })["generationConfig"],
        json!({"thinkingConfig": {"thinkingBudget": 0, "includeThoughts": false}})
    );
    assert_eq!(
        config(GenParams { reasoning_effort: Some(ReasoningEffort::High), ..Default::default() })["generationConfig"],
        json!({"thinkingConfig": {"thinkingBudget": 24576, "includeThoughts": true}})
    );
    assert_eq!(
        config(GenParams {
            reasoning_effort: Some(ReasoningEffort::Low),
            thinking_budget: Some(512),
            max_output_tokens: Some(8),
            ..Default::default()
        })["generationConfig"],
        json!({"maxOutputTokens": 8, "thinkingConfig": {"thinkingBudget": 512, "includeThoughts": true}})
    );
}

// ---- schemas ----------------------------------------------------------------------------

#[test]
fn schema_stripping_and_conversion() {
    let schema = json!({
        "$schema": "https://json-schema.org/draft/2020-12/schema",
        "$id": "https://example.com/fetch.json",
        "title": "fetch",
        "type": "object",
        "additionalProperties": false,
        "properties": {
            "url": {"type": "string", "format": "uri", "description": "Page to fetch", "minLength": 1},
            "when": {"type": "string", "format": "date-time"},
            "mode": {"const": "fast"},
            "retries": {"type": ["integer", "null"], "minimum": 0, "exclusiveMaximum": 10, "default": 2},
            "level": {"type": "integer", "enum": [1, 2, 3], "description": "Detail."},
            "flag": {"type": "boolean", "enum": [true]},
            "choice": {"enum": ["a", null]},
            "tags": {"type": "array", "items": {"type": "string", "pattern": "^[a-z]+$"},
                     "uniqueItems": true, "minItems": 1, "examples": [["x"]]},
            "target": {"oneOf": [{"type": "string"}, {"type": "number", "multipleOf": 0.5}]},
            "either": {"type": ["string", "number"]},
            "opt": {"anyOf": [{"$ref": "#/$defs/Point"}, {"type": "null"}], "description": "optional point"},
            "meta": {"type": "object", "additionalProperties": {"type": "string"},
                     "patternProperties": {"^x-": {"type": "string"}}},
            "any": true,
            "cond": {"type": "string", "if": {"minLength": 2}, "then": {"pattern": "a"}, "not": {"const": "b"}}
        },
        "required": ["url", "missing"],
        "propertyOrdering": ["url", "nope", "when"],
        "$defs": {"Point": {"type": "object", "properties": {"x": {"type": "number"}, "y": {"type": "number"}},
                            "required": ["x", "y"], "additionalProperties": false}}
    });
    assert_eq!(
        sanitize_schema(&schema),
        json!({
            "title": "fetch",
            "type": "object",
            "properties": {
                "url": {"type": "string", "description": "Page to fetch", "minLength": 1},
                "when": {"type": "string", "format": "date-time"},
                "mode": {"type": "string", "enum": ["fast"]},
                "retries": {"type": "integer", "minimum": 0, "default": 2, "nullable": true},
                "level": {"type": "integer", "description": "Detail. One of: 1, 2, 3."},
                "flag": {"type": "boolean", "description": "One of: true."},
                "choice": {"type": "string", "enum": ["a"], "nullable": true},
                "tags": {"type": "array", "items": {"type": "string", "pattern": "^[a-z]+$"}, "minItems": 1},
                "target": {"anyOf": [{"type": "string"}, {"type": "number"}]},
                "either": {"anyOf": [{"type": "string"}, {"type": "number"}]},
                "opt": {"type": "object", "properties": {"x": {"type": "number"}, "y": {"type": "number"}},
                        "required": ["x", "y"], "description": "optional point", "nullable": true},
                "meta": {"type": "object"},
                "any": {},
                "cond": {"type": "string"}
            },
            "required": ["url"],
            "propertyOrdering": ["url", "when"]
        })
    );
}

#[test]
fn schema_refs_all_of_and_recursion() {
    let schema = json!({
        "type": "object",
        "properties": {
            "root": {"$ref": "#/definitions/Node"},
            "item": {"allOf": [{"$ref": "#/$defs/Base"}, {"properties": {"extra": {"type": "boolean"}},
                                                            "required": ["extra"]}],
                     "description": "merged"},
            "dangling": {"$ref": "#/$defs/Nope", "description": "kept"},
            "remote": {"$ref": "https://example.com/schema.json"}
        },
        "definitions": {"Node": {"type": "object", "properties": {
            "name": {"type": "string"},
            "children": {"type": "array", "items": {"$ref": "#/definitions/Node"}}}}},
        "$defs": {"Base": {"type": "object", "properties": {"id": {"type": "string"}}, "required": ["id"]}}
    });
    assert_eq!(
        sanitize_schema(&schema)["properties"],
        json!({
            "root": {"type": "object", "properties": {
                "name": {"type": "string"},
                "children": {"type": "array", "items": {"type": "object"}}}},
            "item": {"type": "object", "description": "merged",
                     "properties": {"id": {"type": "string"}, "extra": {"type": "boolean"}},
                     "required": ["id", "extra"]},
            "dangling": {"description": "kept"},
            "remote": {}
        })
    );
}

#[test]
fn schema_fan_out_is_bounded() {
    // 24 definitions, each referring to the next twice: 2^24 nodes if expanded naively.
    let mut defs = Map::new();
    for i in 0..24 {
        let next = json!({"$ref": format!("#/$defs/D{}", i + 1)});
        defs.insert(format!("D{i}"), json!({"type": "object", "properties": {"a": next, "b": next}}));
    }
    defs.insert("D24".into(), json!({"type": "string"}));
    let schema = json!({"type": "object", "properties": {"root": {"$ref": "#/$defs/D0"}}, "$defs": defs});
    let out = serde_json::to_string(&sanitize_schema(&schema)).unwrap();
    assert!(out.len() < 2_000_000, "{} bytes", out.len());
}

#[test]
fn tools_without_arguments_omit_parameters() {
    let tool = |parameters: Value| ToolSpec {
        name: "now".into(),
        description: "Time.".into(),
        parameters: parameters.into(),
    };
    for parameters in
        [Value::Null, json!({}), json!({"type": "object"}), json!({"type": "object", "properties": {}})]
    {
        let req = ChatRequest { tools: vec![tool(parameters.clone())], ..request(vec![]) };
        assert_eq!(
            build_request(&req)["tools"],
            json!([{"functionDeclarations": [{"name": "now", "description": "Time."}]}]),
            "{parameters}"
        );
    }
    assert!(build_request(&request(vec![])).get("tools").is_none());
}
