//! Requests in the Messages API shape: system, turns with their content blocks, tools, thinking.

use serde_json::{Map, Value, json};

use super::super::types::*;
use super::{DEFAULT_MAX_TOKENS, MIN_THINKING_BUDGET};

/// The Messages API body for `req`, streamed or not. A caller's own Messages body
/// ([`ChatRequest::passthrough`]) is sent as it came, with only `model` and `stream` set.
pub fn build_request(req: &ChatRequest, stream: bool) -> Value {
    if let Some(Value::Object(caller)) = req.passthrough.as_ref().map(|p| &p.body) {
        let mut body = caller.clone();
        body.insert("model".into(), Value::String(req.model.clone()));
        body.insert("stream".into(), Value::Bool(stream));
        return Value::Object(body);
    }
    let budget = thinking_budget(&req.params);
    let mut body = Map::new();
    body.insert("model".into(), Value::String(req.model.clone()));
    body.insert("max_tokens".into(), Value::from(max_tokens(&req.params, budget)));
    if let Some(system) = req.system.as_deref().filter(|s| !s.trim().is_empty()) {
        body.insert("system".into(), Value::String(system.to_string()));
    }
    body.insert("messages".into(), Value::Array(build_messages(&req.messages)));
    if !req.tools.is_empty() {
        body.insert("tools".into(), Value::Array(req.tools.iter().map(tool_json).collect()));
        if let Some(choice) = &req.params.tool_choice {
            let choice = match choice {
                ToolChoice::Auto => json!({ "type": "auto" }),
                ToolChoice::None => json!({ "type": "none" }),
                ToolChoice::Required => json!({ "type": "any" }),
                ToolChoice::Tool(name) => json!({ "type": "tool", "name": name }),
            };
            body.insert("tool_choice".into(), choice);
        }
    }
    match budget {
        Some(budget) => {
            body.insert("thinking".into(), json!({ "type": "enabled", "budget_tokens": budget }));
        }
        None => {
            if let Some(t) = req.params.temperature.and_then(temperature_json) {
                body.insert("temperature".into(), t);
            }
        }
    }
    body.insert("stream".into(), Value::Bool(stream));
    Value::Object(body)
}

/// The `count_tokens` body for `req`: the Messages body without `max_tokens`, `stream` or
/// sampling settings, which that endpoint does not take.
pub fn build_count_tokens(req: &ChatRequest) -> Value {
    let mut body = build_request(req, false);
    if let Value::Object(map) = &mut body {
        // What `count_tokens` refuses: the generation settings.
        for key in [
            "max_tokens",
            "stream",
            "temperature",
            "top_p",
            "top_k",
            "stop_sequences",
            "metadata",
            "service_tier",
        ] {
            map.remove(key);
        }
    }
    body
}

/// The thinking budget to send, if thinking is on.
pub(super) fn thinking_budget(params: &GenParams) -> Option<u32> {
    params.thinking_budget.filter(|&b| b > 0).map(|b| b.max(MIN_THINKING_BUDGET))
}

/// `max_tokens`: the requested limit (or the default), raised above the thinking budget.
pub(super) fn max_tokens(params: &GenParams, budget: Option<u32>) -> u32 {
    let wanted = params.max_output_tokens.unwrap_or(DEFAULT_MAX_TOKENS).max(1);
    match budget {
        Some(budget) if wanted <= budget => budget.saturating_add(wanted),
        _ => wanted,
    }
}

/// A temperature as a JSON number, clamped to 0..=1 and printed as written (not as an f32 widened
/// to f64, which would turn `0.7` into `0.699999988079071`).
pub(super) fn temperature_json(t: f32) -> Option<Value> {
    if !t.is_finite() {
        return None;
    }
    let t = t.clamp(0.0, 1.0);
    let widened: f64 = t.to_string().parse().ok()?;
    serde_json::Number::from_f64(widened).map(Value::Number)
}

/// One tool definition.
pub(super) fn tool_json(tool: &ToolSpec) -> Value {
    let schema = match tool.parameters.as_ref() {
        Value::Object(_) => tool.parameters.as_ref().clone(),
        _ => json!({ "type": "object", "properties": {} }),
    };
    json!({ "name": tool.name, "description": tool.description, "input_schema": schema })
}

/// One wire message under construction: `lead` blocks must come before `rest`.
pub(super) struct WireTurn {
    role: &'static str,
    lead: Vec<Value>,
    rest: Vec<Value>,
}

/// The `messages` array: roles mapped, blocks converted, adjacent same-role messages merged.
pub(super) fn build_messages(messages: &[ChatMessage]) -> Vec<Value> {
    let mut turns: Vec<WireTurn> = Vec::new();
    for message in messages {
        let role = match message.role {
            ChatRole::Assistant => "assistant",
            ChatRole::User | ChatRole::Tool => "user",
        };
        let is_assistant = role == "assistant";
        let mut lead = Vec::new();
        let mut rest = Vec::new();
        for part in &message.parts {
            push_part(part, is_assistant, &mut lead, &mut rest);
        }
        if lead.is_empty() && rest.is_empty() {
            continue;
        }
        match turns.last_mut() {
            Some(last) if last.role == role => {
                last.lead.append(&mut lead);
                last.rest.append(&mut rest);
            }
            _ => turns.push(WireTurn { role, lead, rest }),
        }
    }
    turns
        .into_iter()
        .map(|turn| {
            let mut content = turn.lead;
            content.extend(turn.rest);
            json!({ "role": turn.role, "content": content })
        })
        .collect()
}

/// Converts one part into content blocks, sorted into those that must lead and the rest.
pub(super) fn push_part(part: &Part, is_assistant: bool, lead: &mut Vec<Value>, rest: &mut Vec<Value>) {
    match part {
        Part::Text { text } => {
            if !text.trim().is_empty() {
                rest.push(json!({ "type": "text", "text": text }));
            }
        }
        Part::Image { mime, data_base64 } => rest.push(json!({
            "type": "image",
            "source": { "type": "base64", "media_type": mime, "data": data_base64 },
        })),
        Part::Document { mime, data_base64, name } => rest.push(json!({
            "type": "document",
            "source": { "type": "base64", "media_type": mime, "data": data_base64 },
            "title": name,
        })),
        Part::Thought { text, signature, redacted } => {
            if !is_assistant {
                return;
            }
            if let Some(signature) = signature.as_deref().filter(|s| !s.is_empty()) {
                lead.push(json!({ "type": "thinking", "thinking": text, "signature": signature }));
            }
            if let Some(data) = redacted.as_deref().filter(|d| !d.is_empty()) {
                lead.push(json!({ "type": "redacted_thinking", "data": data }));
            }
        }
        Part::ToolCall { id, name, arguments, .. } => {
            let input = match arguments {
                Value::Object(_) => arguments.clone(),
                _ => Value::Object(Map::new()),
            };
            rest.push(json!({ "type": "tool_use", "id": id, "name": name, "input": input }));
        }
        Part::ToolResult { call_id, content, is_error, .. } => lead.push(json!({
            "type": "tool_result",
            "tool_use_id": call_id,
            "content": content,
            "is_error": is_error,
        })),
    }
}
