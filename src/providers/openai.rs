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

use serde_json::{Map, Value, json};

use super::sse::SseEvent;
use super::types::*;

mod embeddings;
mod errors;
mod fast_chunk;
mod images;
pub mod responses;
pub use embeddings::{build_embeddings, embeddings_endpoint, parse_embeddings};
pub use errors::*;
pub use images::{
    build_image_edit, build_image_generation, images_edits_endpoint, images_generations_endpoint,
    parse_images,
};

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

/// A server's own route beside its OpenAI-compatible base URL: Ollama's `api/show`, LM Studio's
/// `api/v0/models/…`, llama.cpp's `props` (`http://host:11434/v1` → `http://host:11434/api/show`).
pub fn native_endpoint(base_url: &str, path: &str) -> String {
    let base = base_url.trim().trim_end_matches('/');
    let base = base.strip_suffix("/chat/completions").unwrap_or(base);
    let root = base.strip_suffix("/v1").unwrap_or(base);
    format!("{root}/{path}")
}

/// Ollama's native `POST /api/show`.
pub fn ollama_show_endpoint(base_url: &str) -> String {
    native_endpoint(base_url, "api/show")
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
/// - `tools` only when there are some, with `tool_choice` when one was asked for; `temperature`, `reasoning_effort` when set.
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
        if let Some(choice) = &req.params.tool_choice {
            body.insert("tool_choice".into(), tool_choice_json(choice));
        }
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
        self.decode(event, true)
    }

    /// [`Self::on_event`], with the plain-chunk reader (`fast`) or only the full one.
    fn decode(&mut self, event: &SseEvent, fast: bool) -> Result<Vec<ProviderEvent>, StreamParseError> {
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
        if let Some(plain) = fast.then(|| fast_chunk::read(data)).flatten() {
            if self.completion_id.is_empty()
                && let Some(id) = plain.id
            {
                self.completion_id = id.into_owned();
            }
            return Ok(plain
                .texts
                .into_iter()
                .flatten()
                .map(|t| ProviderEvent::TextDelta(t.into_owned()))
                .collect());
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
        cache_written_input_tokens: 0,
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
mod tests;

/// `tool_choice` in the Chat Completions spelling.
fn tool_choice_json(choice: &ToolChoice) -> Value {
    match choice {
        ToolChoice::Auto => Value::from("auto"),
        ToolChoice::None => Value::from("none"),
        ToolChoice::Required => Value::from("required"),
        ToolChoice::Tool(name) => json!({ "type": "function", "function": { "name": name } }),
    }
}
