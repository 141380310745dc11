//! Responses answers: the `response` object and the documented event sequence
//! (`response.created`, `response.output_item.added`, `response.output_text.delta`,
//! `response.function_call_arguments.delta`, `response.reasoning_summary_text.delta`, …,
//! `response.completed` or `response.failed`), each event numbered by `sequence_number`.

use serde_json::{Value, json};

use super::Echo;
use crate::gateway::ApiError;
use crate::providers::types::{ChatMessage, ChatRole, FinishReason, Part, ProviderEvent, Usage};

/// One output item as it is built.
#[derive(Debug, Clone, PartialEq)]
enum Item {
    Reasoning { id: String, text: String },
    Message { id: String, text: String },
    Call { id: String, call_id: String, name: String, arguments: String },
}

impl Item {
    fn id(&self) -> &str {
        match self {
            Item::Reasoning { id, .. } | Item::Message { id, .. } | Item::Call { id, .. } => id,
        }
    }

    fn json(&self, done: bool) -> Value {
        let status = if done { "completed" } else { "in_progress" };
        match self {
            Item::Reasoning { id, text } => {
                let summary =
                    if done { json!([{ "type": "summary_text", "text": text }]) } else { json!([]) };
                json!({ "type": "reasoning", "id": id, "summary": summary })
            }
            Item::Message { id, text } => {
                let content = if done {
                    json!([{ "type": "output_text", "text": text, "annotations": [] }])
                } else {
                    json!([])
                };
                json!({ "type": "message", "id": id, "status": status, "role": "assistant", "content": content })
            }
            Item::Call { id, call_id, name, arguments } => json!({
                "type": "function_call", "id": id, "call_id": call_id, "name": name,
                "arguments": if done { arguments.as_str() } else { "" }, "status": status,
            }),
        }
    }
}

/// The response object and its events, built from provider events.
#[derive(Debug, Clone)]
pub struct Writer {
    id: String,
    model: String,
    created_at: i64,
    echo: Echo,
    previous_response_id: Option<String>,
    store: bool,
    items: Vec<Item>,
    open: bool,
    sequence: u64,
    /// Token counts the provider reported.
    pub usage: Option<Usage>,
    finish: Option<FinishReason>,
    /// Characters of text and call arguments produced.
    pub produced: usize,
}

/// The whole `response` object.
#[allow(clippy::too_many_arguments)]
pub fn response_json(
    id: &str,
    model: &str,
    created_at: i64,
    status: &str,
    output: Value,
    usage: Option<&Usage>,
    echo: &Echo,
    previous_response_id: Option<&str>,
    store: bool,
    error: Value,
) -> Value {
    let usage = usage.map_or(Value::Null, |u| {
        json!({
            "input_tokens": u.input_tokens,
            "input_tokens_details": { "cached_tokens": u.cached_input_tokens },
            "output_tokens": u.output_tokens,
            "output_tokens_details": { "reasoning_tokens": 0 },
            "total_tokens": u.input_tokens + u.output_tokens,
        })
    });
    json!({
        "id": id, "object": "response", "created_at": created_at, "status": status, "model": model,
        "output": output, "usage": usage, "error": error, "incomplete_details": Value::Null,
        "instructions": echo.instructions, "max_output_tokens": echo.max_output_tokens,
        "temperature": echo.temperature, "top_p": Value::Null, "tools": echo.tools,
        "tool_choice": echo.tool_choice, "parallel_tool_calls": echo.parallel_tool_calls,
        "reasoning": echo.reasoning, "previous_response_id": previous_response_id, "store": store,
        "text": { "format": { "type": "text" } }, "truncation": "disabled", "metadata": echo.metadata,
        "user": Value::Null,
    })
}

impl Writer {
    /// A writer for response `id`, answered by `model`.
    pub fn new(
        id: &str,
        model: &str,
        echo: Echo,
        previous_response_id: Option<String>,
        store: bool,
    ) -> Writer {
        Writer {
            id: id.to_string(),
            model: model.to_string(),
            created_at: chrono::Utc::now().timestamp(),
            echo,
            previous_response_id,
            store,
            items: Vec::new(),
            open: false,
            sequence: 0,
            usage: None,
            finish: None,
            produced: 0,
        }
    }

    /// The response's id.
    pub fn id(&self) -> &str {
        &self.id
    }

    fn event(&mut self, kind: &str, mut data: Value) -> String {
        data["type"] = json!(kind);
        data["sequence_number"] = json!(self.sequence);
        self.sequence += 1;
        format!("event: {kind}\ndata: {data}\n\n")
    }

    /// The response object with this status and the output so far.
    pub fn response(&self, status: &str, error: Value) -> Value {
        let output: Vec<Value> = self.items.iter().map(|i| i.json(true)).collect();
        response_json(
            &self.id,
            &self.model,
            self.created_at,
            status,
            Value::Array(output),
            self.usage.as_ref().filter(|_| status != "in_progress"),
            &self.echo,
            self.previous_response_id.as_deref(),
            self.store,
            error,
        )
    }

    /// `response.created` and `response.in_progress`.
    pub fn start(&mut self) -> String {
        let response = self.response("in_progress", Value::Null);
        let mut out = self.event("response.created", json!({ "response": response }));
        let response = self.response("in_progress", Value::Null);
        out.push_str(&self.event("response.in_progress", json!({ "response": response })));
        out
    }

    fn close(&mut self, out: &mut String) {
        if !self.open {
            return;
        }
        self.open = false;
        let index = self.items.len() - 1;
        let item = self.items[index].clone();
        let id = item.id().to_string();
        match &item {
            Item::Reasoning { text, .. } => {
                let part = json!({ "type": "summary_text", "text": text });
                let base = json!({ "item_id": id, "output_index": index, "summary_index": 0 });
                let mut done = base.clone();
                done["text"] = json!(text);
                out.push_str(&self.event("response.reasoning_summary_text.done", done));
                let mut part_done = base;
                part_done["part"] = part;
                out.push_str(&self.event("response.reasoning_summary_part.done", part_done));
            }
            Item::Message { text, .. } => {
                let base = json!({ "item_id": id, "output_index": index, "content_index": 0 });
                let mut done = base.clone();
                done["text"] = json!(text);
                done["logprobs"] = json!([]);
                out.push_str(&self.event("response.output_text.done", done));
                let mut part_done = base;
                part_done["part"] = json!({ "type": "output_text", "text": text, "annotations": [] });
                out.push_str(&self.event("response.content_part.done", part_done));
            }
            Item::Call { arguments, .. } => {
                let done = json!({ "item_id": id, "output_index": index, "arguments": arguments });
                out.push_str(&self.event("response.function_call_arguments.done", done));
            }
        }
        let done = json!({ "output_index": index, "item": item.json(true) });
        out.push_str(&self.event("response.output_item.done", done));
    }

    fn begin(&mut self, item: Item, out: &mut String) -> usize {
        self.close(out);
        let index = self.items.len();
        let added = json!({ "output_index": index, "item": item.json(false) });
        let id = item.id().to_string();
        let first_part = match &item {
            Item::Reasoning { .. } => Some((
                "response.reasoning_summary_part.added",
                json!({ "item_id": id, "output_index": index, "summary_index": 0, "part": { "type": "summary_text", "text": "" } }),
            )),
            Item::Message { .. } => Some((
                "response.content_part.added",
                json!({ "item_id": id, "output_index": index, "content_index": 0, "part": { "type": "output_text", "text": "", "annotations": [] } }),
            )),
            Item::Call { .. } => None,
        };
        self.items.push(item);
        self.open = true;
        out.push_str(&self.event("response.output_item.added", added));
        if let Some((kind, data)) = first_part {
            out.push_str(&self.event(kind, data));
        }
        index
    }

    /// Takes one provider event; returns the stream events it makes (possibly none).
    pub fn push(&mut self, ev: ProviderEvent) -> String {
        let mut out = String::new();
        match ev {
            ProviderEvent::TextDelta(t) => {
                self.produced += t.len();
                let index = match self.items.last_mut() {
                    Some(Item::Message { text, .. }) if self.open => {
                        text.push_str(&t);
                        self.items.len() - 1
                    }
                    _ => {
                        let id = format!("msg_{}", uuid::Uuid::now_v7().simple());
                        self.begin(Item::Message { id, text: t.clone() }, &mut out)
                    }
                };
                let id = self.items[index].id().to_string();
                let delta = json!({ "item_id": id, "output_index": index, "content_index": 0, "delta": t, "logprobs": [] });
                out.push_str(&self.event("response.output_text.delta", delta));
            }
            ProviderEvent::ThoughtDelta(t) => {
                let index = match self.items.last_mut() {
                    Some(Item::Reasoning { text, .. }) if self.open => {
                        text.push_str(&t);
                        self.items.len() - 1
                    }
                    _ => {
                        let id = format!("rs_{}", uuid::Uuid::now_v7().simple());
                        self.begin(Item::Reasoning { id, text: t.clone() }, &mut out)
                    }
                };
                let id = self.items[index].id().to_string();
                let delta = json!({ "item_id": id, "output_index": index, "summary_index": 0, "delta": t });
                out.push_str(&self.event("response.reasoning_summary_text.delta", delta));
            }
            ProviderEvent::ToolCall { id: call_id, name, arguments, .. } => {
                let arguments = arguments.to_string();
                self.produced += arguments.len();
                let id = format!("fc_{}", uuid::Uuid::now_v7().simple());
                let item = Item::Call { id: id.clone(), call_id, name, arguments: arguments.clone() };
                let index = self.begin(item, &mut out);
                let delta = json!({ "item_id": id, "output_index": index, "delta": arguments });
                out.push_str(&self.event("response.function_call_arguments.delta", delta));
                self.close(&mut out);
            }
            ProviderEvent::Usage(u) => self.usage = Some(u),
            ProviderEvent::Finish(f) => self.finish = Some(f),
            ProviderEvent::ThoughtSignature(_)
            | ProviderEvent::RedactedThought(_)
            | ProviderEvent::Error(_) => {}
        }
        out
    }

    /// The status a finished answer has: `incomplete` when the output limit cut it.
    fn final_status(&self) -> &'static str {
        if self.finish == Some(FinishReason::Length) { "incomplete" } else { "completed" }
    }

    /// Closes the last item and sends `response.completed` (or `response.incomplete`).
    pub fn finish(&mut self) -> String {
        let mut out = String::new();
        self.close(&mut out);
        let status = self.final_status();
        let mut response = self.response(status, Value::Null);
        if status == "incomplete" {
            response["incomplete_details"] = json!({ "reason": "max_output_tokens" });
        }
        let kind = if status == "completed" { "response.completed" } else { "response.incomplete" };
        out.push_str(&self.event(kind, json!({ "response": response })));
        out
    }

    /// `response.failed`, with the error in the response object.
    pub fn failed(&mut self, e: &ApiError) -> String {
        let error = json!({ "code": e.kind, "message": e.message });
        let response = self.response("failed", error);
        self.event("response.failed", json!({ "response": response }))
    }

    /// The whole response object of a finished answer.
    pub fn whole(&self) -> Value {
        let mut response = self.response(self.final_status(), Value::Null);
        if self.final_status() == "incomplete" {
            response["incomplete_details"] = json!({ "reason": "max_output_tokens" });
        }
        response
    }

    /// The answer as a conversation message, for a stored response's chain.
    pub fn output_message(&self) -> Option<ChatMessage> {
        let parts: Vec<Part> = self
            .items
            .iter()
            .map(|item| match item {
                Item::Reasoning { text, .. } => {
                    Part::Thought { text: text.clone(), signature: None, redacted: None }
                }
                Item::Message { text, .. } => Part::Text { text: text.clone() },
                Item::Call { call_id, name, arguments, .. } => Part::ToolCall {
                    id: call_id.clone(),
                    name: name.clone(),
                    arguments: serde_json::from_str(arguments).unwrap_or(Value::Null),
                    signature: None,
                },
            })
            .collect();
        (!parts.is_empty()).then_some(ChatMessage { role: ChatRole::Assistant, parts })
    }
}
