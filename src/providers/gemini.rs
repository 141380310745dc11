//! Google Gemini API wire format (`generateContent`, `streamGenerateContent?alt=sse`, API-key auth).
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

use serde_json::{Map, Value};

use super::sse::SseEvent;
use super::types::*;

/// Default base URL of the Gemini API.
pub const DEFAULT_BASE_URL: &str = "https://generativelanguage.googleapis.com";

/// API version appended to a base URL that does not name one.
const API_VERSION: &str = "v1beta";

/// Prefix of the tool-call ids this module makes up (never sent back to Gemini).
pub const GENERATED_CALL_ID_PREFIX: &str = "call_";

/// Keys of Gemini's `Schema` object that [`sanitize_schema`] keeps.
const SCHEMA_PASSTHROUGH_KEYS: &[&str] = &[
    "title",
    "description",
    "pattern",
    "example",
    "default",
    "minItems",
    "maxItems",
    "minLength",
    "maxLength",
    "minProperties",
    "maxProperties",
    "minimum",
    "maximum",
];

/// `format` values the Gemini API accepts (`enum`, `date-time` for strings; numeric widths).
const SCHEMA_FORMATS: &[&str] = &["enum", "date-time", "float", "double", "int32", "int64"];

/// Deepest schema nesting (and `$ref` chain) followed before cutting off with `{}`.
const MAX_SCHEMA_DEPTH: usize = 32;

/// Most schema nodes one [`sanitize_schema`] run produces (later ones become `{}`).
const MAX_SCHEMA_NODES: usize = 10_000;

/// Longest stretch of a non-JSON error body quoted in a [`ProviderError`] message.
const MAX_QUOTED_BODY_CHARS: usize = 500;

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

/// The sanitized parameters, or `None` for a tool without arguments: Gemini rejects an `OBJECT`
/// schema whose `properties` is empty, and a declaration may simply omit `parameters`.
fn tool_parameters(schema: &Value) -> Option<Value> {
    let sanitized = sanitize_schema(schema);
    let has_properties =
        sanitized.get("properties").and_then(Value::as_object).is_some_and(|props| !props.is_empty());
    has_properties.then_some(sanitized)
}

/// Rewrites a JSON Schema into the OpenAPI-3.0 subset Gemini's `Schema` accepts.
///
/// * Kept: `type`, `format` (only `enum`, `date-time`, `float`, `double`, `int32`, `int64`; the
///   Gemini API rejects others such as `uri` or `email`), `title`, `description`, `nullable`,
///   `enum`, `properties`, `required` (only names present in `properties`), `propertyOrdering`,
///   `items`, `anyOf`, `minItems`, `maxItems`, `minLength`, `maxLength`, `minProperties`,
///   `maxProperties`, `minimum`, `maximum`, `pattern`, `example`, `default`.
/// * Converted: local `$ref`s (`#/$defs/...`, `#/definitions/...`) are inlined (a recursive
///   reference is cut to `{"type": "object"}`, unresolvable ones are dropped); `allOf` is merged
///   into one schema; `oneOf` becomes `anyOf`; a `null` member of `type: [...]`,
///   `anyOf`/`oneOf` or `enum` becomes `nullable: true`; a remaining
///   single `anyOf` member is inlined; several types become `anyOf`; `const` becomes a one-value
///   `enum`; `enum` values become strings (Gemini's `enum` is `string[]`, and only allowed on
///   strings: an `enum` on a number, integer or boolean is dropped and its values are appended to
///   the `description` instead, so the argument keeps its type); an untyped `enum` gets `string`,
///   untyped `properties` (`items`) get `object` (`array`); boolean schemas become `{}`.
/// * Dropped: everything else, notably `$schema`, `$id`, `$defs`, `definitions`, `$comment`,
///   `additionalProperties`, `patternProperties`, `unevaluatedProperties`, `propertyNames`,
///   `dependentRequired`, `if`/`then`/`else`, `not`, `const` (after conversion),
///   `exclusiveMinimum`, `exclusiveMaximum`, `multipleOf`, `uniqueItems`, `contains`,
///   `prefixItems`, `examples`, `readOnly`, `writeOnly`, `deprecated`, `contentEncoding`,
///   `contentMediaType`, and unsupported `format`s.
pub fn sanitize_schema(schema: &Value) -> Value {
    let empty = Map::new();
    let root = schema.as_object().unwrap_or(&empty);
    let mut defs = Map::new();
    for key in ["definitions", "$defs"] {
        if let Some(map) = root.get(key).and_then(Value::as_object) {
            defs.extend(map.iter().map(|(k, v)| (k.clone(), v.clone())));
        }
    }
    let mut ctx = SchemaCtx { defs: &defs, active: Vec::new(), budget: MAX_SCHEMA_NODES };
    Value::Object(ctx.sanitize(schema, 0))
}

/// State of one [`sanitize_schema`] run.
struct SchemaCtx<'a> {
    /// `$defs` / `definitions` of the root schema.
    defs: &'a Map<String, Value>,
    /// `$ref` targets being expanded on the current path (a repeat is a cycle).
    active: Vec<String>,
    /// Nodes still allowed, against exponential `$ref` fan-out.
    budget: usize,
}

impl SchemaCtx<'_> {
    /// Inlines `$ref` and `allOf` of one node (not of its children); returns the node and the
    /// names of the definitions it expanded.
    fn flatten(&mut self, node: &Value, depth: usize) -> (Map<String, Value>, Vec<String>) {
        let mut expanded = Vec::new();
        let Some(obj) = node.as_object() else { return (Map::new(), expanded) };
        if depth > MAX_SCHEMA_DEPTH {
            return (Map::new(), expanded);
        }
        let mut out = obj.clone();
        if let Some(reference) = out.remove("$ref") {
            let name = reference.as_str().and_then(ref_name);
            let target = name.as_ref().and_then(|n| self.defs.get(n).map(|t| (n.clone(), t)));
            match target {
                Some((name, _)) if self.active.contains(&name) || expanded.contains(&name) => {
                    // A recursive definition: cut here (recursive types are objects in practice).
                    out.entry("type").or_insert_with(|| Value::from("object"));
                }
                Some((name, target)) => {
                    expanded.push(name.clone());
                    self.active.push(name);
                    let (inner, inner_expanded) = self.flatten(target, depth + 1);
                    self.active.pop();
                    expanded.extend(inner_expanded);
                    merge_schema(&mut out, inner);
                }
                None => {}
            }
        }
        if let Some(Value::Array(members)) = out.remove("allOf") {
            for member in &members {
                self.active.extend(expanded.iter().cloned());
                let (inner, inner_expanded) = self.flatten(member, depth + 1);
                self.active.truncate(self.active.len().saturating_sub(expanded.len()));
                expanded.extend(inner_expanded);
                merge_schema(&mut out, inner);
            }
        }
        (out, expanded)
    }

    /// Sanitizes one schema node and, recursively, its children.
    fn sanitize(&mut self, node: &Value, depth: usize) -> Map<String, Value> {
        if depth > MAX_SCHEMA_DEPTH || self.budget == 0 {
            return Map::new();
        }
        self.budget -= 1;
        let (src, expanded) = self.flatten(node, depth);
        let pushed = expanded.len();
        self.active.extend(expanded);
        let out = self.sanitize_flat(&src, depth);
        self.active.truncate(self.active.len().saturating_sub(pushed));
        out
    }

    /// [`Self::sanitize`] of a node whose `$ref` / `allOf` are already inlined.
    fn sanitize_flat(&mut self, src: &Map<String, Value>, depth: usize) -> Map<String, Value> {
        let mut out = Map::new();
        let mut nullable = src.get("nullable").and_then(Value::as_bool) == Some(true);

        let mut types: Vec<String> = match src.get("type") {
            Some(Value::String(t)) => vec![t.clone()],
            Some(Value::Array(list)) => list.iter().filter_map(Value::as_str).map(str::to_string).collect(),
            _ => Vec::new(),
        };
        if types.iter().any(|t| t == "null") {
            nullable = true;
            types.retain(|t| t != "null");
        }

        let mut any_of = Vec::new();
        for key in ["anyOf", "oneOf"] {
            for member in src.get(key).and_then(Value::as_array).into_iter().flatten() {
                let member = self.sanitize(member, depth + 1);
                // `{"type": "null"}` comes out as `{"nullable": true}`: the whole union is nullable.
                if member.len() == 1 && member.get("nullable") == Some(&Value::Bool(true)) {
                    nullable = true;
                } else {
                    any_of.push(member);
                }
            }
        }

        match types.len() {
            0 => {}
            1 => {
                out.insert("type".into(), Value::String(types.remove(0)));
            }
            _ if any_of.is_empty() => {
                any_of = types
                    .into_iter()
                    .map(|t| Map::from_iter([("type".to_string(), Value::String(t))]))
                    .collect();
            }
            _ => {}
        }

        if let Some(format) = src.get("format").and_then(Value::as_str).filter(|f| SCHEMA_FORMATS.contains(f))
        {
            out.insert("format".into(), Value::from(format));
        }

        let mut enum_note = None;
        let enum_source = match (src.get("enum"), src.get("const")) {
            (Some(Value::Array(values)), _) => Some(values.clone()),
            (None, Some(value)) => Some(vec![value.clone()]),
            _ => None,
        };
        if let Some(values) = enum_source {
            let mut strings = Vec::new();
            for value in values {
                match value {
                    Value::Null => nullable = true,
                    Value::String(s) => strings.push(Value::String(s)),
                    Value::Bool(_) | Value::Number(_) => strings.push(Value::String(value.to_string())),
                    Value::Array(_) | Value::Object(_) => {}
                }
            }
            let declared = out.get("type").and_then(Value::as_str);
            if !strings.is_empty() && matches!(declared, None | Some("string")) {
                out.insert("enum".into(), Value::Array(strings));
                out.entry("type").or_insert_with(|| Value::from("string"));
            } else if !strings.is_empty() {
                // Gemini only takes `enum` on strings: keep the type, say the values in words.
                let listed: Vec<&str> = strings.iter().filter_map(Value::as_str).collect();
                enum_note = Some(format!("One of: {}.", listed.join(", ")));
            }
        }

        if let Some(props) = src.get("properties").and_then(Value::as_object) {
            let props: Map<String, Value> = props
                .iter()
                .map(|(name, p)| (name.clone(), Value::Object(self.sanitize(p, depth + 1))))
                .collect();
            if !props.is_empty() {
                let known = |name: &&Value| name.as_str().is_some_and(|n| props.contains_key(n));
                let names = |key: &str| -> Vec<Value> {
                    src.get(key)
                        .and_then(Value::as_array)
                        .into_iter()
                        .flatten()
                        .filter(known)
                        .cloned()
                        .collect()
                };
                let required = names("required");
                if !required.is_empty() {
                    out.insert("required".into(), Value::Array(required));
                }
                let ordering = names("propertyOrdering");
                if !ordering.is_empty() {
                    out.insert("propertyOrdering".into(), Value::Array(ordering));
                }
                out.insert("properties".into(), Value::Object(props));
                if !out.contains_key("type") && any_of.is_empty() {
                    out.insert("type".into(), Value::from("object"));
                }
            }
        }

        if let Some(items) = src.get("items").filter(|i| i.is_object()) {
            let items = self.sanitize(items, depth + 1);
            out.insert("items".into(), Value::Object(items));
            if !out.contains_key("type") && any_of.is_empty() {
                out.insert("type".into(), Value::from("array"));
            }
        }

        for key in SCHEMA_PASSTHROUGH_KEYS {
            if let Some(value) = src.get(*key) {
                out.insert((*key).to_string(), value.clone());
            }
        }
        if let Some(note) = enum_note {
            let description = match out.get("description").and_then(Value::as_str).filter(|d| !d.is_empty()) {
                Some(description) => format!("{description} {note}"),
                None => note,
            };
            out.insert("description".into(), Value::String(description));
        }

        if any_of.len() == 1 && !out.contains_key("type") {
            // `anyOf: [X, null]` (e.g. an optional field): inline X, the outer keys winning.
            for (key, value) in any_of.remove(0) {
                out.entry(key).or_insert(value);
            }
        } else if !any_of.is_empty() {
            out.insert("anyOf".into(), Value::Array(any_of.into_iter().map(Value::Object).collect()));
        }

        if nullable {
            out.insert("nullable".into(), Value::Bool(true));
        }
        out
    }
}

/// The definition name of a local `#/$defs/Name` or `#/definitions/Name` reference (JSON-pointer
/// escapes `~1`, `~0` undone).
fn ref_name(reference: &str) -> Option<String> {
    let name = reference.strip_prefix("#/$defs/").or_else(|| reference.strip_prefix("#/definitions/"))?;
    Some(name.replace("~1", "/").replace("~0", "~"))
}

/// Merges `other` into `into`: `properties` and `required` are unioned, other keys kept if set.
fn merge_schema(into: &mut Map<String, Value>, other: Map<String, Value>) {
    for (key, value) in other {
        match (key.as_str(), into.get_mut(&key), value) {
            ("properties", Some(Value::Object(existing)), Value::Object(extra)) => {
                for (name, prop) in extra {
                    existing.entry(name).or_insert(prop);
                }
            }
            ("required", Some(Value::Array(existing)), Value::Array(extra)) => {
                for name in extra {
                    if !existing.contains(&name) {
                        existing.push(name);
                    }
                }
            }
            (_, Some(_), _) => {}
            (_, None, value) => {
                into.insert(key, value);
            }
        }
    }
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
// Errors
// ---------------------------------------------------------------------------------------------

/// Classifies a non-2xx answer (`{"error": {code, message, status, details}}`, possibly wrapped
/// in an array); the delay comes from `retry-after`, else from a `google.rpc.RetryInfo` detail.
pub fn parse_error(status: u16, retry_after: Option<&str>, body: &[u8]) -> ProviderError {
    let header_delay = retry_after.and_then(parse_retry_after);
    let parsed: Option<Value> = serde_json::from_slice(body).ok();
    let error = parsed.as_ref().and_then(|v| match v {
        Value::Array(items) => items.first().and_then(|i| i.get("error")),
        _ => v.get("error"),
    });
    if let Some(error) = error.filter(|e| e.is_object()) {
        return error_from_status(error, status, header_delay);
    }
    let text = String::from_utf8_lossy(body);
    let text = text.trim();
    let message = if text.is_empty() {
        format!("Gemini answered HTTP {status} with an empty body")
    } else {
        let mut quoted: String = text.chars().take(MAX_QUOTED_BODY_CHARS).collect();
        if quoted.len() < text.len() {
            quoted.push('…');
        }
        quoted
    };
    let kind = format!("http_{status}");
    ProviderError {
        status,
        retryable: is_retryable(status, &kind),
        kind,
        message: redact_secrets(&message),
        retry_after_secs: header_delay,
    }
}

/// A [`ProviderError`] from a `google.rpc.Status` object (`status` 0: take the object's `code`).
fn error_from_status(error: &Value, status: u16, header_delay: Option<u64>) -> ProviderError {
    let code = error.get("code").and_then(Value::as_u64).and_then(|c| u16::try_from(c).ok());
    let status = if status != 0 { status } else { code.unwrap_or(0) };
    let kind = match error.get("status").and_then(Value::as_str).filter(|s| !s.is_empty()) {
        Some(kind) => kind.to_string(),
        None => format!("http_{status}"),
    };
    let message = match error.get("message").and_then(Value::as_str).filter(|m| !m.is_empty()) {
        Some(message) => message.to_string(),
        None => format!("Gemini reported {kind} without a message"),
    };
    let retry_after_secs = header_delay.or_else(|| retry_info_delay(error));
    ProviderError {
        status,
        retryable: is_retryable(status, &kind),
        kind,
        message: redact_secrets(&message),
        retry_after_secs,
    }
}

/// Whether trying again may help: rate limits, overload, server faults and timeouts.
fn is_retryable(status: u16, kind: &str) -> bool {
    matches!(status, 429 | 500 | 502 | 503 | 504)
        || matches!(kind, "RESOURCE_EXHAUSTED" | "UNAVAILABLE" | "INTERNAL" | "DEADLINE_EXCEEDED")
}

/// `retryDelay` of a `type.googleapis.com/google.rpc.RetryInfo` detail, in whole seconds.
fn retry_info_delay(error: &Value) -> Option<u64> {
    error.get("details").and_then(Value::as_array)?.iter().find_map(|detail| {
        let kind = detail.get("@type").and_then(Value::as_str)?;
        if !kind.ends_with("google.rpc.RetryInfo") {
            return None;
        }
        parse_duration_secs(detail.get("retryDelay").and_then(Value::as_str)?)
    })
}

/// A protobuf JSON `Duration` (`"30s"`, `"1.5s"`) rounded up to whole seconds.
fn parse_duration_secs(duration: &str) -> Option<u64> {
    ceil_secs(duration.trim().strip_suffix('s')?)
}

/// A `retry-after` header in delta-seconds (an HTTP date is ignored).
fn parse_retry_after(value: &str) -> Option<u64> {
    ceil_secs(value.trim())
}

/// Non-negative decimal seconds rounded up.
fn ceil_secs(text: &str) -> Option<u64> {
    if let Ok(secs) = text.parse::<u64>() {
        return Some(secs);
    }
    let secs = text.parse::<f64>().ok().filter(|s| s.is_finite() && *s >= 0.0)?;
    // Bounded to a day, so the float-to-int conversion cannot saturate surprisingly.
    Some(secs.min(86_400.0).ceil() as u64)
}

/// Replaces `key=<value>` query values with `key=***` and Google API keys (`AIza...`) with `***`.
pub fn redact_secrets(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    let lower = text.to_ascii_lowercase();
    let mut pos = 0;
    while let Some(found) = lower[pos..].find("key=") {
        let value_start = pos + found + "key=".len();
        out.push_str(&text[pos..value_start]);
        let value_len = text[value_start..].find(ends_query_value).unwrap_or(text.len() - value_start);
        if value_len > 0 {
            out.push_str("***");
        }
        pos = value_start + value_len;
    }
    out.push_str(&text[pos..]);
    redact_google_api_keys(&out)
}

/// Characters that end a query-string value inside free text.
fn ends_query_value(c: char) -> bool {
    c.is_whitespace() || matches!(c, '&' | '#' | '"' | '\'' | '<' | '>' | ',' | ';' | ')' | ']' | '}' | '\\')
}

/// Replaces `AIza` followed by 30+ key characters (a Google API key) with `***`.
fn redact_google_api_keys(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    let mut pos = 0;
    while let Some(found) = text[pos..].find("AIza") {
        let start = pos + found;
        let tail = &text[start + 4..];
        let key_len =
            tail.find(|c: char| !(c.is_ascii_alphanumeric() || c == '-' || c == '_')).unwrap_or(tail.len());
        out.push_str(&text[pos..start]);
        if key_len >= 30 {
            out.push_str("***");
        } else {
            out.push_str(&text[start..start + 4 + key_len]);
        }
        pos = start + 4 + key_len;
    }
    out.push_str(&text[pos..]);
    out
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
