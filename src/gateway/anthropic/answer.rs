//! Anthropic answers: the whole `message` body, the `message_start … message_stop` event stream
//! and the `{"type": "error", …}` body.

use serde_json::{Value, json};

use crate::gateway::ApiError;
use crate::providers::types::{FinishReason, ProviderEvent, Usage};

/// The `stop_reason` spelling.
pub fn stop_reason(f: Option<&FinishReason>, had_tools: bool) -> &'static str {
    match f {
        Some(FinishReason::Length) => "max_tokens",
        Some(FinishReason::ToolCalls) => "tool_use",
        Some(FinishReason::ContentFilter) => "refusal",
        Some(_) => "end_turn",
        None if had_tools => "tool_use",
        None => "end_turn",
    }
}

fn usage_json(u: &Usage) -> Value {
    json!({
        "input_tokens": u.input_tokens.saturating_sub(u.cached_input_tokens).saturating_sub(u.cache_written_input_tokens),
        "cache_read_input_tokens": u.cached_input_tokens,
        "cache_creation_input_tokens": u.cache_written_input_tokens,
        "output_tokens": u.output_tokens,
    })
}

/// One content block of an answer.
#[derive(Debug, Clone, PartialEq)]
enum Block {
    Text(String),
    Thinking(String, String),
    /// Reasoning the provider redacted: its opaque `data`, relayed so the client can send it back.
    Redacted(String),
    ToolUse(String, String, Value),
}

/// Builds the `message` body (whole) or the event stream (streamed) from provider events.
#[derive(Debug, Clone, Default)]
pub struct Writer {
    blocks: Vec<Block>,
    open: bool,
    /// Token counts the provider reported.
    pub usage: Option<Usage>,
    finish: Option<FinishReason>,
    /// Characters of text and tool input produced.
    pub produced: usize,
}

fn event(name: &str, data: &Value) -> String {
    format!("event: {name}\ndata: {data}\n\n")
}

impl Writer {
    /// The opening `message_start` event.
    pub fn start(id: &str, model: &str, input_estimate: u64) -> String {
        event(
            "message_start",
            &json!({ "type": "message_start", "message": {
                "id": id, "type": "message", "role": "assistant", "model": model, "content": [],
                "stop_reason": Value::Null, "stop_sequence": Value::Null,
                "usage": { "input_tokens": input_estimate, "output_tokens": 0 }
            }}),
        )
    }

    fn close(&mut self, out: &mut String) {
        if self.open {
            let index = self.blocks.len() - 1;
            out.push_str(&event(
                "content_block_stop",
                &json!({ "type": "content_block_stop", "index": index }),
            ));
            self.open = false;
        }
    }

    fn begin(&mut self, block: Block, start: Value, out: &mut String) -> usize {
        self.close(out);
        self.blocks.push(block);
        let index = self.blocks.len() - 1;
        out.push_str(&event(
            "content_block_start",
            &json!({ "type": "content_block_start", "index": index, "content_block": start }),
        ));
        self.open = true;
        index
    }

    /// Takes one provider event; returns the stream events it makes (possibly none).
    pub fn push(&mut self, ev: ProviderEvent) -> String {
        let mut out = String::new();
        match ev {
            ProviderEvent::TextDelta(t) => {
                self.produced += t.len();
                let index = match self.blocks.last_mut() {
                    Some(Block::Text(s)) if self.open => {
                        s.push_str(&t);
                        self.blocks.len() - 1
                    }
                    _ => self.begin(Block::Text(t.clone()), json!({ "type": "text", "text": "" }), &mut out),
                };
                let delta = json!({ "type": "content_block_delta", "index": index, "delta": { "type": "text_delta", "text": t } });
                out.push_str(&event("content_block_delta", &delta));
            }
            ProviderEvent::ThoughtDelta(t) => {
                let index = match self.blocks.last_mut() {
                    Some(Block::Thinking(s, _)) if self.open => {
                        s.push_str(&t);
                        self.blocks.len() - 1
                    }
                    _ => self.begin(
                        Block::Thinking(t.clone(), String::new()),
                        json!({ "type": "thinking", "thinking": "" }),
                        &mut out,
                    ),
                };
                let delta = json!({ "type": "content_block_delta", "index": index, "delta": { "type": "thinking_delta", "thinking": t } });
                out.push_str(&event("content_block_delta", &delta));
            }
            ProviderEvent::ThoughtSignature(sig) => {
                if let (Some(Block::Thinking(_, s)), true) = (self.blocks.last_mut(), self.open) {
                    s.push_str(&sig);
                    let index = self.blocks.len() - 1;
                    let delta = json!({ "type": "content_block_delta", "index": index, "delta": { "type": "signature_delta", "signature": sig } });
                    out.push_str(&event("content_block_delta", &delta));
                }
            }
            ProviderEvent::ToolCall { id, name, arguments, .. } => {
                let raw = arguments.to_string();
                self.produced += raw.len();
                let start = json!({ "type": "tool_use", "id": id, "name": name, "input": {} });
                let index = self.begin(Block::ToolUse(id, name, arguments), start, &mut out);
                let delta = json!({ "type": "content_block_delta", "index": index, "delta": { "type": "input_json_delta", "partial_json": raw } });
                out.push_str(&event("content_block_delta", &delta));
                self.close(&mut out);
            }
            ProviderEvent::Usage(u) => self.usage = Some(u),
            ProviderEvent::Finish(f) => self.finish = Some(f),
            ProviderEvent::RedactedThought(data) => {
                let start = json!({ "type": "redacted_thinking", "data": data });
                self.begin(Block::Redacted(data), start, &mut out);
                self.close(&mut out);
            }
            ProviderEvent::Error(_) => {}
        }
        out
    }

    fn had_tools(&self) -> bool {
        self.blocks.iter().any(|b| matches!(b, Block::ToolUse(..)))
    }

    /// The closing events: the last block's stop, `message_delta` and `message_stop`.
    pub fn finish(&mut self) -> String {
        let mut out = String::new();
        self.close(&mut out);
        let u = self.usage.unwrap_or_default();
        let delta = json!({
            "type": "message_delta",
            "delta": { "stop_reason": stop_reason(self.finish.as_ref(), self.had_tools()), "stop_sequence": Value::Null },
            "usage": usage_json(&u),
        });
        out.push_str(&event("message_delta", &delta));
        out.push_str(&event("message_stop", &json!({ "type": "message_stop" })));
        out
    }

    /// The whole `message` body.
    pub fn message(&self, id: &str, model: &str) -> Value {
        let content: Vec<Value> = self
            .blocks
            .iter()
            .map(|b| match b {
                Block::Text(t) => json!({ "type": "text", "text": t }),
                Block::Thinking(t, s) => json!({ "type": "thinking", "thinking": t, "signature": s }),
                Block::Redacted(data) => json!({ "type": "redacted_thinking", "data": data }),
                Block::ToolUse(id, name, input) => {
                    json!({ "type": "tool_use", "id": id, "name": name, "input": input })
                }
            })
            .collect();
        json!({
            "id": id,
            "type": "message",
            "role": "assistant",
            "model": model,
            "content": content,
            "stop_reason": stop_reason(self.finish.as_ref(), self.had_tools()),
            "stop_sequence": Value::Null,
            "usage": usage_json(&self.usage.unwrap_or_default()),
        })
    }
}

/// The `type` an Anthropic error carries for a status.
fn error_type(e: &ApiError) -> &'static str {
    match e.status {
        401 => "authentication_error",
        403 => "permission_error",
        404 => "not_found_error",
        413 => "request_too_large",
        429 => "rate_limit_error",
        503 | 529 => "overloaded_error",
        s if s >= 500 => "api_error",
        _ => "invalid_request_error",
    }
}

/// The `{"type": "error", …}` body.
pub fn error_body(e: &ApiError) -> Value {
    json!({ "type": "error", "error": { "type": error_type(e), "message": e.message } })
}

/// The `error` event of a stream that failed after it began.
pub fn error_event(e: &ApiError) -> String {
    event("error", &error_body(e))
}
