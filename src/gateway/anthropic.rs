//! Anthropic Messages as callers speak it: the request body, the `message` answer, the
//! `message_start … message_stop` event stream and the `{"type": "error", …}` body.

use serde_json::{Value, json};

use super::ApiError;
use crate::providers::types::{
    ChatMessage, ChatRequest, ChatRole, FinishReason, GenParams, Part, ProviderEvent, ToolSpec, Usage,
};

/// What a messages request asks for, besides the conversation.
#[derive(Debug, Clone, PartialEq)]
pub struct Parsed {
    /// The `model` field as sent.
    pub model: String,
    /// Whether to stream.
    pub stream: bool,
    /// The conversation, tools and parameters.
    pub request: ChatRequest,
}

fn text_blocks(v: &Value, param: &str) -> Result<String, ApiError> {
    match v {
        Value::Null => Ok(String::new()),
        Value::String(s) => Ok(s.clone()),
        Value::Array(blocks) => {
            let mut out = Vec::new();
            for b in blocks {
                if b.get("type").and_then(Value::as_str) != Some("text") {
                    return Err(ApiError::invalid("Only text blocks are allowed here.", Some(param)));
                }
                out.push(b.get("text").and_then(Value::as_str).unwrap_or_default().to_string());
            }
            Ok(out.join("\n\n"))
        }
        _ => Err(ApiError::invalid("Expected a string or an array of text blocks.", Some(param))),
    }
}

fn image(b: &Value, at: &str) -> Result<Part, ApiError> {
    let source = b.get("source").ok_or_else(|| ApiError::invalid("source is missing.", Some(at)))?;
    if source.get("type").and_then(Value::as_str) != Some("base64") {
        return Err(ApiError::invalid("Images must be sent inline (source.type \"base64\").", Some(at)));
    }
    let mime = source.get("media_type").and_then(Value::as_str).unwrap_or_default();
    if !super::image_type_allowed(mime) {
        return Err(ApiError::invalid("Images must be PNG, JPEG, GIF or WebP.", Some(at)));
    }
    let data = source
        .get("data")
        .and_then(Value::as_str)
        .ok_or_else(|| ApiError::invalid("source.data is missing.", Some(at)))?;
    Ok(Part::Image { mime: mime.to_string(), data_base64: data.to_string() })
}

/// Parses a messages request body. Unknown fields (including any that name a URL or key) are
/// ignored; nothing in the body chooses where the call goes except `model`.
pub fn parse_request(body: &Value) -> Result<Parsed, ApiError> {
    let obj = body.as_object().ok_or_else(|| ApiError::invalid("The body must be a JSON object.", None))?;
    let model = obj
        .get("model")
        .and_then(Value::as_str)
        .map(str::trim)
        .filter(|m| !m.is_empty())
        .ok_or_else(|| ApiError::invalid("model: Field required", Some("model")))?
        .to_string();
    let max_tokens = obj
        .get("max_tokens")
        .and_then(Value::as_u64)
        .and_then(|n| u32::try_from(n).ok())
        .filter(|n| *n > 0)
        .ok_or_else(|| ApiError::invalid("max_tokens: a positive integer is required", Some("max_tokens")))?;
    let messages =
        obj.get("messages").and_then(Value::as_array).filter(|m| !m.is_empty()).ok_or_else(|| {
            ApiError::invalid("messages: at least one message is required", Some("messages"))
        })?;
    let mut names: std::collections::HashMap<String, String> = std::collections::HashMap::new();
    let mut out = Vec::new();
    for (i, m) in messages.iter().enumerate() {
        let at = format!("messages.{i}");
        let role = m
            .get("role")
            .and_then(Value::as_str)
            .ok_or_else(|| ApiError::invalid("role is missing.", Some(&at)))?;
        let blocks: Vec<Value> = match m.get("content") {
            Some(Value::String(s)) => vec![json!({ "type": "text", "text": s })],
            Some(Value::Array(a)) => a.clone(),
            _ => return Err(ApiError::invalid("content must be a string or an array of blocks.", Some(&at))),
        };
        match role {
            "user" => {
                let (mut results, mut parts) = (Vec::new(), Vec::new());
                for (j, b) in blocks.iter().enumerate() {
                    let bat = format!("{at}.content.{j}");
                    match b.get("type").and_then(Value::as_str) {
                        Some("text") => parts.push(Part::Text {
                            text: b.get("text").and_then(Value::as_str).unwrap_or_default().to_string(),
                        }),
                        Some("image") => parts.push(image(b, &bat)?),
                        Some("tool_result") => {
                            let call_id = b
                                .get("tool_use_id")
                                .and_then(Value::as_str)
                                .ok_or_else(|| ApiError::invalid("tool_use_id is missing.", Some(&bat)))?;
                            let name = names.get(call_id).cloned().ok_or_else(|| {
                                ApiError::invalid("tool_use_id names no earlier tool_use block.", Some(&bat))
                            })?;
                            let content = text_blocks(b.get("content").unwrap_or(&Value::Null), &bat)?;
                            let is_error = b.get("is_error").and_then(Value::as_bool).unwrap_or(false);
                            results.push(Part::ToolResult {
                                call_id: call_id.to_string(),
                                name,
                                content,
                                is_error,
                            });
                        }
                        _ => return Err(ApiError::invalid("Unsupported content block type.", Some(&bat))),
                    }
                }
                if !results.is_empty() {
                    out.push(ChatMessage { role: ChatRole::Tool, parts: results });
                }
                if !parts.is_empty() {
                    out.push(ChatMessage { role: ChatRole::User, parts });
                }
            }
            "assistant" => {
                let mut parts = Vec::new();
                for (j, b) in blocks.iter().enumerate() {
                    let bat = format!("{at}.content.{j}");
                    match b.get("type").and_then(Value::as_str) {
                        Some("text") => parts.push(Part::Text {
                            text: b.get("text").and_then(Value::as_str).unwrap_or_default().to_string(),
                        }),
                        Some("tool_use") => {
                            let id = b
                                .get("id")
                                .and_then(Value::as_str)
                                .ok_or_else(|| ApiError::invalid("id is missing.", Some(&bat)))?;
                            let name = b
                                .get("name")
                                .and_then(Value::as_str)
                                .ok_or_else(|| ApiError::invalid("name is missing.", Some(&bat)))?;
                            names.insert(id.to_string(), name.to_string());
                            parts.push(Part::ToolCall {
                                id: id.to_string(),
                                name: name.to_string(),
                                arguments: b.get("input").cloned().unwrap_or_else(|| json!({})),
                                signature: None,
                            });
                        }
                        Some("thinking") => parts.push(Part::Thought {
                            text: b.get("thinking").and_then(Value::as_str).unwrap_or_default().to_string(),
                            signature: b.get("signature").and_then(Value::as_str).map(str::to_string),
                            redacted: None,
                        }),
                        Some("redacted_thinking") => parts.push(Part::Thought {
                            text: String::new(),
                            signature: None,
                            redacted: b.get("data").and_then(Value::as_str).map(str::to_string),
                        }),
                        _ => return Err(ApiError::invalid("Unsupported content block type.", Some(&bat))),
                    }
                }
                out.push(ChatMessage { role: ChatRole::Assistant, parts });
            }
            other => {
                return Err(ApiError::invalid(
                    format!("Unknown role \"{other}\"."),
                    Some(&format!("{at}.role")),
                ));
            }
        }
    }
    let tools = match obj.get("tools") {
        None | Some(Value::Null) => Vec::new(),
        Some(Value::Array(list)) => list
            .iter()
            .enumerate()
            .map(|(i, t)| {
                let name = t
                    .get("name")
                    .and_then(Value::as_str)
                    .filter(|n| !n.is_empty())
                    .ok_or_else(|| ApiError::invalid("name is missing.", Some(&format!("tools.{i}"))))?;
                Ok(ToolSpec {
                    name: name.to_string(),
                    description: t.get("description").and_then(Value::as_str).unwrap_or_default().to_string(),
                    parameters: t.get("input_schema").cloned().unwrap_or_else(|| json!({ "type": "object" })),
                })
            })
            .collect::<Result<Vec<_>, ApiError>>()?,
        Some(_) => return Err(ApiError::invalid("tools must be an array.", Some("tools"))),
    };
    let temperature =
        match obj.get("temperature") {
            None | Some(Value::Null) => None,
            Some(v) => Some(v.as_f64().filter(|t| (0.0..=1.0).contains(t)).ok_or_else(|| {
                ApiError::invalid("temperature must be between 0 and 1.", Some("temperature"))
            })? as f32),
        };
    let thinking_budget = match obj.get("thinking") {
        Some(t) if t.get("type").and_then(Value::as_str) == Some("enabled") => {
            t.get("budget_tokens").and_then(Value::as_u64).and_then(|n| u32::try_from(n).ok())
        }
        _ => None,
    };
    Ok(Parsed {
        model,
        stream: obj.get("stream").and_then(Value::as_bool).unwrap_or(false),
        request: ChatRequest {
            model: String::new(),
            system: obj
                .get("system")
                .map(|s| text_blocks(s, "system"))
                .transpose()?
                .filter(|s| !s.is_empty()),
            messages: out,
            tools,
            params: GenParams {
                temperature,
                max_output_tokens: Some(max_tokens),
                reasoning_effort: None,
                thinking_budget,
            },
        },
    })
}

/// The `stop_reason` spelling.
pub fn stop_reason(f: Option<&FinishReason>, had_tools: bool) -> &'static str {
    match f {
        Some(FinishReason::Length) => "max_tokens",
        Some(FinishReason::ToolCalls) => "tool_use",
        Some(FinishReason::ContentFilter) => "refusal",
        Some(_) => "end_turn",
        None if had_tools => "tool_use",
        None => "end_turn",
    }
}

fn usage_json(u: &Usage) -> Value {
    json!({
        "input_tokens": u.input_tokens.saturating_sub(u.cached_input_tokens),
        "cache_read_input_tokens": u.cached_input_tokens,
        "cache_creation_input_tokens": 0,
        "output_tokens": u.output_tokens,
    })
}

/// One content block of an answer.
#[derive(Debug, Clone, PartialEq)]
enum Block {
    Text(String),
    Thinking(String, String),
    ToolUse(String, String, Value),
}

/// Builds the `message` body (whole) or the event stream (streamed) from provider events.
#[derive(Debug, Clone, Default)]
pub struct Writer {
    blocks: Vec<Block>,
    open: bool,
    /// Token counts the provider reported.
    pub usage: Option<Usage>,
    finish: Option<FinishReason>,
    /// Characters of text and tool input produced.
    pub produced: usize,
}

fn event(name: &str, data: &Value) -> String {
    format!("event: {name}\ndata: {data}\n\n")
}

impl Writer {
    /// The opening `message_start` event.
    pub fn start(id: &str, model: &str, input_estimate: u64) -> String {
        event(
            "message_start",
            &json!({ "type": "message_start", "message": {
                "id": id, "type": "message", "role": "assistant", "model": model, "content": [],
                "stop_reason": Value::Null, "stop_sequence": Value::Null,
                "usage": { "input_tokens": input_estimate, "output_tokens": 0 }
            }}),
        )
    }

    fn close(&mut self, out: &mut String) {
        if self.open {
            let index = self.blocks.len() - 1;
            out.push_str(&event(
                "content_block_stop",
                &json!({ "type": "content_block_stop", "index": index }),
            ));
            self.open = false;
        }
    }

    fn begin(&mut self, block: Block, start: Value, out: &mut String) -> usize {
        self.close(out);
        self.blocks.push(block);
        let index = self.blocks.len() - 1;
        out.push_str(&event(
            "content_block_start",
            &json!({ "type": "content_block_start", "index": index, "content_block": start }),
        ));
        self.open = true;
        index
    }

    /// Takes one provider event; returns the stream events it makes (possibly none).
    pub fn push(&mut self, ev: ProviderEvent) -> String {
        let mut out = String::new();
        match ev {
            ProviderEvent::TextDelta(t) => {
                self.produced += t.len();
                let index = match self.blocks.last_mut() {
                    Some(Block::Text(s)) if self.open => {
                        s.push_str(&t);
                        self.blocks.len() - 1
                    }
                    _ => self.begin(Block::Text(t.clone()), json!({ "type": "text", "text": "" }), &mut out),
                };
                let delta = json!({ "type": "content_block_delta", "index": index, "delta": { "type": "text_delta", "text": t } });
                out.push_str(&event("content_block_delta", &delta));
            }
            ProviderEvent::ThoughtDelta(t) => {
                let index = match self.blocks.last_mut() {
                    Some(Block::Thinking(s, _)) if self.open => {
                        s.push_str(&t);
                        self.blocks.len() - 1
                    }
                    _ => self.begin(
                        Block::Thinking(t.clone(), String::new()),
                        json!({ "type": "thinking", "thinking": "" }),
                        &mut out,
                    ),
                };
                let delta = json!({ "type": "content_block_delta", "index": index, "delta": { "type": "thinking_delta", "thinking": t } });
                out.push_str(&event("content_block_delta", &delta));
            }
            ProviderEvent::ThoughtSignature(sig) => {
                if let (Some(Block::Thinking(_, s)), true) = (self.blocks.last_mut(), self.open) {
                    s.push_str(&sig);
                    let index = self.blocks.len() - 1;
                    let delta = json!({ "type": "content_block_delta", "index": index, "delta": { "type": "signature_delta", "signature": sig } });
                    out.push_str(&event("content_block_delta", &delta));
                }
            }
            ProviderEvent::ToolCall { id, name, arguments, .. } => {
                let raw = arguments.to_string();
                self.produced += raw.len();
                let start = json!({ "type": "tool_use", "id": id, "name": name, "input": {} });
                let index = self.begin(Block::ToolUse(id, name, arguments), start, &mut out);
                let delta = json!({ "type": "content_block_delta", "index": index, "delta": { "type": "input_json_delta", "partial_json": raw } });
                out.push_str(&event("content_block_delta", &delta));
                self.close(&mut out);
            }
            ProviderEvent::Usage(u) => self.usage = Some(u),
            ProviderEvent::Finish(f) => self.finish = Some(f),
            ProviderEvent::Error(_) | ProviderEvent::RedactedThought(_) => {}
        }
        out
    }

    fn had_tools(&self) -> bool {
        self.blocks.iter().any(|b| matches!(b, Block::ToolUse(..)))
    }

    /// The closing events: the last block's stop, `message_delta` and `message_stop`.
    pub fn finish(&mut self) -> String {
        let mut out = String::new();
        self.close(&mut out);
        let u = self.usage.unwrap_or_default();
        let delta = json!({
            "type": "message_delta",
            "delta": { "stop_reason": stop_reason(self.finish.as_ref(), self.had_tools()), "stop_sequence": Value::Null },
            "usage": usage_json(&u),
        });
        out.push_str(&event("message_delta", &delta));
        out.push_str(&event("message_stop", &json!({ "type": "message_stop" })));
        out
    }

    /// The whole `message` body.
    pub fn message(&self, id: &str, model: &str) -> Value {
        let content: Vec<Value> = self
            .blocks
            .iter()
            .map(|b| match b {
                Block::Text(t) => json!({ "type": "text", "text": t }),
                Block::Thinking(t, s) => json!({ "type": "thinking", "thinking": t, "signature": s }),
                Block::ToolUse(id, name, input) => {
                    json!({ "type": "tool_use", "id": id, "name": name, "input": input })
                }
            })
            .collect();
        json!({
            "id": id,
            "type": "message",
            "role": "assistant",
            "model": model,
            "content": content,
            "stop_reason": stop_reason(self.finish.as_ref(), self.had_tools()),
            "stop_sequence": Value::Null,
            "usage": usage_json(&self.usage.unwrap_or_default()),
        })
    }
}

/// The `type` an Anthropic error carries for a status.
fn error_type(e: &ApiError) -> &'static str {
    match e.status {
        401 => "authentication_error",
        403 => "permission_error",
        404 => "not_found_error",
        413 => "request_too_large",
        429 => "rate_limit_error",
        503 | 529 => "overloaded_error",
        s if s >= 500 => "api_error",
        _ => "invalid_request_error",
    }
}

/// The `{"type": "error", …}` body.
pub fn error_body(e: &ApiError) -> Value {
    json!({ "type": "error", "error": { "type": error_type(e), "message": e.message } })
}

/// The `error` event of a stream that failed after it began.
pub fn error_event(e: &ApiError) -> String {
    event("error", &error_body(e))
}

#[cfg(test)]
mod tests {
    use super::*;

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
        assert!(
            matches!(&p.request.messages[2].parts[0], Part::ToolResult { name, .. } if name == "weather")
        );
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
                json!({ "model": "m", "max_tokens": 5, "messages": [{ "role": "system", "content": "x" }] }),
                "messages.0.role",
            ),
            (json!({ "model": "m", "max_tokens": 5, "temperature": 3, "messages": ok }), "temperature"),
            (
                json!({ "model": "m", "max_tokens": 5, "messages": [{ "role": "user", "content": [{ "type": "image", "source": { "type": "url", "url": "http://127.0.0.1/" } }] }] }),
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
        w.push(ProviderEvent::Usage(Usage { input_tokens: 5, output_tokens: 7, cached_input_tokens: 0 }));
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
        assert_eq!(
            error_body(&ApiError::new(529, "overloaded", "busy"))["error"]["type"],
            "overloaded_error"
        );
    }
}
