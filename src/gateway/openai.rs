//! OpenAI Chat Completions as callers speak it: the request body, the `chat.completion`
//! answer, the `chat.completion.chunk` stream and the `{"error": …}` body.

use serde_json::{Value, json};

use super::ApiError;
use crate::providers::types::{
    ChatMessage, ChatRequest, ChatRole, FinishReason, GenParams, Part, ReasoningEffort, ToolChoice, ToolSpec,
    Usage,
};

/// What a chat completion request asks for, besides the conversation.
#[derive(Debug, Clone, PartialEq)]
pub struct Parsed {
    /// The `model` field as sent.
    pub model: String,
    /// Whether to stream.
    pub stream: bool,
    /// Whether a streamed answer ends with a usage chunk.
    pub include_usage: bool,
    /// The conversation, tools and parameters.
    pub request: ChatRequest,
}

fn text_of(content: &Value, param: &str) -> Result<String, ApiError> {
    match content {
        Value::Null => Ok(String::new()),
        Value::String(s) => Ok(s.clone()),
        Value::Array(parts) => {
            let mut out = String::new();
            for p in parts {
                match p.get("type").and_then(Value::as_str) {
                    Some("text") => out.push_str(p.get("text").and_then(Value::as_str).unwrap_or_default()),
                    _ => return Err(ApiError::invalid("Only text parts are allowed here.", Some(param))),
                }
            }
            Ok(out)
        }
        _ => Err(ApiError::invalid("content must be a string or an array of parts.", Some(param))),
    }
}

/// A `data:` URL's media type and base64 payload; remote URLs are refused (Arbor never fetches
/// on a caller's behalf here).
fn data_url(url: &str, param: &str) -> Result<(String, String), ApiError> {
    let rest = url
        .strip_prefix("data:")
        .ok_or_else(|| ApiError::invalid("Images must be sent inline as data: URLs.", Some(param)))?;
    let (meta, data) =
        rest.split_once(',').ok_or_else(|| ApiError::invalid("The data: URL is malformed.", Some(param)))?;
    let mime = meta
        .strip_suffix(";base64")
        .ok_or_else(|| ApiError::invalid("The data: URL must be base64.", Some(param)))?;
    if !super::image_type_allowed(mime) {
        return Err(ApiError::invalid("Images must be PNG, JPEG, GIF or WebP.", Some(param)));
    }
    Ok((mime.to_string(), data.to_string()))
}

fn user_parts(content: &Value, param: &str) -> Result<Vec<Part>, ApiError> {
    match content {
        Value::String(s) => Ok(vec![Part::Text { text: s.clone() }]),
        Value::Array(parts) => parts
            .iter()
            .enumerate()
            .map(|(i, p)| {
                let at = format!("{param}[{i}]");
                match p.get("type").and_then(Value::as_str) {
                    Some("text") => Ok(Part::Text {
                        text: p.get("text").and_then(Value::as_str).unwrap_or_default().to_string(),
                    }),
                    Some("image_url") => {
                        let url = p
                            .pointer("/image_url/url")
                            .and_then(Value::as_str)
                            .ok_or_else(|| ApiError::invalid("image_url.url is missing.", Some(&at)))?;
                        let (mime, data_base64) = data_url(url, &at)?;
                        Ok(Part::Image { mime, data_base64 })
                    }
                    _ => Err(ApiError::invalid("Unsupported content part type.", Some(&at))),
                }
            })
            .collect(),
        _ => Err(ApiError::invalid("content must be a string or an array of parts.", Some(param))),
    }
}

fn parse_tools(tools: Option<&Value>) -> Result<Vec<ToolSpec>, ApiError> {
    let Some(tools) = tools.filter(|t| !t.is_null()) else { return Ok(Vec::new()) };
    let list = tools.as_array().ok_or_else(|| ApiError::invalid("tools must be an array.", Some("tools")))?;
    super::check_tool_count(list.len())?;
    list.iter()
        .enumerate()
        .map(|(i, t)| {
            let at = format!("tools[{i}]");
            if t.get("type").and_then(Value::as_str) != Some("function") {
                return Err(ApiError::invalid("Only function tools are supported.", Some(&at)));
            }
            let f = t.get("function").ok_or_else(|| ApiError::invalid("function is missing.", Some(&at)))?;
            let name = f
                .get("name")
                .and_then(Value::as_str)
                .filter(|n| !n.is_empty())
                .ok_or_else(|| ApiError::invalid("function.name is missing.", Some(&at)))?;
            Ok(ToolSpec {
                name: name.to_string(),
                description: f.get("description").and_then(Value::as_str).unwrap_or_default().to_string(),
                parameters: f
                    .get("parameters")
                    .cloned()
                    .unwrap_or_else(|| json!({"type": "object", "properties": {}}))
                    .into(),
            })
        })
        .collect()
}

fn number<T: TryFrom<u64>>(body: &Value, field: &str) -> Result<Option<T>, ApiError> {
    match body.get(field) {
        None | Some(Value::Null) => Ok(None),
        Some(v) => v
            .as_u64()
            .and_then(|n| T::try_from(n).ok())
            .map(Some)
            .ok_or_else(|| ApiError::invalid(format!("{field} must be a positive integer."), Some(field))),
    }
}

/// Parses a chat completion request body. Fields that could redirect the call (`base_url`,
/// `api_base`, headers) are not part of the format and are ignored like any unknown field.
pub fn parse_request(body: &Value) -> Result<Parsed, ApiError> {
    let obj = body.as_object().ok_or_else(|| ApiError::invalid("The body must be a JSON object.", None))?;
    let model = obj
        .get("model")
        .and_then(Value::as_str)
        .map(str::trim)
        .filter(|m| !m.is_empty())
        .ok_or_else(|| ApiError::invalid("model is required.", Some("model")))?
        .to_string();
    let messages = obj
        .get("messages")
        .and_then(Value::as_array)
        .ok_or_else(|| ApiError::invalid("messages is required.", Some("messages")))?;
    if messages.is_empty() {
        return Err(ApiError::invalid("messages must not be empty.", Some("messages")));
    }
    if obj.get("n").and_then(Value::as_u64).is_some_and(|n| n != 1) {
        return Err(ApiError::invalid("Only n = 1 is supported.", Some("n")));
    }
    let mut system: Vec<String> = Vec::new();
    let mut out: Vec<ChatMessage> = Vec::new();
    // Tool results name their call by id; the tool's name comes from the assistant's call.
    let mut call_names: std::collections::HashMap<String, String> = std::collections::HashMap::new();
    for (i, m) in messages.iter().enumerate() {
        let at = format!("messages[{i}]");
        let role = m
            .get("role")
            .and_then(Value::as_str)
            .ok_or_else(|| ApiError::invalid("role is missing.", Some(&at)))?;
        let content = m.get("content").unwrap_or(&Value::Null);
        match role {
            "system" | "developer" => system.push(text_of(content, &format!("{at}.content"))?),
            "user" => out.push(ChatMessage {
                role: ChatRole::User,
                parts: user_parts(content, &format!("{at}.content"))?,
            }),
            "assistant" => {
                let mut parts = Vec::new();
                let text = text_of(content, &format!("{at}.content"))?;
                if !text.is_empty() {
                    parts.push(Part::Text { text });
                }
                for (j, call) in
                    m.get("tool_calls").and_then(Value::as_array).into_iter().flatten().enumerate()
                {
                    let cat = format!("{at}.tool_calls[{j}]");
                    let id = call
                        .get("id")
                        .and_then(Value::as_str)
                        .ok_or_else(|| ApiError::invalid("id is missing.", Some(&cat)))?;
                    let name = call
                        .pointer("/function/name")
                        .and_then(Value::as_str)
                        .ok_or_else(|| ApiError::invalid("function.name is missing.", Some(&cat)))?;
                    let raw = call.pointer("/function/arguments").and_then(Value::as_str).unwrap_or("{}");
                    let arguments = if raw.trim().is_empty() {
                        json!({})
                    } else {
                        serde_json::from_str(raw).map_err(|_| {
                            ApiError::invalid("function.arguments is not valid JSON.", Some(&cat))
                        })?
                    };
                    call_names.insert(id.to_string(), name.to_string());
                    parts.push(Part::ToolCall {
                        id: id.to_string(),
                        name: name.to_string(),
                        arguments,
                        signature: None,
                    });
                }
                if parts.is_empty() {
                    parts.push(Part::Text { text: String::new() });
                }
                out.push(ChatMessage { role: ChatRole::Assistant, parts });
            }
            "tool" => {
                let call_id = m
                    .get("tool_call_id")
                    .and_then(Value::as_str)
                    .ok_or_else(|| ApiError::invalid("tool_call_id is missing.", Some(&at)))?;
                let name = call_names.get(call_id).cloned().ok_or_else(|| {
                    ApiError::invalid(
                        "tool_call_id names no earlier tool call.",
                        Some(&format!("{at}.tool_call_id")),
                    )
                })?;
                let content = text_of(content, &format!("{at}.content"))?;
                out.push(ChatMessage {
                    role: ChatRole::Tool,
                    parts: vec![Part::ToolResult {
                        call_id: call_id.to_string(),
                        name,
                        content,
                        is_error: false,
                    }],
                });
            }
            other => {
                return Err(ApiError::invalid(
                    format!("Unknown role \"{other}\"."),
                    Some(&format!("{at}.role")),
                ));
            }
        }
    }
    if out.is_empty() {
        return Err(ApiError::invalid("messages needs at least one user message.", Some("messages")));
    }
    let temperature = super::temperature_field(obj.get("temperature"), 2.0, "temperature")?;
    let max_output_tokens = match number::<u32>(body, "max_completion_tokens")? {
        Some(n) => Some(n),
        None => number::<u32>(body, "max_tokens")?,
    };
    let reasoning_effort = match obj.get("reasoning_effort").and_then(Value::as_str) {
        None => None,
        Some("low" | "minimal") => Some(ReasoningEffort::Low),
        Some("medium") => Some(ReasoningEffort::Medium),
        Some("high") => Some(ReasoningEffort::High),
        Some(_) => {
            return Err(ApiError::invalid(
                "reasoning_effort must be low, medium or high.",
                Some("reasoning_effort"),
            ));
        }
    };
    let tool_choice = parse_tool_choice(obj.get("tool_choice"))?;
    let stream = obj.get("stream").and_then(Value::as_bool).unwrap_or(false);
    let include_usage =
        body.pointer("/stream_options/include_usage").and_then(Value::as_bool).unwrap_or(false);
    Ok(Parsed {
        model,
        stream,
        include_usage,
        request: ChatRequest {
            model: String::new(),
            system: (!system.is_empty()).then(|| system.join("\n\n")),
            messages: out,
            tools: parse_tools(obj.get("tools"))?,
            params: GenParams {
                temperature,
                max_output_tokens,
                reasoning_effort,
                thinking_budget: None,
                tool_choice,
            },
            passthrough: None,
        },
    })
}

/// `tool_choice`: `"auto"`, `"none"`, `"required"`, or `{"type": "function", "function":
/// {"name": …}}` (Chat Completions) / `{"type": "function", "name": …}` (Responses).
pub fn parse_tool_choice(v: Option<&Value>) -> Result<Option<ToolChoice>, ApiError> {
    let bad =
        || ApiError::invalid("tool_choice must be auto, none, required or a function.", Some("tool_choice"));
    Ok(match v {
        None | Some(Value::Null) => None,
        Some(Value::String(s)) => Some(match s.as_str() {
            "auto" => ToolChoice::Auto,
            "none" => ToolChoice::None,
            "required" => ToolChoice::Required,
            _ => return Err(bad()),
        }),
        Some(Value::Object(o)) => {
            let name = o
                .get("function")
                .and_then(|f| f.get("name"))
                .or_else(|| o.get("name"))
                .and_then(Value::as_str)
                .filter(|n| !n.is_empty());
            match (o.get("type").and_then(Value::as_str), name) {
                (Some("function"), Some(name)) => Some(ToolChoice::Tool(name.to_string())),
                // Built-in tool choices (`file_search`, `allowed_tools`, …) leave the choice to the model.
                (Some(_), _) => Some(ToolChoice::Auto),
                _ => return Err(bad()),
            }
        }
        Some(_) => return Err(bad()),
    })
}

/// The `finish_reason` spelling.
pub fn finish_reason(f: &FinishReason) -> &'static str {
    match f {
        FinishReason::Stop | FinishReason::Other(_) => "stop",
        FinishReason::Length => "length",
        FinishReason::ToolCalls => "tool_calls",
        FinishReason::ContentFilter => "content_filter",
    }
}

/// The `usage` object.
pub fn usage_json(u: &Usage) -> Value {
    json!({
        "prompt_tokens": u.input_tokens,
        "completion_tokens": u.output_tokens,
        "total_tokens": u.input_tokens + u.output_tokens,
        "prompt_tokens_details": { "cached_tokens": u.cached_input_tokens },
    })
}

/// A tool call as the format writes it.
pub fn tool_call_json(index: usize, id: &str, name: &str, arguments: &Value) -> Value {
    json!({
        "index": index,
        "id": id,
        "type": "function",
        "function": { "name": name, "arguments": arguments.to_string() },
    })
}

/// What an answer produced, gathered for a whole (non-streamed) response.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Answer {
    /// The text.
    pub text: String,
    /// Reasoning text, when the provider shows it.
    pub reasoning: String,
    /// Tool calls: id, name, arguments.
    pub tool_calls: Vec<(String, String, Value)>,
    /// Why it ended.
    pub finish: Option<FinishReason>,
    /// Token counts.
    pub usage: Usage,
}

/// The `chat.completion` body.
pub fn completion(id: &str, created: i64, model: &str, a: &Answer) -> Value {
    let mut message = json!({
        "role": "assistant",
        "content": if a.text.is_empty() && !a.tool_calls.is_empty() { Value::Null } else { Value::String(a.text.clone()) },
        "refusal": Value::Null,
    });
    if !a.reasoning.is_empty() {
        message["reasoning_content"] = Value::String(a.reasoning.clone());
    }
    if !a.tool_calls.is_empty() {
        message["tool_calls"] = a
            .tool_calls
            .iter()
            .enumerate()
            .map(|(i, (id, name, args))| {
                let mut call = tool_call_json(i, id, name, args);
                if let Some(o) = call.as_object_mut() {
                    o.remove("index");
                }
                call
            })
            .collect();
    }
    let finish = match (&a.finish, a.tool_calls.is_empty()) {
        (Some(f), _) => finish_reason(f),
        (None, false) => "tool_calls",
        (None, true) => "stop",
    };
    json!({
        "id": id,
        "object": "chat.completion",
        "created": created,
        "model": model,
        "choices": [{ "index": 0, "message": message, "logprobs": Value::Null, "finish_reason": finish }],
        "usage": usage_json(&a.usage),
    })
}

/// One `chat.completion.chunk` with this delta (and finish reason).
pub fn chunk(id: &str, created: i64, model: &str, delta: Value, finish: Option<&str>) -> Value {
    json!({
        "id": id,
        "object": "chat.completion.chunk",
        "created": created,
        "model": model,
        "choices": [{ "index": 0, "delta": delta, "logprobs": Value::Null, "finish_reason": finish }],
    })
}

/// The text chunks of one streamed answer, written without building a JSON object each time:
/// the parts every chunk shares are made once, and each delta is its escaped text between
/// them. Each line is the same object [`chunk`] makes with `{"content": text}` (or
/// `reasoning_content`) as the delta.
pub struct TextChunks {
    /// `data: {"id":…,"model":…,"choices":[{"index":0,"delta":{`
    head: String,
}

/// What follows a text chunk's delta.
const TEXT_CHUNK_TAIL: &str = "},\"logprobs\":null,\"finish_reason\":null}]}\n\n";

impl TextChunks {
    /// The shared parts for the answer `id` by `model`, made at `created`.
    pub fn new(id: &str, created: i64, model: &str) -> TextChunks {
        let head = format!(
            "data: {{\"id\":{},\"object\":\"chat.completion.chunk\",\"created\":{created},\"model\":{},\"choices\":[{{\"index\":0,\"delta\":{{",
            Value::from(id),
            Value::from(model)
        );
        TextChunks { head }
    }

    /// The SSE line of one delta: `field` (`content` or `reasoning_content`) set to `text`.
    pub fn line(&self, field: &str, text: &str) -> String {
        let mut out = Vec::with_capacity(self.head.len() + field.len() + text.len() + 64);
        out.extend_from_slice(self.head.as_bytes());
        out.push(b'"');
        out.extend_from_slice(field.as_bytes());
        out.extend_from_slice(b"\":");
        // Writing a string into a Vec cannot fail.
        let _ = serde_json::to_writer(&mut out, text);
        out.extend_from_slice(TEXT_CHUNK_TAIL.as_bytes());
        String::from_utf8(out).unwrap_or_else(|e| String::from_utf8_lossy(e.as_bytes()).into_owned())
    }
}

/// The closing usage chunk (`stream_options.include_usage`).
pub fn usage_chunk(id: &str, created: i64, model: &str, u: &Usage) -> Value {
    json!({
        "id": id,
        "object": "chat.completion.chunk",
        "created": created,
        "model": model,
        "choices": [],
        "usage": usage_json(u),
    })
}

/// The `type` an OpenAI error body carries for a status.
fn error_type(e: &ApiError) -> &'static str {
    match e.status {
        401 => "authentication_error",
        403 => "permission_error",
        404 => "not_found_error",
        429 => "rate_limit_error",
        s if s >= 500 => "server_error",
        _ => "invalid_request_error",
    }
}

/// The `{"error": …}` body.
pub fn error_body(e: &ApiError) -> Value {
    json!({ "error": { "message": e.message, "type": error_type(e), "param": e.param, "code": e.kind } })
}

/// One SSE `data:` line.
pub fn sse(value: &Value) -> String {
    format!("data: {value}\n\n")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_text_chunk_line_is_the_chunk_object() {
        let chunks = TextChunks::new("chatcmpl-1\"x", 17, "mock/m\u{e9}");
        for text in ["Hi", "", "a \"quote\", a \\ and\n\t\u{1} \u{2028} \u{1F600}"] {
            for field in ["content", "reasoning_content"] {
                let line = chunks.line(field, text);
                let data = line.strip_prefix("data: ").and_then(|l| l.strip_suffix("\n\n")).unwrap();
                let parsed: Value = serde_json::from_str(data).unwrap();
                assert_eq!(parsed, chunk("chatcmpl-1\"x", 17, "mock/m\u{e9}", json!({ field: text }), None));
            }
        }
    }

    #[test]
    fn a_full_request_parses_into_the_neutral_form() {
        let body = json!({
            "model": "fast",
            "stream": true,
            "stream_options": { "include_usage": true },
            "temperature": 0.5,
            "max_tokens": 100,
            "base_url": "http://169.254.169.254/",
            "messages": [
                { "role": "system", "content": "Be brief." },
                { "role": "user", "content": [
                    { "type": "text", "text": "What is this?" },
                    { "type": "image_url", "image_url": { "url": "data:image/png;base64,iVBORw0KGgo=" } }
                ]},
                { "role": "assistant", "content": null, "tool_calls": [
                    { "id": "call_1", "type": "function", "function": { "name": "lookup", "arguments": "{\"q\":\"x\"}" } }
                ]},
                { "role": "tool", "tool_call_id": "call_1", "content": "found" }
            ],
            "tools": [{ "type": "function", "function": { "name": "lookup", "parameters": { "type": "object" } } }]
        });
        let p = parse_request(&body).expect("parses");
        assert_eq!((p.model.as_str(), p.stream, p.include_usage), ("fast", true, true));
        assert_eq!(p.request.system.as_deref(), Some("Be brief."));
        assert_eq!(p.request.messages.len(), 3);
        assert!(matches!(&p.request.messages[0].parts[1], Part::Image { mime, .. } if mime == "image/png"));
        assert!(matches!(&p.request.messages[1].parts[0], Part::ToolCall { name, .. } if name == "lookup"));
        assert!(
            matches!(&p.request.messages[2].parts[0], Part::ToolResult { name, content, .. } if name == "lookup" && content == "found")
        );
        assert_eq!(p.request.tools[0].name, "lookup");
        assert_eq!(p.request.params.max_output_tokens, Some(100));
    }

    #[test]
    fn bad_requests_name_the_field() {
        let cases = [
            (json!([]), None),
            (json!({ "messages": [{ "role": "user", "content": "hi" }] }), Some("model")),
            (json!({ "model": "m" }), Some("messages")),
            (json!({ "model": "m", "messages": [] }), Some("messages")),
            (
                json!({ "model": "m", "messages": [{ "role": "wizard", "content": "hi" }] }),
                Some("messages[0].role"),
            ),
            (
                json!({ "model": "m", "messages": [{ "role": "tool", "tool_call_id": "nope", "content": "x" }] }),
                Some("messages[0].tool_call_id"),
            ),
            (
                json!({ "model": "m", "messages": [{ "role": "user", "content": [{ "type": "image_url", "image_url": { "url": "http://127.0.0.1/x.png" } }] }] }),
                Some("messages[0].content[0]"),
            ),
            (
                json!({ "model": "m", "temperature": 9, "messages": [{ "role": "user", "content": "hi" }] }),
                Some("temperature"),
            ),
            (
                json!({ "model": "m", "max_tokens": -1, "messages": [{ "role": "user", "content": "hi" }] }),
                Some("max_tokens"),
            ),
            (json!({ "model": "m", "n": 2, "messages": [{ "role": "user", "content": "hi" }] }), Some("n")),
        ];
        for (body, param) in cases {
            let e = parse_request(&body).expect_err("refused");
            assert_eq!(e.status, 400);
            assert_eq!(e.param.as_deref(), param, "{body}");
        }
    }

    #[test]
    fn answers_and_chunks_have_the_documented_shape() {
        let a = Answer {
            text: String::new(),
            reasoning: String::new(),
            tool_calls: vec![("call_1".into(), "lookup".into(), json!({ "q": "x" }))],
            finish: Some(FinishReason::ToolCalls),
            usage: Usage {
                input_tokens: 3,
                output_tokens: 4,
                cached_input_tokens: 0,
                cache_written_input_tokens: 0,
            },
        };
        let c = completion("chatcmpl-1", 1, "openai/gpt-4o-mini", &a);
        assert_eq!(c["choices"][0]["finish_reason"], "tool_calls");
        assert_eq!(c["choices"][0]["message"]["content"], Value::Null);
        assert_eq!(c["choices"][0]["message"]["tool_calls"][0]["function"]["arguments"], "{\"q\":\"x\"}");
        assert_eq!(c["usage"]["total_tokens"], 7);
        let k = chunk("chatcmpl-1", 1, "m", json!({ "content": "hi" }), None);
        assert_eq!(k["object"], "chat.completion.chunk");
        assert!(sse(&k).starts_with("data: {") && sse(&k).ends_with("}\n\n"));
        let e = error_body(&ApiError::new(429, "rate_limit", "slow down"));
        assert_eq!(e["error"]["type"], "rate_limit_error");
    }
}
