//! `POST /v1/chat/completions`: OpenAI Chat Completions, whole or streamed.

use actix_web::{HttpResponse, web};
use serde_json::json;

use super::{ApiCaller, StreamFormat, begin, collect, openai_error, pump, read_json};
use crate::domain::gateway;
use crate::gateway::{ApiError, openai};
use crate::providers::types::{ProviderEvent, Usage};
use crate::state::AppState;

/// `chat.completion.chunk`s (streamed) or one `chat.completion` (whole) from provider events.
struct Completion {
    id: String,
    created: i64,
    model: String,
    include_usage: bool,
    answer: openai::Answer,
    /// The shared parts of the streamed text chunks (streamed answers only).
    text_chunks: Option<openai::TextChunks>,
    calls: usize,
    reported: Option<Usage>,
    produced: usize,
}

impl Completion {
    fn new(model: String, include_usage: bool, stream: bool) -> Completion {
        let id = gateway::response_id("chatcmpl-");
        let created = chrono::Utc::now().timestamp();
        Completion {
            text_chunks: stream.then(|| openai::TextChunks::new(&id, created, &model)),
            id,
            created,
            model,
            include_usage,
            answer: openai::Answer::default(),
            calls: 0,
            reported: None,
            produced: 0,
        }
    }

    fn chunk(&self, delta: serde_json::Value, finish: Option<&str>) -> String {
        openai::sse(&openai::chunk(&self.id, self.created, &self.model, delta, finish))
    }

    /// A text delta's chunk: written from the shared parts when streaming (the whole answer
    /// is kept only when it is returned whole).
    fn text_chunk(&mut self, field: &str, text: String) -> Option<String> {
        match &self.text_chunks {
            Some(chunks) => Some(chunks.line(field, &text)),
            None => {
                let kept =
                    if field == "content" { &mut self.answer.text } else { &mut self.answer.reasoning };
                kept.push_str(&text);
                None
            }
        }
    }
}

impl StreamFormat for Completion {
    fn open(&mut self) -> Option<String> {
        Some(self.chunk(json!({ "role": "assistant", "content": "" }), None))
    }

    fn event(&mut self, ev: ProviderEvent) -> Option<String> {
        match ev {
            ProviderEvent::TextDelta(t) => {
                self.produced += t.len();
                self.text_chunk("content", t)
            }
            ProviderEvent::ThoughtDelta(t) => self.text_chunk("reasoning_content", t),
            ProviderEvent::ToolCall { id, name, arguments, .. } => {
                self.produced += arguments.to_string().len();
                let call = openai::tool_call_json(self.calls, &id, &name, &arguments);
                self.calls += 1;
                self.answer.tool_calls.push((id, name, arguments));
                Some(self.chunk(json!({ "tool_calls": [call] }), None))
            }
            ProviderEvent::Usage(u) => {
                self.reported = Some(u);
                None
            }
            ProviderEvent::Finish(f) => {
                self.answer.finish = Some(f);
                None
            }
            _ => None,
        }
    }

    fn failed(&mut self, e: &ApiError) -> String {
        openai::sse(&openai::error_body(e))
    }

    fn close(&mut self) -> Option<String> {
        let reason = match (&self.answer.finish, self.calls) {
            (Some(f), _) => openai::finish_reason(f),
            (None, 0) => "stop",
            (None, _) => "tool_calls",
        };
        let mut out = self.chunk(json!({}), Some(reason));
        if self.include_usage {
            let usage =
                openai::usage_chunk(&self.id, self.created, &self.model, &self.reported.unwrap_or_default());
            out.push_str(&openai::sse(&usage));
        }
        out.push_str("data: [DONE]\n\n");
        Some(out)
    }

    fn usage(&self) -> Option<Usage> {
        self.reported
    }

    fn produced(&self) -> usize {
        self.produced
    }
}

/// `POST /v1/chat/completions`: OpenAI Chat Completions, served by whichever provider the
/// model names, streamed or whole.
pub async fn chat_completions(
    state: web::Data<AppState>,
    ApiCaller(caller): ApiCaller,
    payload: web::Payload,
) -> HttpResponse {
    let parsed = match read_json(payload).await.and_then(|body| openai::parse_request(&body)) {
        Ok(p) => p,
        Err(e) => return openai_error(&e),
    };
    let opened = match begin(&state, &caller, &parsed.model, &parsed.request).await {
        Ok(o) => o,
        Err(e) => return openai_error(&e),
    };
    let mut format = Completion::new(opened.model.reference(), parsed.include_usage, parsed.stream);
    if parsed.stream {
        return pump(state.into_inner(), caller, parsed.request, opened, format, "text/event-stream");
    }
    if let Err(e) = collect(&state, &caller, &parsed.request, opened, &mut format).await {
        return openai_error(&e);
    }
    format.answer.usage = format.reported.unwrap_or_default();
    HttpResponse::Ok().json(openai::completion(&format.id, format.created, &format.model, &format.answer))
}
