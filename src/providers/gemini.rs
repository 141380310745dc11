//! Google Gemini API wire format (`generateContent`, `streamGenerateContent?alt=sse`, API-key
//! auth).
//!
//! Pure functions only: URLs, headers, request bodies, and decoders for the bytes Gemini answers
//! with. The HTTP client lives elsewhere.
//!
//! Decisions worth knowing (each follows Google's public Gemini API reference; see
//! `tests/fixtures/providers/gemini/README.md` for the pages):
//!
//! * **Auth.** The API key travels only in the `x-goog-api-key` header ([`headers`]); no URL built
//!   here ever carries `key=`, because URLs end up in logs. Error messages are scrubbed of
//!   `key=...` query values and of Google API-key-shaped tokens (`AIza...`) all the same.
//! * **Streaming.** With `alt=sse` every `data:` line is one complete `GenerateContentResponse`
//!   (events end with `\r\n\r\n`); there is no `[DONE]`. The finish reason is therefore only
//!   reported by [`StreamDecoder::finish`], once the body has ended: older models repeat
//!   `finishReason` on every chunk, so seeing it is not proof that nothing follows.
//! * **Tool-call ids.** Gemini usually sends no `functionCall.id`. The decoder then makes one up:
//!   `call_<responseId>_<n>` (or `call_<n>` when the chunk has no `responseId`), `n` counting the
//!   calls of that response from 0. It is deterministic, so a streamed and a non-streamed decode of
//!   the same answer agree, and `responseId` keeps it unique within a conversation. Ids starting
//!   with `call_` are treated as made up (this also covers OpenAI's `call_...` ids after a provider
//!   switch) and are not sent back to Gemini; any other id is echoed on both the `functionCall`
//!   and the `functionResponse`.
//! * **Thought signatures** are opaque and go back byte for byte: a `functionCall` part keeps its
//!   own `thoughtSignature` ([`Part::ToolCall::signature`]), the one Gemini validates strictly. A
//!   signature Gemini put on a text or thought part is reported as
//!   [`ProviderEvent::ThoughtSignature`] and replayed on the thought it is attached to
//!   (`"thought": true`, with an empty `text` when there was no visible summary). [`Part::Text`]
//!   has no signature field, so a signature that came on an answer-text part returns on a
//!   thought part instead; Gemini documents text signatures as recommended, not validated.
//! * **Tool results** are `functionResponse` parts in a `user` turn, with
//!   `response: {"output": <text>}`, or `{"error": <text>}` when the tool failed: the keys the
//!   `FunctionResponse.response` reference recommends.
//! * **Schemas.** `FunctionDeclaration.parameters` takes Gemini's OpenAPI-3.0 subset, so tool
//!   schemas are rewritten by [`sanitize_schema`]: see there for what is kept, converted and
//!   dropped.
//! * **Thinking.** `thinking_budget` becomes `thinkingConfig.thinkingBudget` with
//!   `includeThoughts: true` (false for a budget of 0, which turns thinking off). Without a
//!   budget, `reasoning_effort` maps to a budget (low 1024, medium 8192, high 24576 tokens),
//!   since `thinkingBudget` is understood by both the 2.5 and the 3 series. With neither, no
//!   `thinkingConfig` is sent (models that cannot think reject one).
//! * **Usage.** `input = promptTokenCount + toolUsePromptTokenCount` (the prompt count already
//!   includes cached tokens), `output = candidatesTokenCount + thoughtsTokenCount`,
//!   `cached_input = cachedContentTokenCount`. Missing counts are 0 (proto3 JSON omits zeros).
//!   A [`ProviderEvent::Usage`] is emitted whenever the counts change.

use std::fmt::Write as _;

use serde_json::{Map, Value, json};

use super::sse::SseEvent;
use super::types::*;

mod embeddings;
mod errors;
mod images;
mod schema;

pub use embeddings::{build_embeddings, embeddings_endpoint, parse_embeddings};
use errors::error_from_status;
#[cfg(test)]
use errors::*;
pub use errors::{parse_error, redact_secrets};
pub use images::{build_image_request, parse_images};
pub use schema::sanitize_schema;

/// Default base URL of the Gemini API.
pub const DEFAULT_BASE_URL: &str = "https://generativelanguage.googleapis.com";

/// API version appended to a base URL that does not name one.
const API_VERSION: &str = "v1beta";

/// Prefix of the tool-call ids this module makes up (never sent back to Gemini).
pub const GENERATED_CALL_ID_PREFIX: &str = "call_";

// ---------------------------------------------------------------------------------------------
// URLs and headers
// ---------------------------------------------------------------------------------------------

/// URL of `generateContent` (or `streamGenerateContent?alt=sse` when `stream`) for `model`.
pub fn endpoint(base_url: &str, model: &str, stream: bool) -> String {
    let method = if stream { "streamGenerateContent?alt=sse" } else { "generateContent" };
    format!("{}/{}:{method}", api_root(base_url), model_path(model))
}

/// Request headers: the API key (header only, never the URL) and the JSON content type.
pub fn headers(api_key: &str) -> Vec<(&'static str, String)> {
    vec![("x-goog-api-key", api_key.trim().to_string()), ("content-type", "application/json".to_string())]
}

/// URL listing the models (`GET`; one page of up to 1000, which covers Gemini's catalogue).
pub fn models_endpoint(base_url: &str) -> String {
    format!("{}/models?pageSize=1000", api_root(base_url))
}

/// URL of `countTokens` for `model`.
pub fn count_tokens_endpoint(base_url: &str, model: &str) -> String {
    format!("{}/{}:countTokens", api_root(base_url), model_path(model))
}

/// `https://host[/prefix]/v1beta`: the base with a version segment, added when it has none.
fn api_root(base_url: &str) -> String {
    let trimmed = base_url.trim().trim_end_matches('/');
    let base = if trimmed.is_empty() { DEFAULT_BASE_URL } else { trimmed };
    let last = base.rsplit('/').next().unwrap_or_default();
    if is_version_segment(last) { base.to_string() } else { format!("{base}/{API_VERSION}") }
}

/// `v1`, `v1beta`, `v1alpha`, `v2`...
fn is_version_segment(segment: &str) -> bool {
    let mut chars = segment.chars();
    chars.next() == Some('v') && chars.next().is_some_and(|c| c.is_ascii_digit())
}

/// `models/<id>` (or `tunedModels/<id>`) with the id percent-encoded as one path segment.
fn model_path(model: &str) -> String {
    let model = model.trim().trim_start_matches('/');
    if let Some(rest) = model.strip_prefix("tunedModels/") {
        return format!("tunedModels/{}", encode_path_segment(rest));
    }
    let bare = model.strip_prefix("models/").unwrap_or(model);
    format!("models/{}", encode_path_segment(bare))
}

/// Percent-encodes everything but RFC 3986 unreserved characters (so `:`, `/`, `?` are escaped).
fn encode_path_segment(segment: &str) -> String {
    let mut out = String::with_capacity(segment.len());
    for byte in segment.bytes() {
        if byte.is_ascii_alphanumeric() || matches!(byte, b'-' | b'.' | b'_' | b'~') {
            out.push(char::from(byte));
        } else {
            let _ = write!(out, "%{byte:02X}");
        }
    }
    out
}

/// The model id without a `models/` prefix.
fn bare_model(model: &str) -> &str {
    let model = model.trim().trim_start_matches('/');
    model.strip_prefix("models/").unwrap_or(model)
}

// ---------------------------------------------------------------------------------------------
// Requests
// ---------------------------------------------------------------------------------------------

/// The JSON body of a `generateContent` / `streamGenerateContent` call.
pub fn build_request(req: &ChatRequest) -> Value {
    let mut body = Map::new();
    body.insert("contents".into(), Value::Array(build_contents(&req.messages)));
    if let Some(system) = system_instruction(req) {
        body.insert("systemInstruction".into(), system);
    }
    if let Some(tools) = build_tools(&req.tools) {
        body.insert("tools".into(), tools);
        if let Some(choice) = &req.params.tool_choice {
            body.insert("toolConfig".into(), tool_config(choice));
        }
    }
    if let Some(config) = generation_config(&req.params) {
        body.insert("generationConfig".into(), config);
    }
    Value::Object(body)
}

/// The JSON body of a `countTokens` call (the whole request, so system prompt and tools count).
pub fn build_count_tokens(req: &ChatRequest) -> Value {
    let mut inner = Map::new();
    inner.insert("model".into(), Value::String(format!("models/{}", bare_model(&req.model))));
    inner.insert("contents".into(), Value::Array(build_contents(&req.messages)));
    if let Some(system) = system_instruction(req) {
        inner.insert("systemInstruction".into(), system);
    }
    if let Some(tools) = build_tools(&req.tools) {
        inner.insert("tools".into(), tools);
    }
    object([("generateContentRequest", Value::Object(inner))])
}

/// A JSON object from key/value pairs.
fn object<const N: usize>(pairs: [(&str, Value); N]) -> Value {
    Value::Object(pairs.into_iter().map(|(k, v)| (k.to_string(), v)).collect())
}

/// `systemInstruction: {parts: [{text}]}` when there is a non-empty system prompt.
fn system_instruction(req: &ChatRequest) -> Option<Value> {
    let text = req.system.as_deref().filter(|s| !s.trim().is_empty())?;
    Some(object([("parts", Value::Array(vec![object([("text", Value::from(text))])]))]))
}

/// `contents`: one `Content` per turn, adjacent turns of the same Gemini role merged.
fn build_contents(messages: &[ChatMessage]) -> Vec<Value> {
    let mut turns: Vec<(&'static str, Vec<Value>)> = Vec::new();
    for message in messages {
        let role = match message.role {
            ChatRole::User | ChatRole::Tool => "user",
            ChatRole::Assistant => "model",
        };
        let parts: Vec<Value> = message.parts.iter().filter_map(|p| build_part(p, message.role)).collect();
        if parts.is_empty() {
            continue;
        }
        match turns.last_mut() {
            Some((last_role, last_parts)) if *last_role == role => last_parts.extend(parts),
            _ => turns.push((role, parts)),
        }
    }
    turns
        .into_iter()
        .map(|(role, parts)| object([("role", Value::from(role)), ("parts", Value::Array(parts))]))
        .collect()
}

/// One Gemini `Part`, or `None` for content Gemini cannot take (empty text, foreign thoughts).
fn build_part(part: &Part, role: ChatRole) -> Option<Value> {
    match part {
        Part::Text { text } => (!text.is_empty()).then(|| object([("text", Value::from(text.as_str()))])),
        Part::Image { mime, data_base64 } | Part::Document { mime, data_base64, .. } => Some(object([(
            "inlineData",
            object([("mimeType", Value::from(mime.as_str())), ("data", Value::from(data_base64.as_str()))]),
        )])),
        Part::Thought { text, signature, .. } => {
            // Thoughts only exist in model turns; Anthropic `redacted` data means nothing here.
            if role != ChatRole::Assistant {
                return None;
            }
            let signature = signature.as_deref().filter(|s| !s.is_empty());
            if text.is_empty() && signature.is_none() {
                return None;
            }
            let mut out = Map::new();
            out.insert("text".into(), Value::from(text.as_str()));
            out.insert("thought".into(), Value::Bool(true));
            if let Some(signature) = signature {
                out.insert("thoughtSignature".into(), Value::from(signature));
            }
            Some(Value::Object(out))
        }
        Part::ToolCall { id, name, arguments, signature } => {
            let mut call = Map::new();
            call.insert("name".into(), Value::from(name.as_str()));
            call.insert("args".into(), call_args(arguments));
            if is_provider_id(id) {
                call.insert("id".into(), Value::from(id.as_str()));
            }
            let mut out = Map::new();
            out.insert("functionCall".into(), Value::Object(call));
            if let Some(signature) = signature.as_deref().filter(|s| !s.is_empty()) {
                out.insert("thoughtSignature".into(), Value::from(signature));
            }
            Some(Value::Object(out))
        }
        Part::ToolResult { call_id, name, content, is_error } => {
            let key = if *is_error { "error" } else { "output" };
            let mut response = Map::new();
            response.insert("name".into(), Value::from(name.as_str()));
            if is_provider_id(call_id) {
                response.insert("id".into(), Value::from(call_id.as_str()));
            }
            response.insert("response".into(), object([(key, Value::from(content.as_str()))]));
            Some(object([("functionResponse", Value::Object(response))]))
        }
    }
}

/// Whether `id` came from Gemini (and so must be echoed) rather than from [`StreamDecoder`].
fn is_provider_id(id: &str) -> bool {
    !id.is_empty() && !id.starts_with(GENERATED_CALL_ID_PREFIX)
}

/// `functionCall.args` must be an object: `null` becomes `{}`, other values `{"value": v}`.
fn call_args(arguments: &Value) -> Value {
    match arguments {
        Value::Object(_) => arguments.clone(),
        Value::Null => Value::Object(Map::new()),
        other => object([("value", other.clone())]),
    }
}

/// `tools: [{functionDeclarations: [...]}]`, or `None` when no tools are offered.
fn build_tools(tools: &[ToolSpec]) -> Option<Value> {
    if tools.is_empty() {
        return None;
    }
    let declarations = tools
        .iter()
        .map(|tool| {
            let mut decl = Map::new();
            decl.insert("name".into(), Value::from(tool.name.as_str()));
            decl.insert("description".into(), Value::from(tool.description.as_str()));
            if let Some(parameters) = tool_parameters(&tool.parameters) {
                decl.insert("parameters".into(), parameters);
            }
            Value::Object(decl)
        })
        .collect();
    Some(Value::Array(vec![object([("functionDeclarations", Value::Array(declarations))])]))
}

/// `toolConfig` for a tool choice: Gemini's function-calling mode, with the one allowed name.
fn tool_config(choice: &ToolChoice) -> Value {
    let config = match choice {
        ToolChoice::Auto => json!({ "mode": "AUTO" }),
        ToolChoice::None => json!({ "mode": "NONE" }),
        ToolChoice::Required => json!({ "mode": "ANY" }),
        ToolChoice::Tool(name) => json!({ "mode": "ANY", "allowedFunctionNames": [name] }),
    };
    json!({ "functionCallingConfig": config })
}

/// The sanitized parameters, or `None` for a tool without arguments: Gemini rejects an `OBJECT`
/// schema whose `properties` is empty, and a declaration may simply omit `parameters`.
fn tool_parameters(schema: &Value) -> Option<Value> {
    let sanitized = sanitize_schema(schema);
    let has_properties =
        sanitized.get("properties").and_then(Value::as_object).is_some_and(|props| !props.is_empty());
    has_properties.then_some(sanitized)
}

/// `generationConfig`, or `None` when every setting is left to Gemini.
fn generation_config(params: &GenParams) -> Option<Value> {
    let mut config = Map::new();
    if let Some(temperature) = params.temperature.filter(|t| t.is_finite()) {
        // Through the shortest decimal form, so 0.7f32 is sent as 0.7, not 0.699999988079071.
        let exact = temperature.to_string().parse::<f64>().unwrap_or(f64::from(temperature));
        config.insert("temperature".into(), Value::from(exact));
    }
    if let Some(max) = params.max_output_tokens {
        config.insert("maxOutputTokens".into(), Value::from(max));
    }
    let budget = params.thinking_budget.or(params.reasoning_effort.map(|effort| match effort {
        ReasoningEffort::Low => 1024,
        ReasoningEffort::Medium => 8192,
        ReasoningEffort::High => 24576,
    }));
    if let Some(budget) = budget {
        config.insert(
            "thinkingConfig".into(),
            object([("thinkingBudget", Value::from(budget)), ("includeThoughts", Value::Bool(budget != 0))]),
        );
    }
    (!config.is_empty()).then_some(Value::Object(config))
}

// ---------------------------------------------------------------------------------------------
// Responses
// ---------------------------------------------------------------------------------------------

/// Turns the `alt=sse` events of one `streamGenerateContent` call into [`ProviderEvent`]s.
#[derive(Debug, Default)]
pub struct StreamDecoder {
    /// The last `finishReason` seen (the stream is complete once the body ends).
    finish_reason: Option<String>,
    /// The prompt was blocked (`promptFeedback.blockReason`).
    blocked: bool,
    /// An `{"error": ...}` chunk was reported.
    errored: bool,
    /// Some `functionCall` part was seen (a `STOP` then means [`FinishReason::ToolCalls`]).
    saw_tool_call: bool,
    /// Calls seen so far, for made-up ids.
    calls: u64,
    /// The response's `responseId`, for made-up ids.
    response_id: Option<String>,
    /// The last usage reported, to report only changes.
    last_usage: Option<Usage>,
    /// [`Self::finish`] already ran.
    done: bool,
}

impl StreamDecoder {
    /// A decoder for one response.
    pub fn new() -> Self {
        Self::default()
    }

    /// Decodes one SSE event (one `GenerateContentResponse` chunk, or an `{"error": ...}`).
    pub fn on_event(&mut self, ev: &SseEvent) -> Result<Vec<ProviderEvent>, StreamParseError> {
        let data = ev.data.trim();
        if data.is_empty() {
            return Ok(Vec::new());
        }
        let value: Value = serde_json::from_str(data)
            .map_err(|e| StreamParseError(format!("Gemini sent a chunk that is not JSON: {e}")))?;
        let mut out = Vec::new();
        match &value {
            // The JSON-array framing of non-SSE streams, tolerated.
            Value::Array(items) => {
                for item in items {
                    self.on_chunk(item, &mut out)?;
                }
            }
            _ => self.on_chunk(&value, &mut out)?,
        }
        Ok(out)
    }

    /// Ends the stream: nothing after a reported error, else the [`ProviderEvent::Finish`] if a
    /// finish reason (or a blocked prompt) was seen, else an error (the stream was cut short).
    pub fn finish(&mut self) -> Result<Vec<ProviderEvent>, StreamParseError> {
        if self.done {
            return Ok(Vec::new());
        }
        self.done = true;
        if self.errored {
            // The error event ended the response, even after a (repeated) finishReason.
            return Ok(Vec::new());
        }
        if self.blocked {
            return Ok(vec![ProviderEvent::Finish(FinishReason::ContentFilter)]);
        }
        if let Some(reason) = self.finish_reason.as_deref() {
            return Ok(vec![ProviderEvent::Finish(map_finish_reason(reason, self.saw_tool_call))]);
        }
        Err(StreamParseError("the Gemini stream ended without a finishReason (truncated)".into()))
    }

    /// Decodes one `GenerateContentResponse` (or error) object.
    fn on_chunk(&mut self, chunk: &Value, out: &mut Vec<ProviderEvent>) -> Result<(), StreamParseError> {
        let Some(obj) = chunk.as_object() else {
            return Err(StreamParseError("a Gemini chunk is not a JSON object".into()));
        };
        if let Some(error) = obj.get("error") {
            self.errored = true;
            out.push(ProviderEvent::Error(error_from_status(error, 0, None)));
            return Ok(());
        }
        if self.response_id.is_none() {
            self.response_id = obj.get("responseId").and_then(Value::as_str).map(str::to_string);
        }
        let candidate = obj.get("candidates").and_then(Value::as_array).and_then(|c| c.first());
        if let Some(candidate) = candidate {
            let parts = candidate.pointer("/content/parts").and_then(Value::as_array);
            for part in parts.into_iter().flatten() {
                self.on_part(part, out)?;
            }
            if let Some(reason) = candidate.get("finishReason").and_then(Value::as_str) {
                self.finish_reason = Some(reason.to_string());
            }
        }
        if let Some(usage) = obj.get("usageMetadata").filter(|u| u.is_object()) {
            let usage = usage_from(usage);
            if self.last_usage != Some(usage) {
                self.last_usage = Some(usage);
                out.push(ProviderEvent::Usage(usage));
            }
        }
        if let Some(feedback) = obj.get("promptFeedback") {
            let reason = feedback.get("blockReason").and_then(Value::as_str);
            if let Some(reason) = reason.filter(|r| *r != "BLOCK_REASON_UNSPECIFIED")
                && !self.blocked
            {
                self.blocked = true;
                let mut message = format!("Gemini blocked the prompt ({reason})");
                if let Some(detail) = feedback.get("blockReasonMessage").and_then(Value::as_str) {
                    message.push_str(": ");
                    message.push_str(detail);
                }
                out.push(ProviderEvent::Error(ProviderError {
                    status: 0,
                    kind: "prompt_blocked".into(),
                    message: redact_secrets(&message),
                    retryable: false,
                    retry_after_secs: None,
                }));
            }
        }
        Ok(())
    }

    /// Decodes one `Part` of the candidate's content.
    fn on_part(&mut self, part: &Value, out: &mut Vec<ProviderEvent>) -> Result<(), StreamParseError> {
        let signature = part.get("thoughtSignature").and_then(Value::as_str).filter(|s| !s.is_empty());
        if let Some(call) = part.get("functionCall") {
            let name = call
                .get("name")
                .and_then(Value::as_str)
                .filter(|n| !n.is_empty())
                .ok_or_else(|| StreamParseError("a Gemini functionCall has no name".into()))?;
            let arguments = match call.get("args") {
                None | Some(Value::Null) => Value::Object(Map::new()),
                Some(args) => args.clone(),
            };
            let id = match call.get("id").and_then(Value::as_str).filter(|id| !id.is_empty()) {
                Some(id) => id.to_string(),
                None => self.made_up_call_id(),
            };
            self.calls += 1;
            self.saw_tool_call = true;
            out.push(ProviderEvent::ToolCall {
                id,
                name: name.to_string(),
                arguments,
                signature: signature.map(str::to_string),
            });
            return Ok(());
        }
        if let Some(text) = part.get("text").and_then(Value::as_str)
            && !text.is_empty()
        {
            if part.get("thought").and_then(Value::as_bool) == Some(true) {
                out.push(ProviderEvent::ThoughtDelta(text.to_string()));
            } else {
                out.push(ProviderEvent::TextDelta(text.to_string()));
            }
        }
        // A signature on any other part (text, thought, empty text, inline data...).
        if let Some(signature) = signature {
            out.push(ProviderEvent::ThoughtSignature(signature.to_string()));
        }
        Ok(())
    }

    /// `call_<responseId>_<n>`, or `call_<n>` without a `responseId`.
    fn made_up_call_id(&self) -> String {
        match self.response_id.as_deref().filter(|r| !r.is_empty()) {
            Some(response_id) => format!("{GENERATED_CALL_ID_PREFIX}{response_id}_{}", self.calls),
            None => format!("{GENERATED_CALL_ID_PREFIX}{}", self.calls),
        }
    }
}

/// Maps Gemini's `finishReason`; `STOP` after function calls means the model wants results.
fn map_finish_reason(reason: &str, saw_tool_call: bool) -> FinishReason {
    match reason {
        "STOP" if saw_tool_call => FinishReason::ToolCalls,
        "STOP" => FinishReason::Stop,
        "MAX_TOKENS" => FinishReason::Length,
        "SAFETY"
        | "RECITATION"
        | "BLOCKLIST"
        | "PROHIBITED_CONTENT"
        | "SPII"
        | "IMAGE_SAFETY"
        | "IMAGE_PROHIBITED_CONTENT"
        | "IMAGE_RECITATION" => FinishReason::ContentFilter,
        other => FinishReason::Other(other.to_string()),
    }
}

/// [`Usage`] from a `usageMetadata` object.
fn usage_from(meta: &Value) -> Usage {
    let count = |key: &str| meta.get(key).and_then(Value::as_u64).unwrap_or(0);
    Usage {
        input_tokens: count("promptTokenCount").saturating_add(count("toolUsePromptTokenCount")),
        output_tokens: count("candidatesTokenCount").saturating_add(count("thoughtsTokenCount")),
        cached_input_tokens: count("cachedContentTokenCount"),
        cache_written_input_tokens: 0,
    }
}

/// Decodes a non-streamed `generateContent` response body.
pub fn parse_response(body: &[u8]) -> Result<Vec<ProviderEvent>, StreamParseError> {
    let value: Value = serde_json::from_slice(body)
        .map_err(|e| StreamParseError(format!("Gemini's response is not JSON: {e}")))?;
    let mut decoder = StreamDecoder::new();
    let mut out = Vec::new();
    match &value {
        Value::Array(items) => {
            for item in items {
                decoder.on_chunk(item, &mut out)?;
            }
        }
        _ => decoder.on_chunk(&value, &mut out)?,
    }
    out.extend(decoder.finish()?);
    Ok(out)
}

// ---------------------------------------------------------------------------------------------
// Models and token counting
// ---------------------------------------------------------------------------------------------

/// Bare ids (`gemini-2.5-flash`) of the listed models that support `generateContent`.
pub fn parse_models(body: &[u8]) -> Result<Vec<String>, StreamParseError> {
    let value = parse_ok_body(body, "model list")?;
    let models = match value.get("models") {
        None | Some(Value::Null) => return Ok(Vec::new()),
        Some(Value::Array(models)) => models,
        Some(_) => return Err(StreamParseError("Gemini's model list has a non-array `models`".into())),
    };
    Ok(models
        .iter()
        .filter(|m| {
            let methods = m.get("supportedGenerationMethods").and_then(Value::as_array);
            methods.into_iter().flatten().any(|method| method.as_str() == Some("generateContent"))
        })
        .filter_map(|m| m.get("name").and_then(Value::as_str))
        .map(|name| name.strip_prefix("models/").unwrap_or(name).to_string())
        .filter(|name| !name.is_empty())
        .collect())
}

/// `totalTokens` of a `countTokens` answer (absent means 0: proto3 JSON omits zeros).
pub fn parse_count_tokens(body: &[u8]) -> Result<u64, StreamParseError> {
    let value = parse_ok_body(body, "token count")?;
    match value.get("totalTokens") {
        None => Ok(0),
        Some(total) => total
            .as_u64()
            .ok_or_else(|| StreamParseError("Gemini's totalTokens is not a non-negative integer".into())),
    }
}

/// Parses a 2xx body that must be a JSON object without an `error`.
fn parse_ok_body(body: &[u8], what: &str) -> Result<Value, StreamParseError> {
    let value: Value = serde_json::from_slice(body)
        .map_err(|e| StreamParseError(format!("Gemini's {what} is not JSON: {e}")))?;
    if !value.is_object() {
        return Err(StreamParseError(format!("Gemini's {what} is not a JSON object")));
    }
    if let Some(error) = value.get("error") {
        let error = error_from_status(error, 0, None);
        return Err(StreamParseError(format!(
            "Gemini answered the {what} with {}: {}",
            error.kind, error.message
        )));
    }
    Ok(value)
}

#[cfg(test)]
mod tests;
