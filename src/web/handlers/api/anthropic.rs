//! `POST /v1/messages` and `/v1/messages/count_tokens`: Anthropic Messages, served by whichever
//! provider the model names.

use actix_web::http::header;
use actix_web::{HttpRequest, HttpResponse, web};
use serde_json::{Value, json};

use super::{ApiCaller, StreamFormat, begin, collect, from_domain, pump, read_json, with_warning};
use crate::config::ProviderKind;
use crate::domain::gateway;
use crate::domain::runs::context;
use crate::gateway::{ApiError, anthropic};
use crate::providers::types::{Passthrough, ProviderEvent, Usage};
use crate::state::AppState;
use crate::web::api_caller::error_response;

/// An error in the Anthropic shape.
fn anthropic_error(e: &ApiError) -> HttpResponse {
    error_response(e, anthropic::error_body(e))
}

/// Parses a Messages body and keeps it, with the caller's `anthropic-beta` header, for an
/// Anthropic provider to receive as it came.
fn parse_with_passthrough(body: Value, req: &HttpRequest) -> Result<anthropic::Parsed, ApiError> {
    let mut parsed = anthropic::parse_request(&body)?;
    let beta = req.headers().get("anthropic-beta").and_then(|v| v.to_str().ok()).map(str::to_string);
    parsed.request.passthrough = Some(Passthrough { body, beta });
    Ok(parsed)
}

/// The `message_start … message_stop` stream, or the whole `message`.
struct Message {
    id: String,
    model: String,
    input_estimate: u64,
    writer: anthropic::Writer,
}

impl StreamFormat for Message {
    fn open(&mut self) -> Option<String> {
        Some(anthropic::Writer::start(&self.id, &self.model, self.input_estimate))
    }

    fn event(&mut self, ev: ProviderEvent) -> Option<String> {
        Some(self.writer.push(ev))
    }

    fn failed(&mut self, e: &ApiError) -> String {
        anthropic::error_event(e)
    }

    fn close(&mut self) -> Option<String> {
        Some(self.writer.finish())
    }

    fn usage(&self) -> Option<Usage> {
        self.writer.usage
    }

    fn produced(&self) -> usize {
        self.writer.produced
    }
}

/// `POST /v1/messages`: Anthropic Messages, streamed or whole. An Anthropic provider receives
/// the body as it came (with the caller's `anthropic-beta`); for another provider what it cannot
/// take is named in a `Warning` header rather than refused.
pub async fn messages(
    state: web::Data<AppState>,
    ApiCaller(caller): ApiCaller,
    req: HttpRequest,
    payload: web::Payload,
) -> HttpResponse {
    let mut parsed = match read_json(payload).await.and_then(|body| parse_with_passthrough(body, &req)) {
        Ok(p) => p,
        Err(e) => return anthropic_error(&e),
    };
    let opened = match begin(&state, &caller, &parsed.model, &parsed.request).await {
        Ok(o) => o,
        Err(e) => return anthropic_error(&e),
    };
    // An Anthropic provider gets the body as it came: nothing was left out.
    let warning = if opened.model.kind == ProviderKind::Anthropic { None } else { parsed.dropped.warning() };
    if opened.model.kind != ProviderKind::Anthropic {
        parsed.request.passthrough = None;
    }
    let mut format = Message {
        id: gateway::response_id("msg_"),
        model: opened.model.reference(),
        input_estimate: context::estimate_tokens(context::request_chars(&parsed.request)),
        writer: anthropic::Writer::default(),
    };
    if parsed.stream {
        let res = pump(state.into_inner(), caller, parsed.request, opened, format, "text/event-stream");
        return with_warning(res, warning);
    }
    if let Err(e) = collect(&state, &caller, &parsed.request, opened, &mut format).await {
        return anthropic_error(&e);
    }
    with_warning(HttpResponse::Ok().json(format.writer.message(&format.id, &format.model)), warning)
}

/// `POST /v1/messages/count_tokens`: exact when the serving provider can count, otherwise
/// Arbor's estimate with a `Warning: 199` header saying so.
pub async fn count_tokens(
    state: web::Data<AppState>,
    ApiCaller(caller): ApiCaller,
    req: HttpRequest,
    payload: web::Payload,
) -> HttpResponse {
    // count_tokens takes the messages body without max_tokens.
    let body = match read_json(payload).await {
        Ok(mut b) => {
            if let Some(o) = b.as_object_mut() {
                o.entry("max_tokens").or_insert(json!(1));
            }
            b
        }
        Err(e) => return anthropic_error(&e),
    };
    let parsed = match parse_with_passthrough(body, &req) {
        Ok(p) => p,
        Err(e) => return anthropic_error(&e),
    };
    match state.gateway.count_tokens(&caller.actor, &parsed.model, &parsed.request).await {
        Ok(c) if !c.estimated => HttpResponse::Ok().json(json!({ "input_tokens": c.tokens })),
        Ok(c) => HttpResponse::Ok()
            .insert_header((header::WARNING, super::ESTIMATE_WARNING))
            .json(json!({ "input_tokens": c.tokens })),
        Err(e) => anthropic_error(&from_domain(e, &parsed.model)),
    }
}
