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
mod tests {
    use super::super::sse::SseParser;
    use super::*;
    use serde_json::json;

    const TEXT_SSE: &str = include_str!("../../tests/fixtures/providers/gemini/text.sse");
    const MANY_SSE: &str = include_str!("../../tests/fixtures/providers/gemini/many_small_chunks.sse");
    const THINKING_SSE: &str = include_str!("../../tests/fixtures/providers/gemini/thinking.sse");
    const CALLS_SSE: &str = include_str!("../../tests/fixtures/providers/gemini/function_calls_parallel.sse");
    const ERROR_SSE: &str = include_str!("../../tests/fixtures/providers/gemini/error_midstream.sse");
    const TRUNCATED_SSE: &str = include_str!("../../tests/fixtures/providers/gemini/truncated.sse");
    const NONSTREAM_JSON: &str = include_str!("../../tests/fixtures/providers/gemini/nonstream.json");
    const ERROR_400_JSON: &str = include_str!("../../tests/fixtures/providers/gemini/error_400.json");
    const ERROR_429_JSON: &str = include_str!("../../tests/fixtures/providers/gemini/error_429.json");
    const MODELS_JSON: &str = include_str!("../../tests/fixtures/providers/gemini/models.json");
    const COUNT_TOKENS_JSON: &str = include_str!("../../tests/fixtures/providers/gemini/count_tokens.json");

    /// The `thoughtSignature` of `thinking.sse`.
    const SIG_THINKING: &str = "RCCCPP3m8cJrMPkOx90B5Ih1NKIPCw0Ew27YDnHg/XewdnDrlAvVM1+XParYYZuR/8kR9XzO1Fi7vyzgN1PJvfoP8BadyVdWdAZmds+wtOuJAsRCadoc9rpm0/i21LEAqeoOdVpcLoIQJCoI5wePf4k4XrCUI1VRglaLluik/vI6DJ/Fr9dghDeBa90KcwnLShJS5Npw5nIPyqTaHphAbBicJCeemFHVgUIE";
    /// The `thoughtSignature` on the first `functionCall` of `function_calls_parallel.sse`.
    const SIG_CALL: &str = "HC4ruFadgGwSUdzJvuOJEg667qPC2FRaeHYMWqZYRbhd5NS6tbnkUszsf/qO/7Xo7LPp+XGmVYn1npvQn2r6uyauBGE2HhmLdDZFiH1rHtgQHbm4WH8MKjoiDBQKv4JBUF4AxRZ+TRICsDmSrPoPneUXh81O8nMvoTQM5UHJ+adJroSG1glHHYERQ1JXMeh2EH534yWAKXS4g9iOAk0SxNFSOCx7NDMKXXY1bwzt6J7CbGve2Qoa1lww9bsJPLuUvp0J0zM1nGUI5x7S+O1qJQKRDL6cJ3D7Yju/yO1HsMo+gj4+Kas=";
    /// The `thoughtSignature` of `nonstream.json`.
    const SIG_NONSTREAM: &str = "eUK98iEG8IR3YvDzy012TccHIFEVmg+J8sbayuNEuzESRf1vhN+a18Wz0HasDo9TpzVsiJE/IPb3LbAi0k0KltrUPBYXwamOeBKeAyc3EGXQlYZPFa2guEbBwOvFNIrceZrfhJutBdShCsBEHqrutLSO+gsfCr2A6ZijWro=";

    type Decoded = (Vec<ProviderEvent>, Result<Vec<ProviderEvent>, StreamParseError>);

    fn text(s: &str) -> ProviderEvent {
        ProviderEvent::TextDelta(s.into())
    }

    fn thought(s: &str) -> ProviderEvent {
        ProviderEvent::ThoughtDelta(s.into())
    }

    fn usage(input: u64, output: u64, cached: u64) -> ProviderEvent {
        ProviderEvent::Usage(Usage {
            input_tokens: input,
            output_tokens: output,
            cached_input_tokens: cached,
        })
    }

    fn finish(reason: FinishReason) -> Result<Vec<ProviderEvent>, StreamParseError> {
        Ok(vec![ProviderEvent::Finish(reason)])
    }

    /// Split points for `len` bytes from a xorshift generator: pieces of 1..=`max` bytes.
    fn split_points(len: usize, seed: u64, max: usize) -> Vec<usize> {
        let mut state = seed.wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1;
        let mut points = Vec::new();
        let mut at = 0;
        loop {
            state ^= state << 13;
            state ^= state >> 7;
            state ^= state << 17;
            at += 1 + (state % max as u64) as usize;
            if at >= len {
                return points;
            }
            points.push(at);
        }
    }

    /// Feeds `body` cut at `points` through the SSE parser and a decoder.
    fn decode_split(body: &[u8], points: &[usize]) -> Decoded {
        let mut parser = SseParser::new();
        let mut decoder = StreamDecoder::new();
        let mut events = Vec::new();
        let mut start = 0;
        for end in points.iter().copied().chain([body.len()]) {
            for ev in parser.push(&body[start..end]) {
                events.extend(decoder.on_event(&ev).unwrap());
            }
            start = end;
        }
        (events, decoder.finish())
    }

    /// Decodes `body` whole, byte by byte and at 30 pseudo-random cuts; all must agree.
    fn decode_every_way(body: &str) -> Decoded {
        let bytes = body.as_bytes();
        let whole = decode_split(bytes, &[]);
        let every_byte: Vec<usize> = (1..bytes.len()).collect();
        assert_eq!(decode_split(bytes, &every_byte), whole, "byte by byte");
        for seed in 1..=30u64 {
            let max = [3, 17, 64, 200, 1000][(seed % 5) as usize];
            let points = split_points(bytes.len(), seed, max);
            assert_eq!(decode_split(bytes, &points), whole, "seed {seed}, pieces up to {max} bytes");
        }
        whole
    }

    /// Decodes single `data:` payloads (tests of the decoder alone).
    fn decode_chunks(chunks: &[Value]) -> Decoded {
        let mut decoder = StreamDecoder::new();
        let mut events = Vec::new();
        for chunk in chunks {
            let ev = SseEvent { event: "message".into(), data: chunk.to_string(), id: None };
            events.extend(decoder.on_event(&ev).unwrap());
        }
        (events, decoder.finish())
    }

    fn candidate_chunk(parts: Value, finish_reason: Option<&str>) -> Value {
        let mut candidate = json!({"content": {"parts": parts, "role": "model"}, "index": 0});
        if let Some(reason) = finish_reason {
            candidate["finishReason"] = json!(reason);
        }
        json!({"candidates": [candidate]})
    }

    // ---- fixtures: framing ------------------------------------------------------------------

    #[test]
    fn sse_fixtures_use_crlf_framing_like_the_api() {
        for (name, body, events) in [
            ("text", TEXT_SSE, 4),
            ("many_small_chunks", MANY_SSE, 124),
            ("thinking", THINKING_SSE, 5),
            ("function_calls_parallel", CALLS_SSE, 2),
            ("error_midstream", ERROR_SSE, 3),
        ] {
            assert!(body.ends_with("}\r\n\r\n"), "{name}");
            assert!(!body.replace("\r\n", "").contains(['\n', '\r']), "{name}: a bare LF or CR");
            let pieces: Vec<&str> = body.split("\r\n\r\n").filter(|p| !p.is_empty()).collect();
            assert_eq!(pieces.len(), events, "{name}");
            assert!(pieces.iter().all(|p| p.starts_with("data: {")), "{name}");
        }
        assert!(MANY_SSE.matches("data: ").count() >= 100);
        assert!(!TRUNCATED_SSE.ends_with("\r\n\r\n"));
    }

    // ---- fixtures: streams ------------------------------------------------------------------

    #[test]
    fn text_stream() {
        let (events, end) = decode_every_way(TEXT_SSE);
        assert_eq!(
            events,
            vec![
                text("The sky looks blue because sunlight is scattered by the gases"),
                usage(9, 0, 0),
                text(" in the atmosphere. Shorter wavelengths (≈450 nm, blue) scatter"),
                text(" much more than longer ones (≈700 nm, red) — this is Rayleigh scattering,"),
                text(
                    " whose strength goes as 1/λ⁴.\n\nAt sunset the light crosses more air, so the blue is \
                     scattered away before it reaches you."
                ),
                usage(9, 58, 0),
            ]
        );
        assert_eq!(end, finish(FinishReason::Stop));
    }

    #[test]
    fn many_small_chunks_stream() {
        const PARA: &str = "Server-sent events deliver a response as a series of small pieces, and a client that \
            renders them as they arrive gives the reader something to look at long before the model has finished. \
            Each piece here is a single word, so the decoder sees well over one hundred separate events, and every \
            one of them must be turned into exactly one text delta, in order, with nothing lost and nothing \
            duplicated. The usage numbers repeat on every chunk until the last one, so only the first and the \
            final counts should be reported. When the final chunk carries its finish reason the stream is \
            complete, and the closing event must say that the model stopped of its own accord rather than \
            hitting a limit.";
        let words: Vec<&str> = PARA.split(' ').collect();
        assert!(words.len() >= 100);
        let mut expected = Vec::new();
        for (i, word) in words.iter().enumerate() {
            expected.push(text(&if i == 0 { (*word).to_string() } else { format!(" {word}") }));
            if i == 0 {
                expected.push(usage(12, 0, 0));
            }
        }
        expected.push(usage(12, 131, 0));
        let (events, end) = decode_every_way(MANY_SSE);
        assert_eq!(events, expected);
        assert_eq!(end, finish(FinishReason::Stop));
    }

    #[test]
    fn thinking_stream() {
        let (events, end) = decode_every_way(THINKING_SSE);
        assert_eq!(
            events,
            vec![
                thought(
                    "**Counting primes below 100**\n\nI'm listing the primes decade by decade: 2, 3, 5, 7 in the \
                     first, then 11, 13, 17, 19, and so on up to 97."
                ),
                usage(14, 187, 0),
                thought(
                    "**Verifying the total**\n\nAdding the per-decade counts 4+4+2+2+3+2+2+3+1+2 gives 25, which \
                     matches the known value of π(100)."
                ),
                usage(14, 398, 0),
                text("There are **25** prime numbers less than 100."),
                text(" The largest of them is 97."),
                ProviderEvent::ThoughtSignature(SIG_THINKING.into()),
                usage(14, 415, 0),
            ]
        );
        assert_eq!(end, finish(FinishReason::Stop));
    }

    #[test]
    fn parallel_function_calls_stream() {
        let (events, end) = decode_every_way(CALLS_SSE);
        assert_eq!(
            events,
            vec![
                ProviderEvent::ToolCall {
                    id: "call_Xk9OaJ3vBbWUz7IPrN_5kAw_0".into(),
                    name: "get_weather".into(),
                    arguments: json!({"location": "Paris, France", "unit": "celsius"}),
                    signature: Some(SIG_CALL.into()),
                },
                usage(96, 154, 0),
                ProviderEvent::ToolCall {
                    id: "call_Xk9OaJ3vBbWUz7IPrN_5kAw_1".into(),
                    name: "get_weather".into(),
                    arguments: json!({"location": "London, UK", "unit": "celsius"}),
                    signature: None,
                },
                usage(96, 192, 0),
            ]
        );
        // `finishReason: STOP` after function calls: the model waits for their results.
        assert_eq!(end, finish(FinishReason::ToolCalls));
    }

    #[test]
    fn error_in_the_middle_of_a_stream() {
        let (events, end) = decode_every_way(ERROR_SSE);
        assert_eq!(
            events,
            vec![
                text("Here is a summary of the report:\n\n"),
                usage(1840, 287, 0),
                text("1. Revenue grew 12% year over year"),
                ProviderEvent::Error(ProviderError {
                    status: 503,
                    kind: "UNAVAILABLE".into(),
                    message: "The model is overloaded. Please try again later.".into(),
                    retryable: true,
                    retry_after_secs: None,
                }),
            ]
        );
        // The error was the end of it: no Finish, and not a truncation either.
        assert_eq!(end, Ok(vec![]));
    }

    #[test]
    fn truncated_stream_is_an_error() {
        let (events, end) = decode_every_way(TRUNCATED_SSE);
        assert_eq!(
            events,
            vec![
                text("Step one: preheat the oven to 200 °C."),
                usage(21, 0, 0),
                text("\nStep two: whisk the eggs with the sugar"),
                text(" until pale,"),
            ]
        );
        let err = end.unwrap_err();
        assert!(err.0.contains("truncated"), "{err}");
    }

    #[test]
    fn non_streamed_response() {
        assert_eq!(
            parse_response(NONSTREAM_JSON.as_bytes()).unwrap(),
            vec![
                thought(
                    "**Converting the distance**\n\nA marathon is 42.195 km; dividing by 1.609 gives roughly 26.2 \
                     miles."
                ),
                text("A marathon is 42.195 km, which is about 26.2 miles."),
                ProviderEvent::ThoughtSignature(SIG_NONSTREAM.into()),
                usage(2210, 91, 2048),
                ProviderEvent::Finish(FinishReason::Stop),
            ]
        );
    }

    #[test]
    fn non_streamed_error_and_garbage() {
        let events =
            parse_response(br#"{"error": {"code": 500, "message": "boom", "status": "INTERNAL"}}"#).unwrap();
        assert_eq!(
            events,
            vec![ProviderEvent::Error(ProviderError {
                status: 500,
                kind: "INTERNAL".into(),
                message: "boom".into(),
                retryable: true,
                retry_after_secs: None,
            })]
        );
        assert!(parse_response(b"{}").is_err(), "no finishReason");
        assert!(parse_response(b"<html>").is_err());
        assert!(parse_response(b"42").is_err());
    }

    // ---- decoder details --------------------------------------------------------------------

    #[test]
    fn finish_reasons() {
        let cases = [
            ("STOP", false, FinishReason::Stop),
            ("STOP", true, FinishReason::ToolCalls),
            ("MAX_TOKENS", false, FinishReason::Length),
            ("MAX_TOKENS", true, FinishReason::Length),
            ("SAFETY", false, FinishReason::ContentFilter),
            ("RECITATION", false, FinishReason::ContentFilter),
            ("BLOCKLIST", false, FinishReason::ContentFilter),
            ("PROHIBITED_CONTENT", false, FinishReason::ContentFilter),
            ("SPII", false, FinishReason::ContentFilter),
            ("IMAGE_SAFETY", false, FinishReason::ContentFilter),
            ("MALFORMED_FUNCTION_CALL", false, FinishReason::Other("MALFORMED_FUNCTION_CALL".into())),
            ("LANGUAGE", false, FinishReason::Other("LANGUAGE".into())),
            ("OTHER", false, FinishReason::Other("OTHER".into())),
            ("FINISH_REASON_UNSPECIFIED", false, FinishReason::Other("FINISH_REASON_UNSPECIFIED".into())),
        ];
        for (reason, with_call, expected) in cases {
            let parts = if with_call {
                json!([{"functionCall": {"name": "f", "args": {}}}])
            } else {
                json!([{"text": "x"}])
            };
            let (_, end) = decode_chunks(&[candidate_chunk(parts, Some(reason))]);
            assert_eq!(end, finish(expected), "{reason} {with_call}");
        }
    }

    #[test]
    fn safety_stop_without_content() {
        let chunk = json!({"candidates": [{"finishReason": "SAFETY", "index": 0, "safetyRatings": [
            {"category": "HARM_CATEGORY_DANGEROUS_CONTENT", "probability": "HIGH", "blocked": true}]}]});
        let (events, end) = decode_chunks(&[chunk]);
        assert_eq!(events, vec![]);
        assert_eq!(end, finish(FinishReason::ContentFilter));
    }

    #[test]
    fn finish_reason_repeated_on_every_chunk_ends_once_at_the_end() {
        // Older models put `finishReason: STOP` on every chunk; the text after it still counts.
        let chunks = [
            candidate_chunk(json!([{"text": "a"}]), Some("STOP")),
            candidate_chunk(json!([{"text": "b"}]), Some("STOP")),
        ];
        let (events, end) = decode_chunks(&chunks);
        assert_eq!(events, vec![text("a"), text("b")]);
        assert_eq!(end, finish(FinishReason::Stop));
    }

    #[test]
    fn an_error_after_a_finish_reason_still_ends_without_finish() {
        let chunks = [
            candidate_chunk(json!([{"text": "a"}]), Some("STOP")),
            json!({"error": {"code": 500, "message": "An internal error has occurred.", "status": "INTERNAL"}}),
        ];
        let (events, end) = decode_chunks(&chunks);
        assert_eq!(events.len(), 2);
        assert!(matches!(&events[1], ProviderEvent::Error(e) if e.status == 500 && e.retryable));
        assert_eq!(end, Ok(vec![]));
    }

    #[test]
    fn blocked_prompt() {
        let chunk = json!({
            "promptFeedback": {"blockReason": "PROHIBITED_CONTENT", "blockReasonMessage": "Prompt was blocked."},
            "usageMetadata": {"promptTokenCount": 7, "totalTokenCount": 7},
            "modelVersion": "gemini-2.5-flash"
        });
        let (events, end) = decode_chunks(&[chunk]);
        assert_eq!(
            events,
            vec![
                usage(7, 0, 0),
                ProviderEvent::Error(ProviderError {
                    status: 0,
                    kind: "prompt_blocked".into(),
                    message: "Gemini blocked the prompt (PROHIBITED_CONTENT): Prompt was blocked.".into(),
                    retryable: false,
                    retry_after_secs: None,
                }),
            ]
        );
        assert_eq!(end, finish(FinishReason::ContentFilter));
        // Safety ratings without a block reason are not a block.
        let fine = json!({"candidates": [{"content": {"parts": [{"text": "ok"}]}, "finishReason": "STOP"}],
            "promptFeedback": {"safetyRatings": []}});
        assert_eq!(decode_chunks(&[fine]), (vec![text("ok")], finish(FinishReason::Stop)));
    }

    #[test]
    fn signatures_on_every_kind_of_part() {
        let parts = json!([
            {"text": "thinking...", "thought": true, "thoughtSignature": "sig/1+"},
            {"text": "", "thought": true, "thoughtSignature": "sig2=="},
            {"text": "answer", "thoughtSignature": "sig3"},
            {"inlineData": {"mimeType": "image/png", "data": "iVBORw0KGgo="}, "thoughtSignature": "sig4"},
            {"text": "", "thoughtSignature": ""},
            {"text": ""}
        ]);
        let (events, _) = decode_chunks(&[candidate_chunk(parts, Some("STOP"))]);
        assert_eq!(
            events,
            vec![
                thought("thinking..."),
                ProviderEvent::ThoughtSignature("sig/1+".into()),
                ProviderEvent::ThoughtSignature("sig2==".into()),
                text("answer"),
                ProviderEvent::ThoughtSignature("sig3".into()),
                ProviderEvent::ThoughtSignature("sig4".into()),
            ]
        );
    }

    #[test]
    fn function_call_ids_args_and_errors() {
        let parts = json!([
            {"functionCall": {"id": "fc-7", "name": "search", "args": {"q": "rust"}}},
            {"functionCall": {"name": "now"}},
            {"functionCall": {"name": "ping", "args": null}, "thoughtSignature": "s"}
        ]);
        let (events, end) = decode_chunks(&[candidate_chunk(parts, Some("STOP"))]);
        let call =
            |id: &str, name: &str, arguments: Value, signature: Option<&str>| ProviderEvent::ToolCall {
                id: id.into(),
                name: name.into(),
                arguments,
                signature: signature.map(str::to_string),
            };
        // No `responseId` in these chunks: the made-up ids are `call_<n>`, counting every call.
        assert_eq!(
            events,
            vec![
                call("fc-7", "search", json!({"q": "rust"}), None),
                call("call_1", "now", json!({}), None),
                call("call_2", "ping", json!({}), Some("s")),
            ]
        );
        assert_eq!(end, finish(FinishReason::ToolCalls));

        let mut decoder = StreamDecoder::new();
        let nameless = candidate_chunk(json!([{"functionCall": {"args": {}}}]), None);
        let ev = SseEvent { event: "message".into(), data: nameless.to_string(), id: None };
        assert!(decoder.on_event(&ev).is_err());
    }

    #[test]
    fn made_up_ids_are_stable_across_chunks_and_decodes() {
        let chunk = |n: &str| {
            json!({"candidates": [{"content": {"parts": [{"functionCall": {"name": n, "args": {}}}]}}],
                "responseId": "R1"})
        };
        let (events, _) = decode_chunks(&[chunk("a"), chunk("b")]);
        let ids: Vec<&str> = events
            .iter()
            .filter_map(|e| match e {
                ProviderEvent::ToolCall { id, .. } => Some(id.as_str()),
                _ => None,
            })
            .collect();
        assert_eq!(ids, ["call_R1_0", "call_R1_1"]);
        let (again, _) = decode_chunks(&[chunk("a"), chunk("b")]);
        assert_eq!(again, events);
    }

    #[test]
    fn usage_counts() {
        let chunk = json!({"candidates": [{"content": {"parts": [{"text": "x"}]}, "finishReason": "STOP"}],
            "usageMetadata": {"promptTokenCount": 100, "cachedContentTokenCount": 60, "candidatesTokenCount": 5,
                "thoughtsTokenCount": 20, "toolUsePromptTokenCount": 3, "totalTokenCount": 128}});
        let (events, _) = decode_chunks(&[chunk]);
        assert_eq!(events, vec![text("x"), usage(103, 25, 60)]);
        // Repeated identical usage is reported once; a change is reported again.
        let u = |n: u64| json!({"usageMetadata": {"promptTokenCount": n}});
        let (events, _) = decode_chunks(&[u(1), u(1), u(2), u(2)]);
        assert_eq!(events, vec![usage(1, 0, 0), usage(2, 0, 0)]);
    }

    #[test]
    fn malformed_chunks() {
        let mut decoder = StreamDecoder::new();
        let ev = |data: &str| SseEvent { event: "message".into(), data: data.into(), id: None };
        assert_eq!(decoder.on_event(&ev("")), Ok(vec![]));
        assert_eq!(decoder.on_event(&ev("  \n ")), Ok(vec![]));
        assert!(decoder.on_event(&ev("{\"candidates\": [")).is_err());
        assert!(decoder.on_event(&ev("[DONE]")).is_err());
        assert!(decoder.on_event(&ev("42")).is_err());
        assert!(decoder.on_event(&ev("\"text\"")).is_err());
        // Unknown fields and shapes are ignored, not fatal.
        let odd = json!({"candidates": [{"content": {"parts": [{"executableCode": {"code": "1+1"}}]}}],
            "unknownField": true});
        assert_eq!(decoder.on_event(&ev(&odd.to_string())), Ok(vec![]));
    }

    #[test]
    fn json_array_framing_is_tolerated() {
        let body = json!([
            {"candidates": [{"content": {"parts": [{"text": "Hi"}]}}]},
            {"candidates": [{"content": {"parts": [{"text": "!"}]}, "finishReason": "STOP"}]}
        ]);
        assert_eq!(
            parse_response(body.to_string().as_bytes()).unwrap(),
            vec![text("Hi"), text("!"), ProviderEvent::Finish(FinishReason::Stop)]
        );
        let (events, end) = decode_chunks(&[body]);
        assert_eq!((events, end), (vec![text("Hi"), text("!")], finish(FinishReason::Stop)));
    }

    #[test]
    fn finish_is_idempotent_and_empty_streams_are_truncated() {
        let mut decoder = StreamDecoder::new();
        assert!(decoder.finish().is_err());
        assert_eq!(decoder.finish(), Ok(vec![]));
        let (_, end) = decode_chunks(&[candidate_chunk(json!([{"text": "x"}]), Some("STOP"))]);
        assert_eq!(end, finish(FinishReason::Stop));
    }

    // ---- requests ---------------------------------------------------------------------------

    fn msg(role: ChatRole, parts: Vec<Part>) -> ChatMessage {
        ChatMessage { role, parts }
    }

    fn text_part(s: &str) -> Part {
        Part::Text { text: s.into() }
    }

    fn request(messages: Vec<ChatMessage>) -> ChatRequest {
        ChatRequest {
            model: "gemini-2.5-flash".into(),
            system: None,
            messages,
            tools: Vec::new(),
            params: GenParams::default(),
        }
    }

    fn weather_tool() -> ToolSpec {
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
            }),
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
            },
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
                    Part::ToolCall {
                        id: "fc-7".into(),
                        name: "f".into(),
                        arguments: json!({}),
                        signature: None,
                    },
                    Part::ToolCall {
                        id: "call_3".into(),
                        name: "g".into(),
                        arguments: Value::Null,
                        signature: None,
                    },
                    Part::ToolCall {
                        id: "".into(),
                        name: "h".into(),
                        arguments: json!([1, 2]),
                        signature: None,
                    },
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
        let tool =
            |parameters: Value| ToolSpec { name: "now".into(), description: "Time.".into(), parameters };
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

    // ---- URLs, headers, errors --------------------------------------------------------------

    #[test]
    fn endpoints() {
        let g = "https://generativelanguage.googleapis.com";
        assert_eq!(
            endpoint(g, "gemini-2.5-flash", true),
            "https://generativelanguage.googleapis.com/v1beta/models/gemini-2.5-flash:streamGenerateContent?alt=sse"
        );
        assert_eq!(
            endpoint(g, "models/gemini-2.5-pro", false),
            "https://generativelanguage.googleapis.com/v1beta/models/gemini-2.5-pro:generateContent"
        );
        for base in [
            "https://generativelanguage.googleapis.com/",
            "https://generativelanguage.googleapis.com/v1beta",
            "https://generativelanguage.googleapis.com/v1beta/",
            " https://generativelanguage.googleapis.com ",
            "",
        ] {
            assert_eq!(
                endpoint(base, "gemini-2.5-flash", false),
                "https://generativelanguage.googleapis.com/v1beta/models/gemini-2.5-flash:generateContent",
                "{base:?}"
            );
        }
        assert_eq!(
            endpoint("https://proxy.example/gemini/v1", "gemini-2.0-flash", false),
            "https://proxy.example/gemini/v1/models/gemini-2.0-flash:generateContent"
        );
        assert_eq!(
            endpoint("http://127.0.0.1:8080/google", "gemini x:y/z?", true),
            "http://127.0.0.1:8080/google/v1beta/models/gemini%20x%3Ay%2Fz%3F:streamGenerateContent?alt=sse"
        );
        assert_eq!(
            endpoint(g, "tunedModels/my-model-123", false),
            "https://generativelanguage.googleapis.com/v1beta/tunedModels/my-model-123:generateContent"
        );
        assert_eq!(
            models_endpoint(g),
            "https://generativelanguage.googleapis.com/v1beta/models?pageSize=1000"
        );
        assert_eq!(
            count_tokens_endpoint(g, "models/gemini-2.5-flash"),
            "https://generativelanguage.googleapis.com/v1beta/models/gemini-2.5-flash:countTokens"
        );
    }

    #[test]
    fn api_key_goes_in_a_header_never_in_a_url() {
        let key = "AIzaSyDUMMY-key_0123456789abcdefghijklm";
        assert_eq!(
            headers(&format!(" {key}\n")),
            vec![("x-goog-api-key", key.to_string()), ("content-type", "application/json".to_string())]
        );
        for url in [
            endpoint(DEFAULT_BASE_URL, "gemini-2.5-flash", true),
            endpoint(DEFAULT_BASE_URL, "gemini-2.5-flash", false),
            models_endpoint(DEFAULT_BASE_URL),
            count_tokens_endpoint(DEFAULT_BASE_URL, "gemini-2.5-flash"),
        ] {
            assert!(!url.contains("key"), "{url}");
            assert!(!url.contains(key), "{url}");
        }
    }

    #[test]
    fn rate_limit_error_with_retry_info() {
        let err = parse_error(429, None, ERROR_429_JSON.as_bytes());
        assert_eq!(err.status, 429);
        assert_eq!(err.kind, "RESOURCE_EXHAUSTED");
        assert!(err.retryable);
        assert_eq!(err.retry_after_secs, Some(29));
        assert!(err.message.starts_with("You exceeded your current quota"), "{}", err.message);
        // The header wins over the body; an HTTP-date header falls back to the body.
        assert_eq!(parse_error(429, Some("7"), ERROR_429_JSON.as_bytes()).retry_after_secs, Some(7));
        assert_eq!(parse_error(429, Some(" 1.2 "), ERROR_429_JSON.as_bytes()).retry_after_secs, Some(2));
        assert_eq!(
            parse_error(429, Some("Wed, 21 Oct 2015 07:28:00 GMT"), ERROR_429_JSON.as_bytes())
                .retry_after_secs,
            Some(29)
        );
        let fractional = json!({"error": {"code": 429, "message": "slow down", "status": "RESOURCE_EXHAUSTED",
            "details": [{"@type": "type.googleapis.com/google.rpc.RetryInfo", "retryDelay": "1.5s"}]}});
        assert_eq!(parse_error(429, None, fractional.to_string().as_bytes()).retry_after_secs, Some(2));
    }

    #[test]
    fn bad_request_error() {
        let err = parse_error(400, None, ERROR_400_JSON.as_bytes());
        assert_eq!(err.status, 400);
        assert_eq!(err.kind, "INVALID_ARGUMENT");
        assert!(!err.retryable);
        assert_eq!(err.retry_after_secs, None);
        assert!(err.message.starts_with("Function call is missing a thought_signature"), "{}", err.message);
    }

    #[test]
    fn error_classification() {
        let body = |code: u16, status: &str| {
            json!({"error": {"code": code, "message": "m", "status": status}}).to_string().into_bytes()
        };
        for (code, status, retryable) in [
            (500, "INTERNAL", true),
            (503, "UNAVAILABLE", true),
            (504, "DEADLINE_EXCEEDED", true),
            (403, "PERMISSION_DENIED", false),
            (404, "NOT_FOUND", false),
            (400, "FAILED_PRECONDITION", false),
        ] {
            let err = parse_error(code, None, &body(code, status));
            assert_eq!((err.status, err.kind.as_str(), err.retryable), (code, status, retryable));
        }
        // Wrapped in an array, as some Google front ends answer.
        let wrapped = format!("[{}]", String::from_utf8_lossy(&body(503, "UNAVAILABLE")));
        let err = parse_error(503, None, wrapped.as_bytes());
        assert_eq!((err.kind.as_str(), err.message.as_str(), err.retryable), ("UNAVAILABLE", "m", true));
        // Not JSON: a proxy's HTML page.
        let err = parse_error(502, None, b"<html><body>Bad Gateway</body></html>");
        assert_eq!(
            err,
            ProviderError {
                status: 502,
                kind: "http_502".into(),
                message: "<html><body>Bad Gateway</body></html>".into(),
                retryable: true,
                retry_after_secs: None,
            }
        );
        let err = parse_error(401, None, b"");
        assert_eq!((err.kind.as_str(), err.retryable), ("http_401", false));
        assert!(err.message.contains("401"));
        let long = "x".repeat(2000);
        let err = parse_error(500, None, long.as_bytes());
        assert_eq!(err.message.chars().count(), MAX_QUOTED_BODY_CHARS + 1);
        // An error object without a status or message.
        let err = parse_error(500, None, br#"{"error": {"code": 500}}"#);
        assert_eq!(err.kind, "http_500");
        assert!(err.message.contains("http_500"));
    }

    #[test]
    fn keys_are_redacted_from_error_messages() {
        let key = "AIzaSyA1b2C3d4E5f6G7h8I9j0KLmnOPqrSTuvw";
        let message = format!(
            "Request to https://generativelanguage.googleapis.com/v1beta/models/x:generateContent?key={key}&alt=sse \
             failed (api_key={key}); raw key {key}, short AIza ok."
        );
        let body = json!({"error": {"code": 400, "message": message, "status": "INVALID_ARGUMENT"}});
        let err = parse_error(400, None, body.to_string().as_bytes());
        assert_eq!(
            err.message,
            "Request to https://generativelanguage.googleapis.com/v1beta/models/x:generateContent?key=***&alt=sse \
             failed (api_key=***); raw key ***, short AIza ok."
        );
        assert!(!err.message.contains(key));
        // Also in non-JSON bodies and in-stream errors.
        let err = parse_error(403, None, format!("denied for KEY={key}").as_bytes());
        assert_eq!(err.message, "denied for KEY=***");
        let chunk = json!({"error": {"code": 400, "message": format!("bad ?key={key}"), "status": "INVALID_ARGUMENT"}});
        let (events, _) = decode_chunks(&[chunk]);
        assert_eq!(
            events,
            vec![ProviderEvent::Error(ProviderError {
                status: 400,
                kind: "INVALID_ARGUMENT".into(),
                message: "bad ?key=***".into(),
                retryable: false,
                retry_after_secs: None,
            })]
        );
        assert_eq!(
            redact_secrets("key= and key=&x and ünïcödé key=ä€"),
            "key= and key=&x and ünïcödé key=***"
        );
    }

    // ---- models and token counting ------------------------------------------------------------

    #[test]
    fn model_list() {
        assert_eq!(
            parse_models(MODELS_JSON.as_bytes()).unwrap(),
            vec!["gemini-2.0-flash", "gemini-2.5-flash", "gemini-2.5-pro"]
        );
        assert_eq!(parse_models(b"{}").unwrap(), Vec::<String>::new());
        assert!(parse_models(b"[]").is_err());
        assert!(parse_models(b"nope").is_err());
        assert!(parse_models(br#"{"models": 3}"#).is_err());
        let err = parse_models(
            br#"{"error": {"code": 403, "message": "no ?key=abc", "status": "PERMISSION_DENIED"}}"#,
        )
        .unwrap_err();
        assert!(err.0.contains("PERMISSION_DENIED") && err.0.contains("key=***") && !err.0.contains("abc"));
    }

    #[test]
    fn token_counting() {
        assert_eq!(parse_count_tokens(COUNT_TOKENS_JSON.as_bytes()), Ok(31));
        assert_eq!(parse_count_tokens(b"{}"), Ok(0));
        assert!(parse_count_tokens(br#"{"totalTokens": -1}"#).is_err());
        assert!(parse_count_tokens(br#"{"totalTokens": "31"}"#).is_err());
        assert!(
            parse_count_tokens(br#"{"error": {"code": 400, "message": "m", "status": "INVALID_ARGUMENT"}}"#)
                .is_err()
        );

        let req = ChatRequest {
            model: "models/gemini-2.5-flash".into(),
            system: Some("Be brief.".into()),
            tools: vec![weather_tool()],
            params: GenParams { temperature: Some(1.0), ..Default::default() },
            ..request(vec![msg(ChatRole::User, vec![text_part("Hello")])])
        };
        let body = build_count_tokens(&req);
        let full = build_request(&req);
        assert_eq!(
            body,
            json!({"generateContentRequest": {
                "model": "models/gemini-2.5-flash",
                "contents": full["contents"],
                "systemInstruction": full["systemInstruction"],
                "tools": full["tools"]
            }})
        );
        let bare = ChatRequest { model: "gemini-2.5-flash".into(), ..req };
        assert_eq!(
            build_count_tokens(&bare)["generateContentRequest"]["model"],
            json!("models/gemini-2.5-flash")
        );
    }
}
