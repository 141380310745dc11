//! Anthropic Messages as callers speak it. The parser takes everything the current Messages
//! API accepts (Claude Code sends most of it): system-role messages anywhere in `messages`,
//! `thinking` enabled, adaptive or disabled, `output_config.effort`, `tool_choice`, images and
//! documents, `cache_control`, `context_management`, server tools. What has a counterpart in
//! the provider-neutral request is translated; what has none is left out and named in
//! [`Parsed::dropped`] (a `Warning` header), never refused.

mod answer;

pub use answer::{Writer, error_body, error_event, stop_reason};

use serde_json::{Map, Value, json};

use super::{ApiError, Dropped};
use crate::providers::types::{
    ChatMessage, ChatRequest, ChatRole, GenParams, Part, ReasoningEffort, ToolChoice, ToolSpec,
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
    /// What the request carried that is not sent on.
    pub dropped: Dropped,
}

/// Fields a request may carry that change nothing about the answer Arbor relays.
const IGNORED: &[&str] = &["metadata", "service_tier", "inference_geo", "stream", "model"];

/// The `type` of a block, safe to name in a header (`other` when it is not a plain word).
fn block_type(b: &Value) -> &str {
    b.get("type")
        .and_then(Value::as_str)
        .filter(|t| {
            !t.is_empty() && t.len() <= 40 && t.bytes().all(|c| c.is_ascii_alphanumeric() || c == b'_')
        })
        .unwrap_or("other")
}

/// The text of a string or an array of blocks; non-text blocks are dropped and named.
fn text_blocks(v: &Value, param: &str, dropped: &mut Dropped) -> Result<String, ApiError> {
    match v {
        Value::Null => Ok(String::new()),
        Value::String(s) => Ok(s.clone()),
        Value::Array(blocks) => {
            let mut out = Vec::new();
            for b in blocks {
                note_cache_control(b, dropped);
                match b.get("type").and_then(Value::as_str) {
                    Some("text") => out.push(b.get("text").and_then(Value::as_str).unwrap_or_default()),
                    _ => dropped.add(&format!("{param} {} blocks", block_type(b))),
                }
            }
            Ok(out.join("\n\n"))
        }
        _ => Err(ApiError::invalid("Expected a string or an array of text blocks.", Some(param))),
    }
}

fn note_cache_control(b: &Value, dropped: &mut Dropped) {
    if b.get("cache_control").is_some_and(|c| !c.is_null()) {
        dropped.add("cache_control");
    }
}

/// An inline (`base64`) source's media type and data; `None` for a URL or file source.
fn inline_source<'a>(b: &'a Value, at: &str) -> Result<Option<(&'a str, &'a str)>, ApiError> {
    let source = b.get("source").ok_or_else(|| ApiError::invalid("source is missing.", Some(at)))?;
    if source.get("type").and_then(Value::as_str) != Some("base64") {
        return Ok(None);
    }
    let mime = source.get("media_type").and_then(Value::as_str).unwrap_or_default();
    let data = source
        .get("data")
        .and_then(Value::as_str)
        .ok_or_else(|| ApiError::invalid("source.data is missing.", Some(at)))?;
    Ok(Some((mime, data)))
}

fn image(b: &Value, at: &str, dropped: &mut Dropped) -> Result<Option<Part>, ApiError> {
    let Some((mime, data)) = inline_source(b, at)? else {
        // Arbor never fetches a caller's URL on its behalf (SSRF), so URL images are not sent.
        dropped.add("image url sources");
        return Ok(None);
    };
    if !super::image_type_allowed(mime) {
        return Err(ApiError::invalid("Images must be PNG, JPEG, GIF or WebP.", Some(at)));
    }
    Ok(Some(Part::Image { mime: mime.to_string(), data_base64: data.to_string() }))
}

fn document(b: &Value, at: &str, dropped: &mut Dropped) -> Result<Option<Part>, ApiError> {
    let source = b.get("source").ok_or_else(|| ApiError::invalid("source is missing.", Some(at)))?;
    if source.get("type").and_then(Value::as_str) == Some("text") {
        let text = source.get("data").and_then(Value::as_str).unwrap_or_default();
        return Ok(Some(Part::Text { text: text.to_string() }));
    }
    let Some((mime, data)) = inline_source(b, at)? else {
        dropped.add("document url sources");
        return Ok(None);
    };
    if mime != "application/pdf" {
        return Err(ApiError::invalid("Inline documents must be PDF.", Some(at)));
    }
    let name = b.get("title").and_then(Value::as_str).unwrap_or("document.pdf");
    Ok(Some(Part::Document { mime: mime.into(), data_base64: data.into(), name: name.into() }))
}

/// The blocks of one message, as a list (a string is one text block).
fn blocks_of(m: &Value, at: &str) -> Result<Vec<Value>, ApiError> {
    match m.get("content") {
        Some(Value::String(s)) => Ok(vec![json!({ "type": "text", "text": s })]),
        Some(Value::Array(a)) => Ok(a.clone()),
        _ => Err(ApiError::invalid("content must be a string or an array of blocks.", Some(at))),
    }
}

/// Builds the conversation message by message, remembering tool names for their results.
#[derive(Default)]
struct Conversation {
    messages: Vec<ChatMessage>,
    system: Vec<String>,
    names: std::collections::HashMap<String, String>,
    dropped: Dropped,
}

impl Conversation {
    fn user(&mut self, blocks: &[Value], at: &str) -> Result<(), ApiError> {
        let (mut results, mut parts) = (Vec::new(), Vec::new());
        for (j, b) in blocks.iter().enumerate() {
            let bat = format!("{at}.content.{j}");
            note_cache_control(b, &mut self.dropped);
            match b.get("type").and_then(Value::as_str) {
                Some("text") => parts.push(Part::Text {
                    text: b.get("text").and_then(Value::as_str).unwrap_or_default().to_string(),
                }),
                Some("image") => parts.extend(image(b, &bat, &mut self.dropped)?),
                Some("document") => parts.extend(document(b, &bat, &mut self.dropped)?),
                Some("tool_result") => {
                    let call_id = b
                        .get("tool_use_id")
                        .and_then(Value::as_str)
                        .ok_or_else(|| ApiError::invalid("tool_use_id is missing.", Some(&bat)))?;
                    let name = self.names.get(call_id).cloned().ok_or_else(|| {
                        ApiError::invalid("tool_use_id names no earlier tool_use block.", Some(&bat))
                    })?;
                    let content = text_blocks(
                        b.get("content").unwrap_or(&Value::Null),
                        "tool_result",
                        &mut self.dropped,
                    )?;
                    let is_error = b.get("is_error").and_then(Value::as_bool).unwrap_or(false);
                    results.push(Part::ToolResult { call_id: call_id.to_string(), name, content, is_error });
                }
                _ => self.dropped.add(&format!("{} blocks", block_type(b))),
            }
        }
        if !results.is_empty() {
            self.messages.push(ChatMessage { role: ChatRole::Tool, parts: results });
        }
        if !parts.is_empty() {
            self.messages.push(ChatMessage { role: ChatRole::User, parts });
        }
        Ok(())
    }

    fn assistant(&mut self, blocks: &[Value], at: &str) -> Result<(), ApiError> {
        let mut parts = Vec::new();
        for (j, b) in blocks.iter().enumerate() {
            let bat = format!("{at}.content.{j}");
            note_cache_control(b, &mut self.dropped);
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
                    self.names.insert(id.to_string(), name.to_string());
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
                _ => self.dropped.add(&format!("{} blocks", block_type(b))),
            }
        }
        if !parts.is_empty() {
            self.messages.push(ChatMessage { role: ChatRole::Assistant, parts });
        }
        Ok(())
    }
}

fn parse_tools(v: Option<&Value>, dropped: &mut Dropped) -> Result<Vec<ToolSpec>, ApiError> {
    let list = super::tools_array(v)?;
    let mut out = Vec::new();
    for (i, t) in list.iter().enumerate() {
        note_cache_control(t, dropped);
        // A typed tool other than `custom` is one of Anthropic's own (web search, code
        // execution, bash, text editor…): only Anthropic runs those.
        if t.get("type").and_then(Value::as_str).is_some_and(|k| k != "custom") {
            dropped.add(&format!("{} tools", block_type(t)));
            continue;
        }
        let name = t
            .get("name")
            .and_then(Value::as_str)
            .filter(|n| !n.is_empty())
            .ok_or_else(|| ApiError::invalid("name is missing.", Some(&format!("tools.{i}"))))?;
        out.push(ToolSpec {
            name: name.to_string(),
            description: t.get("description").and_then(Value::as_str).unwrap_or_default().to_string(),
            parameters: t.get("input_schema").cloned().unwrap_or_else(|| json!({ "type": "object" })).into(),
        });
    }
    Ok(out)
}

fn parse_tool_choice(v: Option<&Value>) -> Result<Option<ToolChoice>, ApiError> {
    let Some(v) = v.filter(|v| !v.is_null()) else { return Ok(None) };
    let bad = || ApiError::invalid("tool_choice.type must be auto, any, tool or none.", Some("tool_choice"));
    Ok(Some(match v.get("type").and_then(Value::as_str) {
        Some("auto") => ToolChoice::Auto,
        Some("any") => ToolChoice::Required,
        Some("none") => ToolChoice::None,
        Some("tool") => ToolChoice::Tool(
            v.get("name").and_then(Value::as_str).filter(|n| !n.is_empty()).ok_or_else(bad)?.to_string(),
        ),
        _ => return Err(bad()),
    }))
}

/// `output_config.effort`: Anthropic's `max` (and any stronger level) is the neutral `High`.
fn effort(obj: &Map<String, Value>) -> Result<Option<ReasoningEffort>, ApiError> {
    match obj.get("output_config").and_then(|c| c.get("effort")) {
        None | Some(Value::Null) => Ok(None),
        Some(Value::String(e)) => Ok(Some(match e.as_str() {
            "low" | "minimal" => ReasoningEffort::Low,
            "medium" => ReasoningEffort::Medium,
            "high" | "xhigh" | "max" => ReasoningEffort::High,
            _ => {
                return Err(ApiError::invalid(
                    "output_config.effort must be low, medium, high or max.",
                    Some("output_config.effort"),
                ));
            }
        })),
        Some(_) => {
            Err(ApiError::invalid("output_config.effort must be a string.", Some("output_config.effort")))
        }
    }
}

/// Parses a messages request body. Nothing in the body chooses where the call goes except
/// `model`; fields that name a URL or a key are never followed.
pub fn parse_request(body: &Value) -> Result<Parsed, ApiError> {
    let obj = body.as_object().ok_or_else(|| ApiError::invalid("The body must be a JSON object.", None))?;
    let model = super::model_field(obj, "model: Field required")?;
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
    let mut conv = Conversation::default();
    if let Some(system) = obj.get("system") {
        let text = text_blocks(system, "system", &mut conv.dropped)?;
        conv.system.extend((!text.is_empty()).then_some(text));
    }
    for (i, m) in messages.iter().enumerate() {
        let at = format!("messages.{i}");
        let role = m
            .get("role")
            .and_then(Value::as_str)
            .ok_or_else(|| ApiError::invalid("role is missing.", Some(&at)))?;
        let blocks = blocks_of(m, &at)?;
        match role {
            "user" => conv.user(&blocks, &at)?,
            "assistant" => conv.assistant(&blocks, &at)?,
            // A mid-conversation system message (Claude Code's environment notes) joins the
            // system prompt: not every provider takes system turns between messages.
            "system" => {
                let text = text_blocks(&Value::Array(blocks), &at, &mut conv.dropped)?;
                conv.system.extend((!text.is_empty()).then_some(text));
            }
            other => {
                return Err(ApiError::invalid(
                    format!("Unknown role \"{}\".", other.chars().take(40).collect::<String>()),
                    Some(&format!("{at}.role")),
                ));
            }
        }
    }
    if conv.messages.is_empty() {
        return Err(ApiError::invalid(
            "messages needs a user or assistant message with content.",
            Some("messages"),
        ));
    }
    let mut dropped = std::mem::take(&mut conv.dropped);
    let tools = parse_tools(obj.get("tools"), &mut dropped)?;
    let temperature = super::temperature_field(obj.get("temperature"), 1.0, "temperature")?;
    let effort = effort(obj)?;
    let (thinking_budget, reasoning_effort) =
        match obj.get("thinking").and_then(|t| t.get("type")).and_then(Value::as_str) {
            Some("enabled") => (
                body.pointer("/thinking/budget_tokens")
                    .and_then(Value::as_u64)
                    .and_then(|n| u32::try_from(n).ok()),
                effort,
            ),
            Some("adaptive") => (None, Some(effort.unwrap_or(ReasoningEffort::Medium))),
            Some("disabled") => (None, None),
            _ => (None, effort),
        };
    for (key, _) in obj.iter().filter(|(_, v)| !v.is_null()) {
        match key.as_str() {
            "system" | "messages" | "tools" | "tool_choice" | "temperature" | "thinking" | "max_tokens" => {}
            "output_config" => {
                if obj.get("output_config").is_some_and(|c| c.get("format").is_some_and(|f| !f.is_null())) {
                    dropped.add("output_config.format");
                }
            }
            k if IGNORED.contains(&k) => {}
            k => dropped.add(super::plain_word(k)),
        }
    }
    Ok(Parsed {
        model,
        stream: obj.get("stream").and_then(Value::as_bool).unwrap_or(false),
        request: ChatRequest {
            model: String::new(),
            system: (!conv.system.is_empty()).then(|| conv.system.join("\n\n")),
            messages: conv.messages,
            tools,
            params: GenParams {
                temperature,
                max_output_tokens: Some(max_tokens),
                reasoning_effort,
                thinking_budget,
                tool_choice: parse_tool_choice(obj.get("tool_choice"))?,
            },
            passthrough: None,
        },
        dropped,
    })
}

#[cfg(test)]
mod tests;
