//! The OpenAI Chat Completions wire format (`POST {base}/chat/completions`), also spoken by
//! Ollama, vLLM, the llama.cpp server, OpenRouter, Groq and DeepSeek.
//!
//! Pure functions and a stream decoder, no I/O: [`build_request`] makes the JSON body,
//! [`StreamDecoder`] turns the SSE events of a streamed answer into [`ProviderEvent`]s,
//! [`parse_response`] does the same for a non-streamed one, [`parse_error`] classifies an HTTP
//! error and [`parse_models`] reads `GET {base}/models`.
//!
//! References: <https://platform.openai.com/docs/api-reference/chat/create>,
//! <https://platform.openai.com/docs/api-reference/chat/streaming>,
//! <https://platform.openai.com/docs/guides/function-calling> (streaming),
//! <https://platform.openai.com/docs/guides/error-codes>,
//! <https://api-docs.deepseek.com/guides/reasoning_model> (`reasoning_content`).

use std::collections::BTreeMap;

use chrono::{DateTime, Utc};
use serde_json::{Map, Value, json};

use super::sse::SseEvent;
use super::types::*;

/// How many characters of a non-JSON error body are kept in the message.
const ERROR_BODY_CHARS: usize = 500;

/// The chat completions URL under an API base URL such as `https://api.openai.com/v1`.
///
/// Trailing slashes are dropped; a base that already ends in `/chat/completions` is kept as is.
pub fn endpoint(base_url: &str) -> String {
    let base = base_url.trim().trim_end_matches('/');
    if base.ends_with("/chat/completions") { base.to_owned() } else { format!("{base}/chat/completions") }
}

/// The model listing URL (`GET /models`) under an API base URL.
pub fn models_endpoint(base_url: &str) -> String {
    let base = base_url.trim().trim_end_matches('/');
    let base = base.strip_suffix("/chat/completions").unwrap_or(base);
    format!("{base}/models")
}

/// The JSON body of a chat completions request.
///
/// - The system prompt (when non-empty) is the first message, role `system` (OpenAI maps it to
///   `developer` for its reasoning models by itself; the other servers only know `system`).
/// - User text is a plain string (parts joined with `\n`), which every compatible server accepts;
///   only a message with images uses the array form, images as `data:` URLs in `image_url` parts.
/// - Tool results become one `role: "tool"` message each, placed before the rest of their
///   message's content, since they must directly follow the assistant's `tool_calls`. The format
///   has no error flag: `is_error` is not sent, the content is expected to say what failed.
/// - Assistant text and tool calls (arguments as a JSON string, a [`Value::String`] sent verbatim:
///   that is how malformed arguments are kept, see [`StreamDecoder`]); `content` is `null` when
///   there are only tool calls. Thoughts are not sent back: the format has no input for them
///   (DeepSeek even rejects `reasoning_content` in input messages). An assistant message left
///   with neither text nor tool calls is omitted, as are images in assistant messages.
/// - `tools` only when there are some; `temperature`, `reasoning_effort` when set.
/// - The output limit is `max_completion_tokens`, not `max_tokens`: OpenAI deprecated
///   `max_tokens` and its reasoning models (o-series, GPT-5) reject it, while
///   `max_completion_tokens` bounds visible and reasoning tokens together. vLLM, Ollama and
///   OpenRouter accept it too; a server that only knows `max_tokens` ignores it (no limit).
/// - `thinking_budget` has no Chat Completions equivalent and is not sent.
/// - When streaming, `stream_options.include_usage` asks for the final usage chunk.
pub fn build_request(req: &ChatRequest, stream: bool) -> Value {
    let mut body = Map::new();
    body.insert("model".into(), Value::String(req.model.clone()));
    body.insert("messages".into(), Value::Array(build_messages(req)));
    if !req.tools.is_empty() {
        let tools = req
            .tools
            .iter()
            .map(|tool| {
                json!({
                    "type": "function",
                    "function": {
                        "name": tool.name,
                        "description": tool.description,
                        "parameters": tool.parameters,
                    }
                })
            })
            .collect();
        body.insert("tools".into(), Value::Array(tools));
    }
    if let Some(temperature) = req.params.temperature.and_then(f32_to_json) {
        body.insert("temperature".into(), temperature);
    }
    if let Some(max) = req.params.max_output_tokens {
        body.insert("max_completion_tokens".into(), Value::from(max));
    }
    if let Some(effort) = req.params.reasoning_effort {
        let effort = match effort {
            ReasoningEffort::Low => "low",
            ReasoningEffort::Medium => "medium",
            ReasoningEffort::High => "high",
        };
        body.insert("reasoning_effort".into(), Value::from(effort));
    }
    body.insert("stream".into(), Value::Bool(stream));
    if stream {
        body.insert("stream_options".into(), json!({ "include_usage": true }));
    }
    Value::Object(body)
}

/// The `messages` array: system prompt, then the conversation.
fn build_messages(req: &ChatRequest) -> Vec<Value> {
    let mut out = Vec::new();
    if let Some(system) = req.system.as_deref().filter(|s| !s.is_empty()) {
        out.push(json!({ "role": "system", "content": system }));
    }
    for message in &req.messages {
        match message.role {
            ChatRole::Assistant => out.extend(assistant_message(&message.parts)),
            ChatRole::User | ChatRole::Tool => {
                for part in &message.parts {
                    if let Part::ToolResult { call_id, content, .. } = part {
                        out.push(json!({ "role": "tool", "tool_call_id": call_id, "content": content }));
                    }
                }
                if let Some(content) = user_content(&message.parts) {
                    out.push(json!({ "role": "user", "content": content }));
                }
            }
        }
    }
    out
}

/// The `content` of a user message (text and images), `None` when there is neither.
fn user_content(parts: &[Part]) -> Option<Value> {
    let has_image = parts.iter().any(|p| matches!(p, Part::Image { .. } | Part::Document { .. }));
    if !has_image {
        let texts: Vec<&str> = parts
            .iter()
            .filter_map(|p| match p {
                Part::Text { text } => Some(text.as_str()),
                _ => None,
            })
            .collect();
        return (!texts.is_empty()).then(|| Value::String(texts.join("\n")));
    }
    let content = parts
        .iter()
        .filter_map(|p| match p {
            Part::Text { text } => Some(json!({ "type": "text", "text": text })),
            Part::Image { mime, data_base64 } => Some(json!({
                "type": "image_url",
                "image_url": { "url": format!("data:{mime};base64,{data_base64}") }
            })),
            Part::Document { mime, data_base64, name } => Some(json!({
                "type": "file",
                "file": { "filename": name, "file_data": format!("data:{mime};base64,{data_base64}") }
            })),
            _ => None,
        })
        .collect();
    Some(Value::Array(content))
}

/// An assistant message (text and tool calls; thoughts dropped), `None` when nothing is left.
fn assistant_message(parts: &[Part]) -> Option<Value> {
    let texts: Vec<&str> = parts
        .iter()
        .filter_map(|p| match p {
            Part::Text { text } if !text.is_empty() => Some(text.as_str()),
            _ => None,
        })
        .collect();
    let calls: Vec<Value> = parts
        .iter()
        .filter_map(|p| match p {
            Part::ToolCall { id, name, arguments, .. } => Some(json!({
                "id": id,
                "type": "function",
                "function": { "name": name, "arguments": arguments_to_string(arguments) }
            })),
            _ => None,
        })
        .collect();
    if texts.is_empty() && calls.is_empty() {
        return None;
    }
    let mut message = Map::new();
    message.insert("role".into(), Value::from("assistant"));
    let content = if texts.is_empty() { Value::Null } else { Value::String(texts.join("\n")) };
    message.insert("content".into(), content);
    if !calls.is_empty() {
        message.insert("tool_calls".into(), Value::Array(calls));
    }
    Some(Value::Object(message))
}

/// Tool call arguments as the JSON string the format wants; a string value is sent verbatim.
fn arguments_to_string(arguments: &Value) -> String {
    match arguments {
        Value::String(raw) => raw.clone(),
        other => other.to_string(),
    }
}

/// A temperature as JSON, written as the shortest decimal (`0.7`, not `0.699999988079071`).
fn f32_to_json(value: f32) -> Option<Value> {
    if !value.is_finite() {
        return None;
    }
    let wide = value.to_string().parse::<f64>().unwrap_or(f64::from(value));
    serde_json::Number::from_f64(wide).map(Value::Number)
}

/// Decodes a streamed chat completion, one SSE event at a time.
///
/// - `delta.reasoning_content` (DeepSeek, vLLM) or else `delta.reasoning` (OpenRouter, Ollama)
///   → [`ProviderEvent::ThoughtDelta`]; `delta.content` (and `delta.refusal`) →
///   [`ProviderEvent::TextDelta`]. Empty strings and `null`s are skipped.
/// - `delta.tool_calls[]` fragments are gathered by `index` (the id and name come in the first
///   fragment, the arguments in pieces, several calls possibly interleaved) and emitted as whole
///   [`ProviderEvent::ToolCall`]s, in index order, when the `finish_reason` arrives (or at
///   `[DONE]`). Arguments that are not valid JSON (a model's mistake, or a `length` cut) are kept
///   as a JSON string holding the raw text, so nothing is lost and the turn can still be
///   recorded; empty arguments become `{}`. A call without an id gets a made-up one.
/// - `finish_reason` → [`ProviderEvent::Finish`]; `usage` (the `include_usage` chunk, whose
///   `choices` is empty, or any chunk carrying it) → [`ProviderEvent::Usage`].
/// - `{"error": {...}}` → [`ProviderEvent::Error`]; the stream is then over: later events and
///   unfinished tool calls are dropped.
/// - `data: [DONE]` ends the stream. Without a `finish_reason` before it, a `Finish` is made up
///   (`tool_calls` when calls were pending, else `stop`).
#[derive(Debug, Default)]
pub struct StreamDecoder {
    /// Tool calls being assembled, by `index`.
    calls: BTreeMap<u64, PendingCall>,
    /// The completion's `id`, used to make up missing tool call ids.
    completion_id: String,
    /// A `finish_reason` was seen (and a `Finish` emitted).
    finished: bool,
    /// `[DONE]` was seen.
    done: bool,
    /// An error object was seen.
    failed: bool,
}

/// A tool call whose fragments are still arriving.
#[derive(Debug, Default)]
struct PendingCall {
    /// Call id (first non-empty one wins).
    id: String,
    /// Function name (first non-empty one wins).
    name: String,
    /// The argument text so far.
    arguments: String,
}

impl StreamDecoder {
    /// A decoder at the start of a stream.
    pub fn new() -> Self {
        Self::default()
    }

    /// Decodes one SSE event (its `data` is a chunk object, an error object or `[DONE]`).
    pub fn on_event(&mut self, event: &SseEvent) -> Result<Vec<ProviderEvent>, StreamParseError> {
        if self.done || self.failed {
            return Ok(Vec::new());
        }
        let data = event.data.trim();
        if data.is_empty() {
            return Ok(Vec::new());
        }
        let mut out = Vec::new();
        if data == "[DONE]" {
            self.done = true;
            let had_calls = !self.calls.is_empty();
            out.extend(self.flush_calls());
            if !self.finished {
                self.finished = true;
                let reason = if had_calls { FinishReason::ToolCalls } else { FinishReason::Stop };
                out.push(ProviderEvent::Finish(reason));
            }
            return Ok(out);
        }
        let chunk: Value = serde_json::from_str(data)
            .map_err(|e| StreamParseError(format!("chunk is not JSON ({e}): {}", preview(data))))?;
        let Value::Object(chunk) = chunk else {
            return Err(StreamParseError(format!("chunk is not a JSON object: {}", preview(data))));
        };
        if let Some(error) = chunk.get("error").filter(|e| !e.is_null()) {
            self.failed = true;
            self.calls.clear();
            out.push(ProviderEvent::Error(error_from_value(error, 0)));
            return Ok(out);
        }
        if self.completion_id.is_empty()
            && let Some(id) = chunk.get("id").and_then(Value::as_str)
        {
            id.clone_into(&mut self.completion_id);
        }
        match chunk.get("choices") {
            None | Some(Value::Null) => {}
            Some(Value::Array(choices)) => {
                if let Some(choice) = pick_choice(choices) {
                    self.on_choice(choice, &mut out)?;
                }
            }
            Some(other) => return Err(StreamParseError(format!("`choices` is not an array: {other}"))),
        }
        if let Some(usage) = chunk.get("usage").filter(|u| !u.is_null()) {
            out.push(ProviderEvent::Usage(parse_usage(usage)?));
        }
        Ok(out)
    }

    /// Ends the stream: an error if it stopped before `[DONE]` and without a `finish_reason`
    /// (a cut connection must not look like a complete answer); otherwise nothing, or the tool
    /// calls still pending.
    pub fn finish(&mut self) -> Result<Vec<ProviderEvent>, StreamParseError> {
        if self.failed || self.done {
            return Ok(Vec::new());
        }
        if self.finished {
            return Ok(self.flush_calls());
        }
        Err(StreamParseError(
            "the stream ended before `data: [DONE]` and without a finish_reason: the answer is truncated"
                .into(),
        ))
    }

    /// Handles `choices[0]`: its delta, then its `finish_reason`.
    fn on_choice(&mut self, choice: &Value, out: &mut Vec<ProviderEvent>) -> Result<(), StreamParseError> {
        if let Some(delta) = choice.get("delta").and_then(Value::as_object) {
            if let Some(thought) = reasoning_text(delta) {
                out.push(ProviderEvent::ThoughtDelta(thought.to_owned()));
            }
            for key in ["content", "refusal"] {
                if let Some(text) = delta.get(key).and_then(Value::as_str).filter(|t| !t.is_empty()) {
                    out.push(ProviderEvent::TextDelta(text.to_owned()));
                }
            }
            match delta.get("tool_calls") {
                None | Some(Value::Null) => {}
                Some(Value::Array(fragments)) => {
                    for (position, fragment) in fragments.iter().enumerate() {
                        self.on_tool_fragment(position, fragment)?;
                    }
                }
                Some(other) => {
                    return Err(StreamParseError(format!("`delta.tool_calls` is not an array: {other}")));
                }
            }
        }
        if let Some(reason) = choice.get("finish_reason").and_then(Value::as_str) {
            out.extend(self.flush_calls());
            if !self.finished {
                self.finished = true;
                out.push(ProviderEvent::Finish(finish_reason(reason)));
            }
        }
        Ok(())
    }

    /// Adds one `tool_calls[]` fragment to the call at its `index`.
    fn on_tool_fragment(&mut self, position: usize, fragment: &Value) -> Result<(), StreamParseError> {
        let Some(fragment) = fragment.as_object() else {
            return Err(StreamParseError(format!("tool call fragment is not an object: {fragment}")));
        };
        // `index` is required by the format; fall back on the position for servers that omit it.
        let index = fragment.get("index").and_then(Value::as_u64).unwrap_or(position as u64);
        let call = self.calls.entry(index).or_default();
        if call.id.is_empty()
            && let Some(id) = fragment.get("id").and_then(Value::as_str)
        {
            id.clone_into(&mut call.id);
        }
        if let Some(function) = fragment.get("function").and_then(Value::as_object) {
            if call.name.is_empty()
                && let Some(name) = function.get("name").and_then(Value::as_str)
            {
                name.clone_into(&mut call.name);
            }
            match function.get("arguments") {
                Some(Value::String(piece)) => call.arguments.push_str(piece),
                None | Some(Value::Null) => {}
                // Not the documented string: keep its JSON text.
                Some(other) => call.arguments.push_str(&other.to_string()),
            }
        }
        Ok(())
    }

    /// Emits the pending tool calls, in index order.
    fn flush_calls(&mut self) -> Vec<ProviderEvent> {
        let completion_id = self.completion_id.as_str();
        std::mem::take(&mut self.calls)
            .into_iter()
            .map(|(index, call)| ProviderEvent::ToolCall {
                id: if call.id.is_empty() { made_up_call_id(completion_id, index) } else { call.id },
                name: call.name,
                arguments: parse_arguments(&call.arguments),
                signature: None,
            })
            .collect()
    }
}

/// An id for a tool call the server sent without one (unique within the completion).
fn made_up_call_id(completion_id: &str, index: u64) -> String {
    if completion_id.is_empty() { format!("call_{index}") } else { format!("call_{completion_id}_{index}") }
}

/// Tool call arguments: the parsed JSON, `{}` when empty, the raw text as a string when malformed.
fn parse_arguments(raw: &str) -> Value {
    if raw.trim().is_empty() {
        return Value::Object(Map::new());
    }
    serde_json::from_str(raw).unwrap_or_else(|_| Value::String(raw.to_owned()))
}

/// The reasoning text of a delta or message: `reasoning_content`, else `reasoning`.
///
/// Only one is taken: servers that send both send the same text twice.
fn reasoning_text(object: &Map<String, Value>) -> Option<&str> {
    ["reasoning_content", "reasoning"]
        .into_iter()
        .find_map(|key| object.get(key).and_then(Value::as_str).filter(|t| !t.is_empty()))
}

/// `choices[0]`: the choice with `index` 0, else the first one.
fn pick_choice(choices: &[Value]) -> Option<&Value> {
    choices.iter().find(|c| c.get("index").and_then(Value::as_u64) == Some(0)).or_else(|| choices.first())
}

/// Maps a `finish_reason`.
fn finish_reason(reason: &str) -> FinishReason {
    match reason {
        "stop" => FinishReason::Stop,
        "length" => FinishReason::Length,
        "tool_calls" => FinishReason::ToolCalls,
        "content_filter" => FinishReason::ContentFilter,
        other => FinishReason::Other(other.to_owned()),
    }
}

/// Reads a `usage` object (cached tokens from `prompt_tokens_details.cached_tokens`, or
/// DeepSeek's `prompt_cache_hit_tokens`).
fn parse_usage(usage: &Value) -> Result<Usage, StreamParseError> {
    if !usage.is_object() {
        return Err(StreamParseError(format!("`usage` is not an object: {usage}")));
    }
    let count = |pointer: &str| usage.pointer(pointer).and_then(Value::as_u64);
    Ok(Usage {
        input_tokens: count("/prompt_tokens").unwrap_or(0),
        output_tokens: count("/completion_tokens").unwrap_or(0),
        cached_input_tokens: count("/prompt_tokens_details/cached_tokens")
            .or_else(|| count("/prompt_cache_hit_tokens"))
            .unwrap_or(0),
    })
}

/// At most 200 characters of some text, for error messages.
fn preview(text: &str) -> String {
    truncate_chars(text, 200)
}

/// `text` cut to `max` characters, with `…` when something was cut.
fn truncate_chars(text: &str, max: usize) -> String {
    match text.char_indices().nth(max) {
        Some((end, _)) => format!("{}…", text.get(..end).unwrap_or_default()),
        None => text.to_owned(),
    }
}

/// Decodes a non-streamed chat completion into the events a stream would have given:
/// thought, text, tool calls, finish, usage. A body that is an error object gives one
/// [`ProviderEvent::Error`].
pub fn parse_response(body: &[u8]) -> Result<Vec<ProviderEvent>, StreamParseError> {
    let value: Value = serde_json::from_slice(body).map_err(|e| {
        StreamParseError(format!("response is not JSON ({e}): {}", preview(&String::from_utf8_lossy(body))))
    })?;
    let Value::Object(object) = &value else {
        return Err(StreamParseError(format!(
            "response is not a JSON object: {}",
            preview(&value.to_string())
        )));
    };
    if let Some(error) = object.get("error").filter(|e| !e.is_null()) {
        return Ok(vec![ProviderEvent::Error(error_from_value(error, 0))]);
    }
    let choice = object
        .get("choices")
        .and_then(Value::as_array)
        .and_then(|choices| pick_choice(choices))
        .ok_or_else(|| StreamParseError("response has no `choices[0]`".into()))?;
    let message = choice
        .get("message")
        .and_then(Value::as_object)
        .ok_or_else(|| StreamParseError("response has no `choices[0].message`".into()))?;
    let completion_id = object.get("id").and_then(Value::as_str).unwrap_or_default();

    let mut out = Vec::new();
    if let Some(thought) = reasoning_text(message) {
        out.push(ProviderEvent::ThoughtDelta(thought.to_owned()));
    }
    for key in ["content", "refusal"] {
        if let Some(text) = message.get(key).and_then(Value::as_str).filter(|t| !t.is_empty()) {
            out.push(ProviderEvent::TextDelta(text.to_owned()));
        }
    }
    let calls = match message.get("tool_calls") {
        None | Some(Value::Null) => &[][..],
        Some(Value::Array(calls)) => calls.as_slice(),
        Some(other) => {
            return Err(StreamParseError(format!("`message.tool_calls` is not an array: {other}")));
        }
    };
    for (position, call) in calls.iter().enumerate() {
        let function = call.get("function");
        let arguments = match function.and_then(|f| f.get("arguments")) {
            Some(Value::String(raw)) => parse_arguments(raw),
            None | Some(Value::Null) => Value::Object(Map::new()),
            Some(other) => other.clone(),
        };
        let id = call.get("id").and_then(Value::as_str).filter(|id| !id.is_empty());
        out.push(ProviderEvent::ToolCall {
            id: id.map_or_else(|| made_up_call_id(completion_id, position as u64), str::to_owned),
            name: function.and_then(|f| f.get("name")).and_then(Value::as_str).unwrap_or_default().to_owned(),
            arguments,
            signature: None,
        });
    }
    let reason = match choice.get("finish_reason").and_then(Value::as_str) {
        Some(reason) => finish_reason(reason),
        None if calls.is_empty() => FinishReason::Stop,
        None => FinishReason::ToolCalls,
    };
    out.push(ProviderEvent::Finish(reason));
    if let Some(usage) = object.get("usage").filter(|u| !u.is_null()) {
        out.push(ProviderEvent::Usage(parse_usage(usage)?));
    }
    Ok(out)
}

/// Classifies an HTTP error answer.
///
/// - The body is OpenAI's `{"error": {"message", "type", "param", "code"}}`; also understood:
///   `{"error": "text"}`, vLLM's older top-level `{"object": "error", "message", "type", "code"}`,
///   and a one-element array of those. `kind` is the string `code` when there is one (it is the
///   more precise: `rate_limit_exceeded`, `context_length_exceeded`, `invalid_api_key`), else
///   `type`, else `http_<status>`. A body that is none of these becomes the message, cut to
///   500 characters.
/// - Retryable: 408, 409, 429 and 5xx, except a 429 whose code or type is
///   `insufficient_quota` (out of credits: waiting does not help).
/// - `retry_after_secs`: the `Retry-After` header, in seconds or as an HTTP-date (seconds from
///   now, at least 0); without it, OpenAI's "Please try again in 1.554s" hint in the message,
///   rounded up.
pub fn parse_error(status: u16, retry_after: Option<&str>, body: &[u8]) -> ProviderError {
    let parsed = serde_json::from_slice::<Value>(body).ok();
    let described = parsed.as_ref().and_then(error_fields);
    let fallback_kind = format!("http_{status}");
    let (kind, message, quota) = match described {
        Some(fields) => {
            let message = fields.message.unwrap_or_else(|| body_text(status, body));
            (fields.kind.unwrap_or(fallback_kind), message, fields.quota)
        }
        None => (fallback_kind, body_text(status, body), false),
    };
    let retry_after_secs =
        retry_after.and_then(|value| retry_after_at(value, Utc::now())).or_else(|| retry_hint(&message));
    ProviderError { status, kind, message, retryable: status_retryable(status) && !quota, retry_after_secs }
}

/// What an error object says.
struct ErrorFields {
    /// `code` (a string), else `type`.
    kind: Option<String>,
    /// `message`.
    message: Option<String>,
    /// Whether the code or type is `insufficient_quota`.
    quota: bool,
}

/// Finds the error object in an error body (see [`parse_error`]).
fn error_fields(body: &Value) -> Option<ErrorFields> {
    match body {
        Value::Array(items) => items.first().and_then(error_fields),
        Value::Object(object) => match object.get("error") {
            Some(Value::Object(error)) => Some(fields_of(error)),
            Some(Value::String(message)) => {
                Some(ErrorFields { kind: None, message: Some(message.clone()), quota: false })
            }
            _ if object.get("message").is_some_and(Value::is_string) => Some(fields_of(object)),
            _ => None,
        },
        _ => None,
    }
}

/// Reads `message`, `code` and `type` of an error object.
fn fields_of(error: &Map<String, Value>) -> ErrorFields {
    let text =
        |key: &str| error.get(key).and_then(Value::as_str).filter(|s| !s.is_empty()).map(str::to_owned);
    let code = text("code");
    let kind_type = text("type");
    let quota = [&code, &kind_type].into_iter().flatten().any(|s| s == "insufficient_quota");
    ErrorFields { kind: code.or(kind_type), message: text("message"), quota }
}

/// An in-stream (or 200-body) error object as a [`ProviderError`].
fn error_from_value(error: &Value, status: u16) -> ProviderError {
    let (kind, message, quota, retry_hint_kinds) = match error {
        Value::Object(object) => {
            let fields = fields_of(object);
            let kinds: Vec<String> = ["code", "type"]
                .into_iter()
                .filter_map(|key| object.get(key).and_then(Value::as_str).map(str::to_owned))
                .collect();
            (fields.kind, fields.message, fields.quota, kinds)
        }
        Value::String(message) => (None, Some(message.clone()), false, Vec::new()),
        other => (None, Some(other.to_string()), false, Vec::new()),
    };
    // vLLM puts the HTTP status in a numeric `code`.
    let status = match error.get("code").and_then(Value::as_u64) {
        Some(code @ 100..=599) if status == 0 => u16::try_from(code).unwrap_or(0),
        _ => status,
    };
    let message = message.unwrap_or_else(|| "An error occurred during streaming".to_owned());
    let retryable = !quota
        && if status != 0 {
            status_retryable(status)
        } else {
            retry_hint_kinds.iter().any(|k| retryable_kind(k))
        };
    let retry_after_secs = retry_hint(&message);
    ProviderError {
        status,
        kind: kind.unwrap_or_else(|| "error".to_owned()),
        message,
        retryable,
        retry_after_secs,
    }
}

/// Whether an HTTP status is worth retrying.
fn status_retryable(status: u16) -> bool {
    matches!(status, 408 | 409 | 429 | 500..=599)
}

/// Whether an in-stream error's `type` or `code` (no status known) is worth retrying.
fn retryable_kind(kind: &str) -> bool {
    matches!(
        kind,
        "server_error"
            | "rate_limit_exceeded"
            | "rate_limit_error"
            | "overloaded"
            | "overloaded_error"
            | "service_unavailable"
            | "timeout"
    )
}

/// A non-JSON (or unrecognised) error body as a message, cut to [`ERROR_BODY_CHARS`].
fn body_text(status: u16, body: &[u8]) -> String {
    let text = String::from_utf8_lossy(body);
    let text = text.trim();
    if text.is_empty() {
        return format!("HTTP {status} with an empty body");
    }
    truncate_chars(text, ERROR_BODY_CHARS)
}

/// A `Retry-After` value (delay-seconds or HTTP-date) as seconds from `now`, at least 0.
fn retry_after_at(value: &str, now: DateTime<Utc>) -> Option<u64> {
    let value = value.trim();
    if let Ok(seconds) = value.parse::<u64>() {
        return Some(seconds);
    }
    if let Ok(seconds) = value.parse::<f64>() {
        return (seconds.is_finite() && seconds >= 0.0).then(|| seconds.ceil() as u64);
    }
    let date = DateTime::parse_from_rfc2822(value).ok()?;
    let seconds = date.with_timezone(&Utc).signed_duration_since(now).num_seconds();
    Some(u64::try_from(seconds).unwrap_or(0))
}

/// OpenAI's "Please try again in 1.554s" (also `20ms`, `6m0s`, `1h2m3s`) as whole seconds, rounded up.
fn retry_hint(message: &str) -> Option<u64> {
    const MARKER: &str = "try again in ";
    let start = message.to_ascii_lowercase().find(MARKER)? + MARKER.len();
    let mut rest = message.get(start..)?;
    let mut total = 0.0_f64;
    let mut any = false;
    loop {
        let number_len = rest.find(|c: char| !(c.is_ascii_digit() || c == '.')).unwrap_or(rest.len());
        if number_len == 0 {
            break;
        }
        let Ok(number) = rest.get(..number_len).unwrap_or_default().parse::<f64>() else {
            break;
        };
        let after = rest.get(number_len..).unwrap_or_default();
        let (scale, unit_len) = if after.starts_with("ms") {
            (0.001, 2)
        } else if after.starts_with('s') {
            (1.0, 1)
        } else if after.starts_with('m') {
            (60.0, 1)
        } else if after.starts_with('h') {
            (3600.0, 1)
        } else {
            break;
        };
        total += number * scale;
        any = true;
        rest = after.get(unit_len..).unwrap_or_default();
    }
    (any && total.is_finite()).then(|| total.ceil() as u64)
}

/// The model ids of a `GET /models` answer: OpenAI's (and Ollama's `/v1/models`)
/// `{"data": [{"id": ...}]}`, or Ollama's native `/api/tags` `{"models": [{"name": ...}]}`.
pub fn parse_models(body: &[u8]) -> Result<Vec<String>, StreamParseError> {
    let value: Value = serde_json::from_slice(body).map_err(|e| {
        StreamParseError(format!("model list is not JSON ({e}): {}", preview(&String::from_utf8_lossy(body))))
    })?;
    let ids = |items: &Vec<Value>, keys: &[&str]| -> Vec<String> {
        items
            .iter()
            .filter_map(|item| keys.iter().find_map(|key| item.get(*key).and_then(Value::as_str)))
            .map(str::to_owned)
            .collect()
    };
    if let Some(data) = value.get("data").and_then(Value::as_array) {
        return Ok(ids(data, &["id"]));
    }
    if let Some(models) = value.get("models").and_then(Value::as_array) {
        return Ok(ids(models, &["name", "model"]));
    }
    Err(StreamParseError(format!("model list has no `data` array: {}", preview(&value.to_string()))))
}

#[cfg(test)]
mod tests {
    use super::super::sse::SseParser;
    use super::*;

    const TEXT: &str = include_str!("../../tests/fixtures/providers/openai/text.sse");
    const MANY_SMALL_CHUNKS: &str =
        include_str!("../../tests/fixtures/providers/openai/many_small_chunks.sse");
    const REASONING_DEEPSEEK: &str =
        include_str!("../../tests/fixtures/providers/openai/reasoning_deepseek.sse");
    const TOOL_CALLS_PARALLEL: &str =
        include_str!("../../tests/fixtures/providers/openai/tool_calls_parallel.sse");
    const ERROR_MIDSTREAM: &str = include_str!("../../tests/fixtures/providers/openai/error_midstream.sse");
    const TRUNCATED: &str = include_str!("../../tests/fixtures/providers/openai/truncated.sse");
    const NONSTREAM_TEXT: &str = include_str!("../../tests/fixtures/providers/openai/nonstream_text.json");
    const ERROR_400: &str = include_str!("../../tests/fixtures/providers/openai/error_400.json");
    const ERROR_429: &str = include_str!("../../tests/fixtures/providers/openai/error_429.json");
    const MODELS: &str = include_str!("../../tests/fixtures/providers/openai/models.json");
    const MODELS_OLLAMA: &str = include_str!("../../tests/fixtures/providers/openai/models_ollama.json");

    /// The text of `many_small_chunks.sse`, one chunk per word (the fixture was made from it).
    const MANY_WORDS: &str = "Streaming sends a response in many small pieces so that a reader sees the \
        first words long before the model has finished writing the last ones. Each piece arrives as \
        its own server sent event with a tiny JSON object inside, and the client must glue the \
        pieces back together in order without losing a single character or adding one that was \
        never sent. Networks split and merge those events freely, so a careful parser keeps \
        whatever bytes it has not yet understood and waits patiently for the rest before it acts. \
        This paragraph has more than one hundred words, which makes it a fair test of that \
        patience and of the bookkeeping behind it, done right.";

    /// A fixed pseudo-random sequence of chunk sizes from 0 to 23 bytes (xorshift64*).
    struct Splitter(u64);

    impl Splitter {
        fn next_len(&mut self) -> usize {
            self.0 ^= self.0 >> 12;
            self.0 ^= self.0 << 25;
            self.0 ^= self.0 >> 27;
            (self.0.wrapping_mul(0x2545_F491_4F6C_DD1D) >> 59) as usize % 24
        }
    }

    /// Feeds `raw` through the SSE parser and the decoder in pseudo-random chunks.
    fn decode_with_seed(raw: &str, seed: u64) -> Result<Vec<ProviderEvent>, StreamParseError> {
        let mut splitter = Splitter(seed.wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1);
        let mut parser = SseParser::new();
        let mut decoder = StreamDecoder::new();
        let mut out = Vec::new();
        let mut rest = raw.as_bytes();
        while !rest.is_empty() {
            let (chunk, tail) = rest.split_at(splitter.next_len().min(rest.len()));
            rest = tail;
            for event in parser.push(chunk) {
                out.extend(decoder.on_event(&event)?);
            }
        }
        for event in parser.finish() {
            out.extend(decoder.on_event(&event)?);
        }
        out.extend(decoder.finish()?);
        Ok(out)
    }

    /// Decodes `raw` whole and with 40 different split sequences; all must agree.
    fn decode_fixture(raw: &str) -> Result<Vec<ProviderEvent>, StreamParseError> {
        let whole = decode_with_seed(raw, 0);
        for seed in 1..=40 {
            assert_eq!(decode_with_seed(raw, seed), whole, "split sequence {seed}");
        }
        whole
    }

    fn text(s: &str) -> ProviderEvent {
        ProviderEvent::TextDelta(s.to_owned())
    }

    fn thought(s: &str) -> ProviderEvent {
        ProviderEvent::ThoughtDelta(s.to_owned())
    }

    fn usage(input: u64, output: u64, cached: u64) -> ProviderEvent {
        ProviderEvent::Usage(Usage {
            input_tokens: input,
            output_tokens: output,
            cached_input_tokens: cached,
        })
    }

    fn message(data: &str) -> SseEvent {
        SseEvent { event: "message".into(), data: data.into(), id: None }
    }

    /// Runs JSON chunks (and `[DONE]`) through a fresh decoder.
    fn decode_chunks(chunks: &[&str]) -> Result<Vec<ProviderEvent>, StreamParseError> {
        let mut decoder = StreamDecoder::new();
        let mut out = Vec::new();
        for chunk in chunks {
            out.extend(decoder.on_event(&message(chunk))?);
        }
        out.extend(decoder.finish()?);
        Ok(out)
    }

    // ---- fixtures through SseParser + StreamDecoder ----

    #[test]
    fn fixture_text() {
        assert_eq!(
            decode_fixture(TEXT),
            Ok(vec![
                text("Hello"),
                text("!"),
                text(" How"),
                text(" can"),
                text(" I"),
                text(" help"),
                text(" you"),
                text(" today"),
                text("?"),
                text(" \u{1F44B}"),
                ProviderEvent::Finish(FinishReason::Stop),
                usage(1290, 11, 1152),
            ])
        );
    }

    #[test]
    fn fixture_many_small_chunks() {
        let words: Vec<&str> = MANY_WORDS.split_whitespace().collect();
        assert!(words.len() >= 100, "{} words", words.len());
        let mut expected: Vec<ProviderEvent> = words
            .iter()
            .enumerate()
            .map(|(i, word)| if i == 0 { text(word) } else { text(&format!(" {word}")) })
            .collect();
        expected.push(ProviderEvent::Finish(FinishReason::Stop));
        expected.push(usage(41, words.len() as u64, 0));
        let events = decode_fixture(MANY_SMALL_CHUNKS);
        assert_eq!(events, Ok(expected));
    }

    #[test]
    fn fixture_reasoning_deepseek() {
        assert_eq!(
            decode_fixture(REASONING_DEEPSEEK),
            Ok(vec![
                thought("Okay"),
                thought(", the user"),
                thought(" asks which is greater: 9.11 or 9.8."),
                thought(" Compare the tenths: 1 < 8,"),
                thought(" so 9.8 is greater."),
                text("**9.8"),
                text("** is greater"),
                text(" than 9.11."),
                ProviderEvent::Finish(FinishReason::Stop),
                usage(76, 51, 64),
            ])
        );
    }

    #[test]
    fn fixture_tool_calls_parallel() {
        assert_eq!(
            decode_fixture(TOOL_CALLS_PARALLEL),
            Ok(vec![
                ProviderEvent::ToolCall {
                    id: "call_8HkQbX2mZr4TnVe1yJcW5sLd".into(),
                    name: "get_weather".into(),
                    arguments: json!({ "location": "Paris, France", "unit": "celsius" }),
                    signature: None,
                },
                ProviderEvent::ToolCall {
                    id: "call_Qm3vT9pLx7RcYa2NwEk6HjUf".into(),
                    name: "get_local_time".into(),
                    arguments: json!({ "timezone": "Asia/Tokyo" }),
                    signature: None,
                },
                ProviderEvent::Finish(FinishReason::ToolCalls),
                usage(142, 58, 0),
            ])
        );
    }

    #[test]
    fn fixture_error_midstream() {
        assert_eq!(
            decode_fixture(ERROR_MIDSTREAM),
            Ok(vec![
                text("The"),
                text(" answer"),
                text(" is"),
                ProviderEvent::Error(ProviderError {
                    status: 0,
                    kind: "server_error".into(),
                    message: "The server had an error while processing your request. Sorry about that!"
                        .into(),
                    retryable: true,
                    retry_after_secs: None,
                }),
            ])
        );
    }

    #[test]
    fn fixture_truncated_stream_is_an_error() {
        for seed in 0..=40 {
            let result = decode_with_seed(TRUNCATED, seed);
            let Err(StreamParseError(message)) = result else {
                panic!("seed {seed}: a truncated stream decoded as complete: {result:?}");
            };
            assert!(message.contains("truncated"), "{message}");
        }
        // Before the end, the text that did arrive came through.
        let mut parser = SseParser::new();
        let mut decoder = StreamDecoder::new();
        let mut events = Vec::new();
        for event in parser.push(TRUNCATED.as_bytes()) {
            events.extend(decoder.on_event(&event).unwrap());
        }
        assert_eq!(events, vec![text("Once"), text(" upon"), text(" a"), text(" time")]);
        assert!(decoder.finish().is_err());
    }

    #[test]
    fn fixtures_use_documented_framing() {
        for raw in [TEXT, MANY_SMALL_CHUNKS, REASONING_DEEPSEEK, TOOL_CALLS_PARALLEL] {
            assert!(raw.ends_with("data: [DONE]\n\n"));
            assert!(raw.contains("\"choices\":[],\"usage\":{"));
        }
        for raw in [ERROR_MIDSTREAM, TRUNCATED] {
            assert!(!raw.contains("[DONE]"));
        }
        assert!(!TRUNCATED.contains("finish_reason\":\""));
    }

    // ---- StreamDecoder details ----

    #[test]
    fn reasoning_field_of_openrouter_and_ollama() {
        let events = decode_chunks(&[
            r#"{"id":"gen-1","choices":[{"index":0,"delta":{"role":"assistant","content":"","reasoning":"Let me"}}]}"#,
            r#"{"id":"gen-1","choices":[{"index":0,"delta":{"content":"","reasoning":" think."}}]}"#,
            r#"{"id":"gen-1","choices":[{"index":0,"delta":{"content":"Hi"},"finish_reason":"stop"}]}"#,
            "[DONE]",
        ]);
        assert_eq!(
            events,
            Ok(vec![
                thought("Let me"),
                thought(" think."),
                text("Hi"),
                ProviderEvent::Finish(FinishReason::Stop)
            ])
        );
    }

    #[test]
    fn reasoning_sent_under_both_names_is_taken_once() {
        let events = decode_chunks(&[
            r#"{"choices":[{"index":0,"delta":{"reasoning_content":"a","reasoning":"a"}}]}"#,
            r#"{"choices":[{"index":0,"delta":{"reasoning_content":null,"reasoning":"b"}}]}"#,
            r#"{"choices":[{"index":0,"delta":{},"finish_reason":"stop"}]}"#,
        ]);
        assert_eq!(events, Ok(vec![thought("a"), thought("b"), ProviderEvent::Finish(FinishReason::Stop)]));
    }

    #[test]
    fn finish_reasons() {
        for (raw, reason) in [
            ("stop", FinishReason::Stop),
            ("length", FinishReason::Length),
            ("tool_calls", FinishReason::ToolCalls),
            ("content_filter", FinishReason::ContentFilter),
            ("function_call", FinishReason::Other("function_call".into())),
            ("error", FinishReason::Other("error".into())),
        ] {
            let chunk = format!(r#"{{"choices":[{{"index":0,"delta":{{}},"finish_reason":"{raw}"}}]}}"#);
            assert_eq!(decode_chunks(&[&chunk]), Ok(vec![ProviderEvent::Finish(reason)]));
        }
    }

    #[test]
    fn usage_in_the_finish_chunk_comes_after_finish() {
        let events = decode_chunks(&[
            r#"{"choices":[{"index":0,"delta":{"content":"x"},"finish_reason":"stop"}],"usage":{"prompt_tokens":3,"completion_tokens":1,"total_tokens":4}}"#,
            "[DONE]",
        ]);
        assert_eq!(events, Ok(vec![text("x"), ProviderEvent::Finish(FinishReason::Stop), usage(3, 1, 0)]));
    }

    #[test]
    fn done_without_finish_reason_makes_one_up() {
        assert_eq!(
            decode_chunks(&[r#"{"choices":[{"index":0,"delta":{"content":"x"}}]}"#, "[DONE]"]),
            Ok(vec![text("x"), ProviderEvent::Finish(FinishReason::Stop)])
        );
        let events = decode_chunks(&[
            r#"{"id":"c1","choices":[{"index":0,"delta":{"tool_calls":[{"index":0,"function":{"name":"f","arguments":"{}"}}]}}]}"#,
            "[DONE]",
        ]);
        assert_eq!(
            events,
            Ok(vec![
                ProviderEvent::ToolCall {
                    id: "call_c1_0".into(),
                    name: "f".into(),
                    arguments: json!({}),
                    signature: None
                },
                ProviderEvent::Finish(FinishReason::ToolCalls),
            ])
        );
    }

    #[test]
    fn finish_reason_without_done_is_complete() {
        assert_eq!(
            decode_chunks(&[r#"{"choices":[{"index":0,"delta":{"content":"x"},"finish_reason":"length"}]}"#]),
            Ok(vec![text("x"), ProviderEvent::Finish(FinishReason::Length)])
        );
    }

    #[test]
    fn stream_without_end_is_an_error() {
        assert!(decode_chunks(&[r#"{"choices":[{"index":0,"delta":{"content":"x"}}]}"#]).is_err());
        assert!(StreamDecoder::new().finish().is_err());
    }

    #[test]
    fn events_after_done_are_ignored() {
        assert_eq!(
            decode_chunks(&["[DONE]", r#"{"choices":[{"index":0,"delta":{"content":"late"}}]}"#, "not json"]),
            Ok(vec![ProviderEvent::Finish(FinishReason::Stop)])
        );
    }

    #[test]
    fn tool_call_whole_in_one_fragment_and_missing_pieces() {
        // Ollama and others send each call whole; no index falls back on the position.
        let events = decode_chunks(&[
            r#"{"choices":[{"index":0,"delta":{"tool_calls":[{"id":"a","type":"function","function":{"name":"one","arguments":"{\"x\":1}"}},{"id":"b","type":"function","function":{"name":"two","arguments":""}}]},"finish_reason":"tool_calls"}]}"#,
        ]);
        assert_eq!(
            events,
            Ok(vec![
                ProviderEvent::ToolCall {
                    id: "a".into(),
                    name: "one".into(),
                    arguments: json!({"x": 1}),
                    signature: None
                },
                ProviderEvent::ToolCall {
                    id: "b".into(),
                    name: "two".into(),
                    arguments: json!({}),
                    signature: None
                },
                ProviderEvent::Finish(FinishReason::ToolCalls),
            ])
        );
    }

    #[test]
    fn tool_call_ids_and_names_repeated_or_null_later() {
        let events = decode_chunks(&[
            r#"{"choices":[{"index":0,"delta":{"tool_calls":[{"index":0,"id":"call_1","type":"function","function":{"name":"search","arguments":""}}]}}]}"#,
            r#"{"choices":[{"index":0,"delta":{"tool_calls":[{"index":0,"id":null,"type":null,"function":{"name":null,"arguments":"{\"q\":"}}]}}]}"#,
            r#"{"choices":[{"index":0,"delta":{"tool_calls":[{"index":0,"id":"call_1","function":{"name":"search","arguments":"\"rust\"}"}}]}}]}"#,
            r#"{"choices":[{"index":0,"delta":{},"finish_reason":"tool_calls"}]}"#,
        ]);
        assert_eq!(
            events,
            Ok(vec![
                ProviderEvent::ToolCall {
                    id: "call_1".into(),
                    name: "search".into(),
                    arguments: json!({"q": "rust"}),
                    signature: None
                },
                ProviderEvent::Finish(FinishReason::ToolCalls),
            ])
        );
    }

    #[test]
    fn malformed_tool_arguments_are_kept_as_a_string() {
        let events = decode_chunks(&[
            r#"{"choices":[{"index":0,"delta":{"tool_calls":[{"index":0,"id":"c","function":{"name":"f","arguments":"{\"a\": 1,"}}]}}]}"#,
            r#"{"choices":[{"index":0,"delta":{},"finish_reason":"length"}]}"#,
        ]);
        assert_eq!(
            events,
            Ok(vec![
                ProviderEvent::ToolCall {
                    id: "c".into(),
                    name: "f".into(),
                    arguments: Value::String("{\"a\": 1,".into()),
                    signature: None
                },
                ProviderEvent::Finish(FinishReason::Length),
            ])
        );
    }

    #[test]
    fn text_and_tool_calls_in_one_answer() {
        let events = decode_chunks(&[
            r#"{"choices":[{"index":0,"delta":{"role":"assistant","content":"Checking."}}]}"#,
            r#"{"choices":[{"index":0,"delta":{"tool_calls":[{"index":0,"id":"c","type":"function","function":{"name":"f","arguments":"{}"}}]}}]}"#,
            r#"{"choices":[{"index":0,"delta":{},"finish_reason":"tool_calls"}],"usage":null}"#,
            r#"{"choices":[],"usage":{"prompt_tokens":9,"completion_tokens":4,"prompt_tokens_details":{"cached_tokens":0}}}"#,
            "[DONE]",
        ]);
        assert_eq!(
            events,
            Ok(vec![
                text("Checking."),
                ProviderEvent::ToolCall {
                    id: "c".into(),
                    name: "f".into(),
                    arguments: json!({}),
                    signature: None
                },
                ProviderEvent::Finish(FinishReason::ToolCalls),
                usage(9, 4, 0),
            ])
        );
    }

    #[test]
    fn refusal_is_text() {
        assert_eq!(
            decode_chunks(&[
                r#"{"choices":[{"index":0,"delta":{"refusal":"I can't help with that."},"finish_reason":"stop"}]}"#
            ]),
            Ok(vec![text("I can't help with that."), ProviderEvent::Finish(FinishReason::Stop)])
        );
    }

    #[test]
    fn choice_with_index_zero_is_used() {
        assert_eq!(
            decode_chunks(&[
                r#"{"choices":[{"index":1,"delta":{"content":"other"}},{"index":0,"delta":{"content":"mine"},"finish_reason":"stop"}]}"#
            ]),
            Ok(vec![text("mine"), ProviderEvent::Finish(FinishReason::Stop)])
        );
    }

    #[test]
    fn in_stream_error_shapes() {
        // vLLM: numeric code is the HTTP status.
        let events = decode_chunks(&[
            r#"{"error":{"object":"error","message":"Request too large","type":"BadRequestError","param":null,"code":400}}"#,
        ]);
        assert_eq!(
            events,
            Ok(vec![ProviderEvent::Error(ProviderError {
                status: 400,
                kind: "BadRequestError".into(),
                message: "Request too large".into(),
                retryable: false,
                retry_after_secs: None,
            })])
        );
        // OpenRouter: error next to a `finish_reason: "error"` choice; the error wins, the stream is over.
        let events = decode_chunks(&[
            r#"{"id":"gen-1","object":"chat.completion.chunk","created":1,"model":"m","error":{"code":"server_error","message":"Provider disconnected unexpectedly"},"choices":[{"index":0,"delta":{"content":""},"finish_reason":"error"}]}"#,
            r#"{"choices":[{"index":0,"delta":{"content":"ignored"}}]}"#,
        ]);
        assert_eq!(
            events,
            Ok(vec![ProviderEvent::Error(ProviderError {
                status: 0,
                kind: "server_error".into(),
                message: "Provider disconnected unexpectedly".into(),
                retryable: true,
                retry_after_secs: None,
            })])
        );
        // A bare string error, and a rate limit with a hint.
        assert_eq!(
            decode_chunks(&[r#"{"error":"model not loaded"}"#]),
            Ok(vec![ProviderEvent::Error(ProviderError {
                status: 0,
                kind: "error".into(),
                message: "model not loaded".into(),
                retryable: false,
                retry_after_secs: None,
            })])
        );
        assert_eq!(
            decode_chunks(&[
                r#"{"error":{"message":"Rate limit reached. Please try again in 20ms.","type":"tokens","code":"rate_limit_exceeded"}}"#
            ]),
            Ok(vec![ProviderEvent::Error(ProviderError {
                status: 0,
                kind: "rate_limit_exceeded".into(),
                message: "Rate limit reached. Please try again in 20ms.".into(),
                retryable: true,
                retry_after_secs: Some(1),
            })])
        );
    }

    #[test]
    fn error_after_partial_tool_call_drops_it() {
        let events = decode_chunks(&[
            r#"{"choices":[{"index":0,"delta":{"tool_calls":[{"index":0,"id":"c","function":{"name":"f","arguments":"{\"a"}}]}}]}"#,
            r#"{"error":{"message":"boom","type":"server_error"}}"#,
        ]);
        assert!(matches!(events.as_deref(), Ok([ProviderEvent::Error(_)])), "{events:?}");
    }

    #[test]
    fn malformed_chunks_are_errors() {
        let mut decoder = StreamDecoder::new();
        assert!(decoder.on_event(&message("{not json")).is_err());
        assert!(decoder.on_event(&message("[1,2]")).is_err());
        assert!(decoder.on_event(&message(r#"{"choices":{}}"#)).is_err());
        assert!(decoder.on_event(&message(r#"{"choices":[{"delta":{"tool_calls":{}}}]}"#)).is_err());
        assert!(decoder.on_event(&message(r#"{"choices":[{"delta":{"tool_calls":[7]}}]}"#)).is_err());
        assert!(decoder.on_event(&message(r#"{"choices":[],"usage":7}"#)).is_err());
    }

    #[test]
    fn empty_and_unknown_chunks_are_ignored() {
        let mut decoder = StreamDecoder::new();
        assert_eq!(decoder.on_event(&message("")), Ok(vec![]));
        assert_eq!(decoder.on_event(&message("  ")), Ok(vec![]));
        assert_eq!(decoder.on_event(&message(r#"{"object":"chat.completion.chunk"}"#)), Ok(vec![]));
        assert_eq!(
            decoder.on_event(&message(r#"{"choices":[{"index":0,"delta":{"content":null}}]}"#)),
            Ok(vec![])
        );
        assert_eq!(decoder.on_event(&message(r#"{"choices":[]}"#)), Ok(vec![]));
    }

    // ---- parse_response ----

    #[test]
    fn nonstream_text_fixture() {
        assert_eq!(
            parse_response(NONSTREAM_TEXT.as_bytes()),
            Ok(vec![
                text("The capital of France is Paris."),
                ProviderEvent::Finish(FinishReason::Stop),
                usage(24, 8, 0),
            ])
        );
    }

    #[test]
    fn nonstream_reasoning_and_tool_calls() {
        let body = br#"{
          "id": "5d1c3d0f-2f5e-4c7a-9b55-0c1d2e3f4a5b", "object": "chat.completion", "created": 1740000000,
          "model": "deepseek-reasoner",
          "choices": [{"index": 0, "finish_reason": "tool_calls", "message": {
            "role": "assistant", "content": "", "reasoning_content": "Need the weather.",
            "tool_calls": [
              {"id": "call_0_a", "type": "function", "function": {"name": "get_weather", "arguments": "{\"city\":\"Oslo\"}"}},
              {"type": "function", "function": {"name": "noop", "arguments": "oops"}}
            ]}}],
          "usage": {"prompt_tokens": 100, "completion_tokens": 20, "prompt_cache_hit_tokens": 64, "prompt_cache_miss_tokens": 36}
        }"#;
        assert_eq!(
            parse_response(body),
            Ok(vec![
                thought("Need the weather."),
                ProviderEvent::ToolCall {
                    id: "call_0_a".into(),
                    name: "get_weather".into(),
                    arguments: json!({"city": "Oslo"}),
                    signature: None
                },
                ProviderEvent::ToolCall {
                    id: "call_5d1c3d0f-2f5e-4c7a-9b55-0c1d2e3f4a5b_1".into(),
                    name: "noop".into(),
                    arguments: Value::String("oops".into()),
                    signature: None
                },
                ProviderEvent::Finish(FinishReason::ToolCalls),
                usage(100, 20, 64),
            ])
        );
    }

    #[test]
    fn nonstream_reasoning_field_and_leading_keepalive_lines() {
        // DeepSeek sends empty lines while a non-streamed request waits; JSON allows them.
        let body = b"\n\n{\"choices\":[{\"index\":0,\"message\":{\"role\":\"assistant\",\"content\":\"ok\",\"reasoning\":\"hm\"}}]}";
        assert_eq!(
            parse_response(body),
            Ok(vec![thought("hm"), text("ok"), ProviderEvent::Finish(FinishReason::Stop)])
        );
    }

    #[test]
    fn nonstream_errors() {
        assert!(parse_response(b"").is_err());
        assert!(parse_response(b"<html>").is_err());
        assert!(parse_response(b"[]").is_err());
        assert!(parse_response(br#"{"choices":[]}"#).is_err());
        assert!(parse_response(br#"{"choices":[{"index":0}]}"#).is_err());
        assert!(matches!(
            parse_response(br#"{"error":{"message":"m","type":"server_error"}}"#).as_deref(),
            Ok([ProviderEvent::Error(ProviderError { retryable: true, .. })])
        ));
    }

    // ---- parse_error ----

    #[test]
    fn error_400_fixture() {
        assert_eq!(
            parse_error(400, None, ERROR_400.as_bytes()),
            ProviderError {
                status: 400,
                kind: "context_length_exceeded".into(),
                message: "This model's maximum context length is 128000 tokens. However, your messages \
                          resulted in 131072 tokens. Please reduce the length of the messages."
                    .into(),
                retryable: false,
                retry_after_secs: None,
            }
        );
    }

    #[test]
    fn error_429_fixture() {
        let error = parse_error(429, Some("2"), ERROR_429.as_bytes());
        assert_eq!(error.kind, "rate_limit_exceeded");
        assert!(error.retryable);
        assert_eq!(error.retry_after_secs, Some(2));
        assert!(error.message.starts_with("Rate limit reached for gpt-4o"));
        // Without the header, the hint in the message ("1.554s") rounded up.
        assert_eq!(parse_error(429, None, ERROR_429.as_bytes()).retry_after_secs, Some(2));
    }

    #[test]
    fn insufficient_quota_is_not_retryable() {
        let body = br#"{"error":{"message":"You exceeded your current quota, please check your plan and billing details.","type":"insufficient_quota","param":null,"code":"insufficient_quota"}}"#;
        let error = parse_error(429, None, body);
        assert_eq!(error.kind, "insufficient_quota");
        assert!(!error.retryable);
    }

    #[test]
    fn retryable_statuses() {
        for status in [408, 409, 429, 500, 502, 503, 504, 529, 599] {
            assert!(parse_error(status, None, b"").retryable, "{status}");
        }
        for status in [400, 401, 403, 404, 413, 422, 600] {
            assert!(!parse_error(status, None, b"").retryable, "{status}");
        }
    }

    #[test]
    fn non_json_bodies() {
        let error = parse_error(502, None, b"<html><body>502 Bad Gateway</body></html>\n");
        assert_eq!(error.kind, "http_502");
        assert_eq!(error.message, "<html><body>502 Bad Gateway</body></html>");
        assert!(error.retryable);

        assert_eq!(parse_error(503, None, b"").message, "HTTP 503 with an empty body");

        let long = "\u{e9}".repeat(800);
        let error = parse_error(500, None, long.as_bytes());
        assert_eq!(error.message.chars().count(), 501);
        assert!(error.message.ends_with('…'));

        // JSON, but not an error object: the text is the message.
        assert_eq!(parse_error(500, None, br#"{"detail":"x"}"#).message, r#"{"detail":"x"}"#);
    }

    #[test]
    fn other_error_body_shapes() {
        let error =
            parse_error(404, None, br#"{"error":"model \"llama9\" not found, try pulling it first"}"#);
        assert_eq!(error.kind, "http_404");
        assert_eq!(error.message, "model \"llama9\" not found, try pulling it first");

        let error = parse_error(
            400,
            None,
            br#"{"object":"error","message":"max_tokens is too large","type":"BadRequestError","param":null,"code":400}"#,
        );
        assert_eq!(
            (error.kind.as_str(), error.message.as_str()),
            ("BadRequestError", "max_tokens is too large")
        );

        let error = parse_error(
            400,
            None,
            br#"[{"error":{"code":400,"message":"API key not valid.","status":"INVALID_ARGUMENT"}}]"#,
        );
        assert_eq!((error.kind.as_str(), error.message.as_str()), ("http_400", "API key not valid."));

        let error = parse_error(401, None, br#"{"error":{"message":"Incorrect API key provided: sk-abc***xyz.","type":"invalid_request_error","param":null,"code":"invalid_api_key"}}"#);
        assert_eq!(error.kind, "invalid_api_key");

        let error = parse_error(
            400,
            None,
            br#"{"error":{"message":"Bad","type":"invalid_request_error","param":"messages","code":null}}"#,
        );
        assert_eq!(error.kind, "invalid_request_error");
    }

    #[test]
    fn retry_after_values() {
        let now = DateTime::parse_from_rfc3339("2015-10-21T07:27:30Z").unwrap().with_timezone(&Utc);
        assert_eq!(retry_after_at("120", now), Some(120));
        assert_eq!(retry_after_at(" 0 ", now), Some(0));
        assert_eq!(retry_after_at("1.5", now), Some(2));
        assert_eq!(retry_after_at("-3", now), None);
        assert_eq!(retry_after_at("soon", now), None);
        assert_eq!(retry_after_at("", now), None);
        assert_eq!(retry_after_at("Wed, 21 Oct 2015 07:28:00 GMT", now), Some(30));
        assert_eq!(retry_after_at("Wed, 21 Oct 2015 07:00:00 GMT", now), Some(0));
        assert_eq!(retry_after_at("Wed, 21 Oct 2015 09:28:00 +0200", now), Some(30));
        // Through parse_error, against the real clock: a date in the past floors at 0.
        assert_eq!(parse_error(503, Some("Thu, 01 Jan 1970 00:00:00 GMT"), b"").retry_after_secs, Some(0));
        let soon = (Utc::now() + chrono::TimeDelta::seconds(100)).to_rfc2822();
        let secs = parse_error(503, Some(&soon), b"").retry_after_secs.unwrap();
        assert!((98..=100).contains(&secs), "{secs}");
        assert_eq!(parse_error(503, Some("7"), b"").retry_after_secs, Some(7));
    }

    #[test]
    fn retry_hints_in_messages() {
        assert_eq!(retry_hint("Please try again in 1.554s. Visit ..."), Some(2));
        assert_eq!(retry_hint("Please try again in 20ms."), Some(1));
        assert_eq!(retry_hint("Please try again in 6m0s."), Some(360));
        assert_eq!(retry_hint("Please try again in 1m12.5s."), Some(73));
        assert_eq!(retry_hint("Please try again in 1h2m3s"), Some(3723));
        assert_eq!(retry_hint("Please Try Again In 3s"), Some(3));
        assert_eq!(retry_hint("Please try again in a moment."), None);
        assert_eq!(retry_hint("Please try again later."), None);
        assert_eq!(retry_hint("no hint"), None);
    }

    // ---- parse_models ----

    #[test]
    fn models_fixtures() {
        assert_eq!(
            parse_models(MODELS.as_bytes()),
            Ok(vec![
                "gpt-4o".to_owned(),
                "gpt-4o-mini".to_owned(),
                "o3-mini".to_owned(),
                "text-embedding-3-small".to_owned()
            ])
        );
        assert_eq!(
            parse_models(MODELS_OLLAMA.as_bytes()),
            Ok(vec!["llama3.2:latest".to_owned(), "qwen3:8b".to_owned(), "deepseek-r1:7b".to_owned()])
        );
    }

    #[test]
    fn models_other_shapes() {
        assert_eq!(
            parse_models(
                br#"{"models":[{"name":"llama3:latest","model":"llama3:latest"},{"model":"phi4"}]}"#
            ),
            Ok(vec!["llama3:latest".to_owned(), "phi4".to_owned()])
        );
        assert_eq!(parse_models(br#"{"object":"list","data":[]}"#), Ok(vec![]));
        assert_eq!(
            parse_models(br#"{"data":[{"id":"a"},{"object":"model"},{"id":7}]}"#),
            Ok(vec!["a".to_owned()])
        );
        assert!(parse_models(b"nope").is_err());
        assert!(parse_models(br#"{"error":{"message":"x"}}"#).is_err());
    }

    // ---- endpoint and build_request ----

    #[test]
    fn endpoints() {
        assert_eq!(endpoint("https://api.openai.com/v1"), "https://api.openai.com/v1/chat/completions");
        assert_eq!(endpoint("https://api.openai.com/v1/"), "https://api.openai.com/v1/chat/completions");
        assert_eq!(endpoint("http://localhost:11434/v1//"), "http://localhost:11434/v1/chat/completions");
        assert_eq!(endpoint("https://api.deepseek.com"), "https://api.deepseek.com/chat/completions");
        assert_eq!(
            endpoint(" https://openrouter.ai/api/v1 "),
            "https://openrouter.ai/api/v1/chat/completions"
        );
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
                parameters: json!({ "type": "object", "properties": { "factor": { "type": "number" } } }),
            }],
            params: GenParams {
                temperature: Some(0.7),
                max_output_tokens: Some(4096),
                reasoning_effort: Some(ReasoningEffort::High),
                thinking_budget: Some(2048),
            },
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
        for (effort, name) in [
            (ReasoningEffort::Low, "low"),
            (ReasoningEffort::Medium, "medium"),
            (ReasoningEffort::High, "high"),
        ] {
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
}
