//! The OpenAI Responses API as callers speak it (`POST /v1/responses`; Codex CLI and the
//! `openai` SDKs' `responses.create`): `instructions` and `input` (a string or items: messages,
//! function calls and their outputs, reasoning), function tools and `tool_choice`,
//! `reasoning.effort`, `max_output_tokens`; the `response` object and its event stream.
//!
//! Developer and system messages join the system prompt; items and tools with no counterpart
//! (built-in tools, namespaces, web search calls, encrypted reasoning) are left out and named
//! in [`Parsed::dropped`].

mod answer;

pub use answer::{Writer, response_json};

use serde_json::Value;

use super::{ApiError, Dropped};
use crate::providers::types::{
    ChatMessage, ChatRequest, ChatRole, GenParams, Part, ReasoningEffort, ToolSpec,
};

/// What a responses request asks for, besides the conversation.
#[derive(Debug, Clone, PartialEq)]
pub struct Parsed {
    /// The `model` field as sent.
    pub model: String,
    /// Whether to stream.
    pub stream: bool,
    /// Whether to keep the response for `previous_response_id` and `GET` (default true).
    pub store: bool,
    /// The response this one continues.
    pub previous_response_id: Option<String>,
    /// The conversation (this request's part), tools and parameters.
    pub request: ChatRequest,
    /// The request's echoable settings, for the response object.
    pub echo: Echo,
    /// What the request carried that is not sent on.
    pub dropped: Dropped,
}

/// Settings a response object repeats back.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Echo {
    /// `instructions` as sent.
    pub instructions: Option<String>,
    /// `tool_choice` as sent.
    pub tool_choice: Value,
    /// `tools` as sent.
    pub tools: Value,
    /// `reasoning` as sent.
    pub reasoning: Value,
    /// `max_output_tokens` as sent.
    pub max_output_tokens: Option<u32>,
    /// `temperature` as sent.
    pub temperature: Option<f32>,
    /// `parallel_tool_calls` as sent.
    pub parallel_tool_calls: bool,
    /// `metadata` as sent.
    pub metadata: Value,
}

use super::plain_word as plain;

/// The content of a message item: a string or content parts.
fn content_parts(v: &Value, at: &str, dropped: &mut Dropped) -> Result<Vec<Part>, ApiError> {
    let list = match v {
        Value::String(s) => return Ok(vec![Part::Text { text: s.clone() }]),
        Value::Array(list) => list,
        Value::Null => return Ok(Vec::new()),
        _ => return Err(ApiError::invalid("content must be a string or an array of parts.", Some(at))),
    };
    let mut out = Vec::new();
    for (i, p) in list.iter().enumerate() {
        let pat = format!("{at}[{i}]");
        match p.get("type").and_then(Value::as_str) {
            Some("input_text" | "output_text" | "text" | "summary_text") => out.push(Part::Text {
                text: p.get("text").and_then(Value::as_str).unwrap_or_default().to_string(),
            }),
            Some("refusal") => out.push(Part::Text {
                text: p.get("refusal").and_then(Value::as_str).unwrap_or_default().to_string(),
            }),
            Some("input_image") => {
                let url = p.get("image_url").and_then(Value::as_str).unwrap_or_default();
                match url.strip_prefix("data:").and_then(|rest| rest.split_once(',')) {
                    Some((meta, data)) => {
                        let mime = meta.strip_suffix(";base64").unwrap_or(meta);
                        if !super::image_type_allowed(mime) {
                            return Err(ApiError::invalid(
                                "Images must be PNG, JPEG, GIF or WebP.",
                                Some(&pat),
                            ));
                        }
                        out.push(Part::Image { mime: mime.to_string(), data_base64: data.to_string() });
                    }
                    // Arbor never fetches a caller's URL on its behalf (SSRF).
                    None => dropped.add("image urls and file ids"),
                }
            }
            Some(other) => dropped.add(&format!("{} content", plain(other))),
            None => return Err(ApiError::invalid("Each content part needs a type.", Some(&pat))),
        }
    }
    Ok(out)
}

/// Builds the conversation item by item.
#[derive(Default)]
struct Conversation {
    messages: Vec<ChatMessage>,
    system: Vec<String>,
    names: std::collections::HashMap<String, String>,
    dropped: Dropped,
    /// Whether the request continues a stored response (its calls may be there).
    continues: bool,
}

impl Conversation {
    /// Appends parts to the last message when it has `role`, else starts a message.
    fn push(&mut self, role: ChatRole, parts: Vec<Part>) {
        if parts.is_empty() {
            return;
        }
        match self.messages.last_mut() {
            Some(last) if last.role == role => last.parts.extend(parts),
            _ => self.messages.push(ChatMessage { role, parts }),
        }
    }

    fn item(&mut self, item: &Value, at: &str) -> Result<(), ApiError> {
        let kind = item.get("type").and_then(Value::as_str).unwrap_or("message");
        match kind {
            "message" => {
                let role = item
                    .get("role")
                    .and_then(Value::as_str)
                    .ok_or_else(|| ApiError::invalid("role is missing.", Some(at)))?;
                let parts = content_parts(
                    item.get("content").unwrap_or(&Value::Null),
                    &format!("{at}.content"),
                    &mut self.dropped,
                )?;
                match role {
                    "user" => self.push(ChatRole::User, parts),
                    "assistant" => self.push(ChatRole::Assistant, parts),
                    "system" | "developer" => {
                        let text: Vec<String> = parts
                            .into_iter()
                            .filter_map(|p| match p {
                                Part::Text { text } => Some(text),
                                _ => None,
                            })
                            .collect();
                        self.system.push(text.join("\n\n"));
                    }
                    other => {
                        let other: String = other.chars().take(40).collect();
                        return Err(ApiError::invalid(
                            format!("Unknown role \"{other}\"."),
                            Some(&format!("{at}.role")),
                        ));
                    }
                }
            }
            "function_call" => {
                let field = |name: &str| {
                    item.get(name)
                        .and_then(Value::as_str)
                        .filter(|v| !v.is_empty())
                        .ok_or_else(|| ApiError::invalid(format!("{name} is missing."), Some(at)))
                };
                let (call_id, name) = (field("call_id")?, field("name")?);
                let raw = item.get("arguments").and_then(Value::as_str).unwrap_or("{}");
                let arguments = serde_json::from_str(raw).unwrap_or_else(|_| Value::String(raw.to_string()));
                self.names.insert(call_id.to_string(), name.to_string());
                let part =
                    Part::ToolCall { id: call_id.into(), name: name.into(), arguments, signature: None };
                self.push(ChatRole::Assistant, vec![part]);
            }
            "function_call_output" => {
                let call_id = item
                    .get("call_id")
                    .and_then(Value::as_str)
                    .ok_or_else(|| ApiError::invalid("call_id is missing.", Some(at)))?;
                // A call made in an earlier stored response is named once the chain is joined
                // ([`name_results`]).
                let name = match self.names.get(call_id) {
                    Some(name) => name.clone(),
                    None if self.continues => String::new(),
                    None => {
                        return Err(ApiError::invalid(
                            "call_id names no earlier function_call.",
                            Some(&format!("{at}.call_id")),
                        ));
                    }
                };
                let content = match item.get("output") {
                    Some(Value::String(s)) => s.clone(),
                    Some(v @ Value::Array(_)) => {
                        content_parts(v, &format!("{at}.output"), &mut self.dropped)?
                            .into_iter()
                            .filter_map(|p| match p {
                                Part::Text { text } => Some(text),
                                _ => None,
                            })
                            .collect::<Vec<_>>()
                            .join("\n")
                    }
                    _ => {
                        return Err(ApiError::invalid("output must be a string or content parts.", Some(at)));
                    }
                };
                let part = Part::ToolResult { call_id: call_id.into(), name, content, is_error: false };
                self.push(ChatRole::Tool, vec![part]);
            }
            "reasoning" => {
                let text = item
                    .get("summary")
                    .and_then(Value::as_array)
                    .map(|s| {
                        s.iter()
                            .filter_map(|p| p.get("text").and_then(Value::as_str))
                            .collect::<Vec<_>>()
                            .join("\n\n")
                    })
                    .unwrap_or_default();
                if item.get("encrypted_content").is_some_and(|e| !e.is_null()) {
                    self.dropped.add("encrypted reasoning");
                }
                if !text.is_empty() {
                    self.push(
                        ChatRole::Assistant,
                        vec![Part::Thought { text, signature: None, redacted: None }],
                    );
                }
            }
            other => self.dropped.add(&format!("{} items", plain(other))),
        }
        Ok(())
    }
}

fn parse_tools(v: Option<&Value>, dropped: &mut Dropped) -> Result<Vec<ToolSpec>, ApiError> {
    let list = super::tools_array(v)?;
    let mut out = Vec::new();
    for (i, t) in list.iter().enumerate() {
        match t.get("type").and_then(Value::as_str) {
            Some("function") => {
                let name = t
                    .get("name")
                    .and_then(Value::as_str)
                    .filter(|n| !n.is_empty())
                    .ok_or_else(|| ApiError::invalid("name is missing.", Some(&format!("tools[{i}]"))))?;
                out.push(ToolSpec {
                    name: name.to_string(),
                    description: t.get("description").and_then(Value::as_str).unwrap_or_default().to_string(),
                    parameters: t
                        .get("parameters")
                        .filter(|p| !p.is_null())
                        .cloned()
                        .unwrap_or_else(|| serde_json::json!({ "type": "object", "properties": {} }))
                        .into(),
                });
            }
            Some(other) => dropped.add(&format!("{} tools", plain(other))),
            None => return Err(ApiError::invalid("Each tool needs a type.", Some(&format!("tools[{i}]")))),
        }
    }
    Ok(out)
}

/// Names the tool results whose calls were in an earlier response of the chain, once the chain
/// is joined in front of the request's own messages; a result whose call is nowhere is refused.
pub fn name_results(messages: &mut [ChatMessage]) -> Result<(), ApiError> {
    let mut names = std::collections::HashMap::new();
    for message in messages.iter_mut() {
        for part in &mut message.parts {
            match part {
                Part::ToolCall { id, name, .. } => {
                    names.insert(id.clone(), name.clone());
                }
                Part::ToolResult { call_id, name, .. } if name.is_empty() => {
                    *name = names.get(call_id).cloned().ok_or_else(|| {
                        ApiError::invalid(
                            "A function_call_output's call_id names no earlier function_call.",
                            Some("input"),
                        )
                    })?;
                }
                _ => {}
            }
        }
    }
    Ok(())
}

/// Parses a responses request body.
pub fn parse_request(body: &Value) -> Result<Parsed, ApiError> {
    let obj = body.as_object().ok_or_else(|| ApiError::invalid("The body must be a JSON object.", None))?;
    let model = super::model_field(obj, "model is required.")?;
    let previous_response_id = obj.get("previous_response_id").and_then(Value::as_str).map(str::to_string);
    let mut conv = Conversation { continues: previous_response_id.is_some(), ..Conversation::default() };
    let instructions = match obj.get("instructions") {
        None | Some(Value::Null) => None,
        Some(Value::String(s)) => Some(s.clone()),
        Some(_) => return Err(ApiError::invalid("instructions must be a string.", Some("instructions"))),
    };
    conv.system.extend(instructions.clone().filter(|s| !s.is_empty()));
    match obj.get("input") {
        Some(Value::String(s)) => conv.push(ChatRole::User, vec![Part::Text { text: s.clone() }]),
        Some(Value::Array(items)) => {
            for (i, item) in items.iter().enumerate() {
                conv.item(item, &format!("input[{i}]"))?;
            }
        }
        _ => return Err(ApiError::invalid("input must be a string or an array of items.", Some("input"))),
    }
    if conv.messages.is_empty() && previous_response_id.is_none() {
        return Err(ApiError::invalid("input has no message Arbor can send.", Some("input")));
    }
    let mut dropped = std::mem::take(&mut conv.dropped);
    let tools = parse_tools(obj.get("tools"), &mut dropped)?;
    let temperature = super::temperature_field(obj.get("temperature"), 2.0, "temperature")?;
    let max_output_tokens = super::tokens_field(obj.get("max_output_tokens"), "max_output_tokens")?;
    let reasoning_effort = match obj.get("reasoning").and_then(|r| r.get("effort")).and_then(Value::as_str) {
        None | Some("none") => None,
        Some("minimal" | "low") => Some(ReasoningEffort::Low),
        Some("medium") => Some(ReasoningEffort::Medium),
        Some("high" | "xhigh") => Some(ReasoningEffort::High),
        Some(_) => {
            return Err(ApiError::invalid(
                "reasoning.effort must be minimal, low, medium or high.",
                Some("reasoning.effort"),
            ));
        }
    };
    let tool_choice = super::openai::parse_tool_choice(obj.get("tool_choice"))?;
    if obj
        .get("text")
        .and_then(|t| t.get("format"))
        .and_then(|f| f.get("type"))
        .and_then(Value::as_str)
        .is_some_and(|t| t != "text")
    {
        dropped.add("text.format");
    }
    let echo = Echo {
        instructions,
        tool_choice: obj.get("tool_choice").cloned().unwrap_or_else(|| Value::from("auto")),
        tools: obj.get("tools").cloned().unwrap_or_else(|| Value::Array(Vec::new())),
        reasoning: obj.get("reasoning").cloned().unwrap_or(Value::Null),
        max_output_tokens,
        temperature,
        parallel_tool_calls: obj.get("parallel_tool_calls").and_then(Value::as_bool).unwrap_or(true),
        metadata: obj
            .get("metadata")
            .cloned()
            .filter(Value::is_object)
            .unwrap_or_else(|| serde_json::json!({})),
    };
    Ok(Parsed {
        model,
        stream: obj.get("stream").and_then(Value::as_bool).unwrap_or(false),
        store: obj.get("store").and_then(Value::as_bool).unwrap_or(true),
        previous_response_id,
        request: ChatRequest {
            model: String::new(),
            system: (!conv.system.is_empty()).then(|| conv.system.join("\n\n")),
            messages: conv.messages,
            tools,
            params: GenParams {
                temperature,
                max_output_tokens,
                reasoning_effort,
                thinking_budget: None,
                tool_choice,
            },
            passthrough: None,
        },
        echo,
        dropped,
    })
}

#[cfg(test)]
mod tests;
