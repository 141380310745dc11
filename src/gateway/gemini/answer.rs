//! Gemini answers: `GenerateContentResponse` chunks as the provider's events arrive, the whole
//! response, the model list entries and Google's error body.

use serde_json::{Value, json};

use crate::gateway::ApiError;
use crate::providers::types::{FinishReason, ProviderEvent, Usage};

/// Builds response chunks (streamed) or the whole response from provider events.
#[derive(Debug, Clone, Default)]
pub struct Writer {
    /// Every part produced, consecutive texts of one kind merged (for the whole response).
    parts: Vec<Value>,
    /// A thought signature waiting for the next part.
    signature: Option<String>,
    /// Token counts the provider reported.
    pub usage: Option<Usage>,
    finish: Option<FinishReason>,
    /// Characters of text and call arguments produced.
    pub produced: usize,
}

fn finish_reason(f: Option<&FinishReason>) -> &'static str {
    match f {
        Some(FinishReason::Length) => "MAX_TOKENS",
        Some(FinishReason::ContentFilter) => "SAFETY",
        Some(FinishReason::Other(_)) => "OTHER",
        _ => "STOP",
    }
}

fn usage_json(u: &Usage) -> Value {
    json!({
        "promptTokenCount": u.input_tokens,
        "candidatesTokenCount": u.output_tokens,
        "totalTokenCount": u.input_tokens + u.output_tokens,
        "cachedContentTokenCount": u.cached_input_tokens,
    })
}

fn candidate(parts: Vec<Value>, finish: Option<&str>) -> Value {
    let mut c = json!({ "content": { "role": "model", "parts": parts }, "index": 0 });
    if let Some(f) = finish {
        c["finishReason"] = json!(f);
    }
    c
}

impl Writer {
    /// Takes one provider event; returns the part it makes, if any.
    pub fn push(&mut self, ev: ProviderEvent) -> Option<Value> {
        let mut part = match ev {
            ProviderEvent::TextDelta(t) => {
                self.produced += t.len();
                json!({ "text": t })
            }
            ProviderEvent::ThoughtDelta(t) => json!({ "text": t, "thought": true }),
            ProviderEvent::ThoughtSignature(sig) => {
                self.signature = Some(sig);
                return None;
            }
            ProviderEvent::ToolCall { id, name, arguments, signature } => {
                self.produced += arguments.to_string().len();
                if signature.is_some() {
                    self.signature = signature;
                }
                json!({ "functionCall": { "id": id, "name": name, "args": arguments } })
            }
            ProviderEvent::Usage(u) => {
                self.usage = Some(u);
                return None;
            }
            ProviderEvent::Finish(f) => {
                self.finish = Some(f);
                return None;
            }
            ProviderEvent::Error(_) | ProviderEvent::RedactedThought(_) => return None,
        };
        if let Some(sig) = self.signature.take() {
            part["thoughtSignature"] = json!(sig);
        }
        self.keep(&part);
        Some(part)
    }

    fn keep(&mut self, part: &Value) {
        let text = part.get("text").and_then(Value::as_str);
        let thought = part.get("thought").is_some();
        if let (Some(text), Some(last)) = (text, self.parts.last_mut()) {
            let same_kind =
                last.get("thought").is_some() == thought && last.get("thoughtSignature").is_none();
            if let (true, Some(Value::String(s))) = (same_kind, last.get_mut("text")) {
                s.push_str(text);
                return;
            }
        }
        self.parts.push(part.clone());
    }

    /// One streamed chunk carrying `part`.
    pub fn chunk(&self, part: Value, model: &str, id: &str) -> Value {
        json!({ "candidates": [candidate(vec![part], None)], "modelVersion": model, "responseId": id })
    }

    /// The last streamed chunk: the finish reason and the usage.
    pub fn last_chunk(&self, model: &str, id: &str) -> Value {
        let parts = vec![json!({ "text": "" })];
        json!({
            "candidates": [candidate(parts, Some(finish_reason(self.finish.as_ref())))],
            "usageMetadata": usage_json(&self.usage.unwrap_or_default()),
            "modelVersion": model,
            "responseId": id,
        })
    }

    /// The whole response.
    pub fn response(&self, model: &str, id: &str) -> Value {
        json!({
            "candidates": [candidate(self.parts.clone(), Some(finish_reason(self.finish.as_ref())))],
            "usageMetadata": usage_json(&self.usage.unwrap_or_default()),
            "modelVersion": model,
            "responseId": id,
        })
    }
}

/// A `countTokens` answer.
pub fn count_json(total: u64) -> Value {
    json!({ "totalTokens": total })
}

/// One `models.list` entry; `id` may contain `/` (`provider/model`).
pub fn model_json(id: &str, display: &str, context: Option<u64>, output: Option<u64>) -> Value {
    let mut m = json!({
        "name": format!("models/{id}"),
        "baseModelId": id,
        "version": "arbor",
        "displayName": display,
        "supportedGenerationMethods": ["generateContent", "streamGenerateContent", "countTokens"],
    });
    if let Some(n) = context {
        m["inputTokenLimit"] = json!(n);
    }
    if let Some(n) = output {
        m["outputTokenLimit"] = json!(n);
    }
    m
}

/// Google's status word for an HTTP status.
fn status_word(status: u16) -> &'static str {
    match status {
        400 | 413 | 422 => "INVALID_ARGUMENT",
        401 => "UNAUTHENTICATED",
        403 => "PERMISSION_DENIED",
        404 => "NOT_FOUND",
        405 => "UNIMPLEMENTED",
        409 => "ABORTED",
        429 => "RESOURCE_EXHAUSTED",
        503 | 529 => "UNAVAILABLE",
        504 => "DEADLINE_EXCEEDED",
        _ => "INTERNAL",
    }
}

/// The `{"error": {"code", "message", "status"}}` body.
pub fn error_body(e: &ApiError) -> Value {
    json!({ "error": { "code": e.status, "message": e.message, "status": status_word(e.status) } })
}
