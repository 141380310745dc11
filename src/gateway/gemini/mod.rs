//! The Google GenAI (Gemini) API as callers speak it (`/v1beta/models/{model}:generateContent`
//! and friends; Gemini CLI and the `google-genai` SDKs): the request body, the
//! `GenerateContentResponse` answer (whole, streamed as SSE, or streamed as a JSON array) and
//! Google's `{"error": {"code", "message", "status"}}` body.
//!
//! Function calls without an `id` (Gemini's own never carry one) get `call_<n>` in order, and a
//! `functionResponse` without an id answers the earliest unanswered call of its name, which is
//! how Gemini pairs them.

mod answer;

pub use answer::{Writer, count_json, error_body, model_json};

use serde_json::{Map, Value};

use super::{ApiError, Dropped};
use crate::providers::types::{
    ChatMessage, ChatRequest, ChatRole, GenParams, Part, ReasoningEffort, ToolChoice, ToolSpec,
};

/// What a generate request asks for, besides the conversation.
#[derive(Debug, Clone, PartialEq)]
pub struct Parsed {
    /// The model named in the path (without `models/`).
    pub model: String,
    /// The conversation, tools and parameters.
    pub request: ChatRequest,
    /// What the request carried that is not sent on.
    pub dropped: Dropped,
}

/// What a `/v1beta/models/{target}` path asks for: the model and the method after `:`.
pub fn split_target(target: &str) -> Option<(&str, &str)> {
    let target = target.strip_prefix("models/").unwrap_or(target);
    let (model, method) = target.rsplit_once(':')?;
    (!model.is_empty()).then_some((model, method))
}

use super::plain_word as plain;

/// Gemini's OpenAPI-style schema (`"type": "OBJECT"`) as JSON Schema (`"type": "object"`), for
/// providers that take JSON Schema; `parametersJsonSchema` is already JSON Schema.
fn json_schema(v: &Value, depth: usize) -> Value {
    match v {
        Value::Object(o) if depth < 32 => Value::Object(
            o.iter()
                .map(|(k, v)| match (k.as_str(), v) {
                    ("type", Value::String(t)) => (k.clone(), Value::String(t.to_ascii_lowercase())),
                    _ => (k.clone(), json_schema(v, depth + 1)),
                })
                .collect(),
        ),
        Value::Array(a) if depth < 32 => Value::Array(a.iter().map(|v| json_schema(v, depth + 1)).collect()),
        other => other.clone(),
    }
}

fn parse_tools(v: Option<&Value>, dropped: &mut Dropped) -> Result<Vec<ToolSpec>, ApiError> {
    let list = super::tools_array(v)?;
    let declared: usize = list
        .iter()
        .map(|t| t.get("functionDeclarations").and_then(Value::as_array).map_or(1, Vec::len))
        .sum();
    super::check_tool_count(declared)?;
    let mut out = Vec::new();
    for (i, tool) in list.iter().enumerate() {
        let Some(obj) = tool.as_object() else {
            return Err(ApiError::invalid("Each tool must be an object.", Some(&format!("tools[{i}]"))));
        };
        for (key, value) in obj {
            if key != "functionDeclarations" {
                // googleSearch, codeExecution, urlContext…: Google's own tools.
                dropped.add(&format!("{} tools", plain(key)));
                continue;
            }
            let decls = value.as_array().ok_or_else(|| {
                ApiError::invalid("functionDeclarations must be an array.", Some(&format!("tools[{i}]")))
            })?;
            for (j, d) in decls.iter().enumerate() {
                let at = format!("tools[{i}].functionDeclarations[{j}]");
                let name = d
                    .get("name")
                    .and_then(Value::as_str)
                    .filter(|n| !n.is_empty())
                    .ok_or_else(|| ApiError::invalid("name is missing.", Some(&at)))?;
                let parameters = match (d.get("parametersJsonSchema"), d.get("parameters")) {
                    (Some(schema), _) if !schema.is_null() => schema.clone(),
                    (_, Some(schema)) if !schema.is_null() => json_schema(schema, 0),
                    _ => serde_json::json!({ "type": "object", "properties": {} }),
                };
                out.push(ToolSpec {
                    name: name.to_string(),
                    description: d.get("description").and_then(Value::as_str).unwrap_or_default().to_string(),
                    parameters: parameters.into(),
                });
            }
        }
    }
    Ok(out)
}

fn parse_tool_choice(v: Option<&Value>) -> Result<Option<ToolChoice>, ApiError> {
    let Some(config) = v.and_then(|c| c.get("functionCallingConfig")).filter(|c| !c.is_null()) else {
        return Ok(None);
    };
    let allowed: Vec<&str> = config
        .get("allowedFunctionNames")
        .and_then(Value::as_array)
        .map(|a| a.iter().filter_map(Value::as_str).collect())
        .unwrap_or_default();
    Ok(match config.get("mode").and_then(Value::as_str).unwrap_or("AUTO") {
        "AUTO" | "MODE_UNSPECIFIED" | "VALIDATED" => Some(ToolChoice::Auto),
        "NONE" => Some(ToolChoice::None),
        "ANY" => match allowed.as_slice() {
            [one] => Some(ToolChoice::Tool((*one).to_string())),
            _ => Some(ToolChoice::Required),
        },
        _ => {
            return Err(ApiError::invalid(
                "functionCallingConfig.mode must be AUTO, ANY, NONE or VALIDATED.",
                Some("toolConfig.functionCallingConfig.mode"),
            ));
        }
    })
}

/// The text parts of a `systemInstruction` (a `Content`, or a plain string).
fn system_text(v: &Value) -> Result<String, ApiError> {
    match v {
        Value::Null => Ok(String::new()),
        Value::String(s) => Ok(s.clone()),
        Value::Object(_) => Ok(v
            .get("parts")
            .and_then(Value::as_array)
            .map(|parts| {
                parts.iter().filter_map(|p| p.get("text").and_then(Value::as_str)).collect::<Vec<_>>()
            })
            .unwrap_or_default()
            .join("\n\n")),
        _ => Err(ApiError::invalid("systemInstruction must be a Content object.", Some("systemInstruction"))),
    }
}

/// Builds the conversation content by content, pairing calls and responses.
#[derive(Default)]
struct Conversation {
    messages: Vec<ChatMessage>,
    /// Calls not yet answered: (id, name).
    open_calls: Vec<(String, String)>,
    next_call: usize,
    dropped: Dropped,
}

impl Conversation {
    fn inline(&mut self, p: &Value, at: &str) -> Result<Option<Part>, ApiError> {
        let mime = p.pointer("/inlineData/mimeType").and_then(Value::as_str).unwrap_or_default();
        let data = p
            .pointer("/inlineData/data")
            .and_then(Value::as_str)
            .ok_or_else(|| ApiError::invalid("inlineData.data is missing.", Some(at)))?;
        if super::image_type_allowed(mime) {
            Ok(Some(Part::Image { mime: mime.to_string(), data_base64: data.to_string() }))
        } else if mime == "application/pdf" {
            Ok(Some(Part::Document {
                mime: mime.into(),
                data_base64: data.into(),
                name: "document.pdf".into(),
            }))
        } else {
            self.dropped.add("inlineData of other types");
            Ok(None)
        }
    }

    fn content(&mut self, c: &Value, at: &str) -> Result<(), ApiError> {
        let role = c.get("role").and_then(Value::as_str).unwrap_or("user");
        let model = match role {
            "user" | "function" | "tool" => false,
            "model" => true,
            other => {
                let other: String = other.chars().take(40).collect();
                return Err(ApiError::invalid(
                    format!("Unknown role \"{other}\"."),
                    Some(&format!("{at}.role")),
                ));
            }
        };
        let parts = c
            .get("parts")
            .and_then(Value::as_array)
            .ok_or_else(|| ApiError::invalid("parts must be an array.", Some(&format!("{at}.parts"))))?;
        let (mut results, mut out) = (Vec::new(), Vec::new());
        for (j, p) in parts.iter().enumerate() {
            let pat = format!("{at}.parts[{j}]");
            let signature = p.get("thoughtSignature").and_then(Value::as_str).map(str::to_string);
            if let Some(text) = p.get("text").and_then(Value::as_str) {
                if p.get("thought").and_then(Value::as_bool) == Some(true) {
                    if model {
                        out.push(Part::Thought { text: text.to_string(), signature, redacted: None });
                    }
                } else {
                    out.push(Part::Text { text: text.to_string() });
                }
            } else if p.get("inlineData").is_some() {
                out.extend(self.inline(p, &pat)?);
            } else if let Some(call) = p.get("functionCall") {
                let name = call
                    .get("name")
                    .and_then(Value::as_str)
                    .filter(|n| !n.is_empty())
                    .ok_or_else(|| ApiError::invalid("functionCall.name is missing.", Some(&pat)))?;
                let id = match call.get("id").and_then(Value::as_str).filter(|i| !i.is_empty()) {
                    Some(id) => id.to_string(),
                    None => {
                        self.next_call += 1;
                        format!("call_{}", self.next_call)
                    }
                };
                self.open_calls.push((id.clone(), name.to_string()));
                let arguments = call.get("args").cloned().unwrap_or_else(|| Value::Object(Map::new()));
                out.push(Part::ToolCall { id, name: name.to_string(), arguments, signature });
            } else if let Some(response) = p.get("functionResponse") {
                let name = response
                    .get("name")
                    .and_then(Value::as_str)
                    .ok_or_else(|| ApiError::invalid("functionResponse.name is missing.", Some(&pat)))?;
                let wanted = response.get("id").and_then(Value::as_str);
                let index = self
                    .open_calls
                    .iter()
                    .position(|(id, n)| wanted.map_or(n == name, |w| w == id))
                    .ok_or_else(|| {
                        ApiError::invalid("functionResponse answers no earlier functionCall.", Some(&pat))
                    })?;
                let (call_id, name) = self.open_calls.remove(index);
                let body = response.get("response").cloned().unwrap_or(Value::Null);
                // `{"output": "…"}` and `{"error": "…"}` are the documented conventions.
                let (content, is_error) = match (body.get("output"), body.get("error")) {
                    (Some(Value::String(s)), _) => (s.clone(), false),
                    (_, Some(Value::String(s))) => (s.clone(), true),
                    _ => (body.to_string(), false),
                };
                results.push(Part::ToolResult { call_id, name, content, is_error });
            } else {
                let kind = p
                    .as_object()
                    .and_then(|o| o.keys().find(|k| *k != "thoughtSignature"))
                    .map(String::as_str);
                self.dropped.add(&format!("{} parts", plain(kind.unwrap_or("empty"))));
            }
        }
        if !results.is_empty() {
            self.messages.push(ChatMessage { role: ChatRole::Tool, parts: results });
        }
        if !out.is_empty() {
            let role = if model { ChatRole::Assistant } else { ChatRole::User };
            self.messages.push(ChatMessage { role, parts: out });
        }
        Ok(())
    }
}

fn thinking(config: &Value) -> (Option<u32>, Option<ReasoningEffort>) {
    let Some(t) = config.get("thinkingConfig").filter(|t| t.is_object()) else { return (None, None) };
    let budget = t.get("thinkingBudget").and_then(Value::as_i64);
    let level = match t.get("thinkingLevel").and_then(Value::as_str) {
        Some("MINIMAL" | "LOW" | "minimal" | "low") => Some(ReasoningEffort::Low),
        Some("MEDIUM" | "medium") => Some(ReasoningEffort::Medium),
        Some("HIGH" | "high") => Some(ReasoningEffort::High),
        _ => None,
    };
    // -1 is "dynamic": the model decides, as with no budget at all.
    let budget = budget.and_then(|b| u32::try_from(b).ok());
    (budget, level)
}

/// Parses a `generateContent` / `streamGenerateContent` / `countTokens` body for `model`.
pub fn parse_request(model: &str, body: &Value) -> Result<Parsed, ApiError> {
    let obj = body.as_object().ok_or_else(|| ApiError::invalid("The body must be a JSON object.", None))?;
    // countTokens may wrap the whole request.
    if let Some(inner) = obj.get("generateContentRequest").filter(|v| v.is_object()) {
        return parse_request(model, inner);
    }
    let contents = obj
        .get("contents")
        .and_then(Value::as_array)
        .filter(|c| !c.is_empty())
        .ok_or_else(|| ApiError::invalid("contents must be a non-empty array.", Some("contents")))?;
    let mut conv = Conversation::default();
    for (i, c) in contents.iter().enumerate() {
        conv.content(c, &format!("contents[{i}]"))?;
    }
    if conv.messages.is_empty() {
        return Err(ApiError::invalid("contents has no part Arbor can send.", Some("contents")));
    }
    let mut dropped = std::mem::take(&mut conv.dropped);
    let system = system_text(obj.get("systemInstruction").unwrap_or(&Value::Null))?;
    let tools = parse_tools(obj.get("tools"), &mut dropped)?;
    let tool_choice = parse_tool_choice(obj.get("toolConfig"))?;
    let config = obj.get("generationConfig").cloned().unwrap_or(Value::Null);
    let temperature =
        super::temperature_field(config.get("temperature"), 2.0, "generationConfig.temperature")?;
    let max_output_tokens =
        super::tokens_field(config.get("maxOutputTokens"), "generationConfig.maxOutputTokens")?;
    let (thinking_budget, reasoning_effort) = thinking(&config);
    if let Some(config) = config.as_object() {
        for key in config.keys() {
            if !matches!(
                key.as_str(),
                "temperature" | "maxOutputTokens" | "thinkingConfig" | "candidateCount"
            ) {
                dropped.add(&format!("generationConfig.{}", plain(key)));
            }
        }
    }
    for key in obj.keys() {
        if !matches!(
            key.as_str(),
            "contents"
                | "systemInstruction"
                | "tools"
                | "toolConfig"
                | "generationConfig"
                | "safetySettings"
                | "model"
                | "labels"
        ) {
            dropped.add(plain(key));
        }
    }
    Ok(Parsed {
        model: model.to_string(),
        request: ChatRequest {
            model: String::new(),
            system: (!system.is_empty()).then_some(system),
            messages: conv.messages,
            tools,
            params: GenParams {
                temperature,
                max_output_tokens,
                reasoning_effort,
                thinking_budget,
                tool_choice,
            },
            passthrough: None,
        },
        dropped,
    })
}

#[cfg(test)]
mod tests;
