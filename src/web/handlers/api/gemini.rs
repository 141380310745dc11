//! The Google GenAI surface under `/v1beta` (Gemini CLI, the `google-genai` SDKs): the model
//! list, `:generateContent`, `:streamGenerateContent` (SSE with `alt=sse`, else a streamed
//! JSON array), `:countTokens`, `:embedContent` and `:batchEmbedContents`, served by whichever
//! provider the model names.

use actix_web::http::header;
use actix_web::{HttpRequest, HttpResponse, web};
use serde_json::Value;

use super::{ApiCaller, StreamFormat, begin, collect, from_domain, pump, read_json, with_warning};
use crate::domain::gateway;
use crate::gateway::{ApiError, embeddings, gemini};
use crate::providers::types::{ProviderEvent, Usage};
use crate::state::AppState;
use crate::web::api_caller::error_response;

/// An error in Google's shape.
fn gemini_error(e: &ApiError) -> HttpResponse {
    error_response(e, gemini::error_body(e))
}

/// How a streamed answer is framed.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Framing {
    /// `alt=sse`: one `data:` event per chunk.
    Sse,
    /// The default: one JSON array, an element per chunk.
    Array,
}

/// `GenerateContentResponse` chunks, framed, or the whole response.
struct Generate {
    id: String,
    model: String,
    framing: Framing,
    sent: usize,
    writer: gemini::Writer,
}

impl Generate {
    fn frame(&mut self, chunk: &Value) -> String {
        self.sent += 1;
        match self.framing {
            Framing::Sse => format!("data: {chunk}\r\n\r\n"),
            Framing::Array if self.sent == 1 => format!("[{chunk}"),
            Framing::Array => format!(",\r\n{chunk}"),
        }
    }
}

impl StreamFormat for Generate {
    fn open(&mut self) -> Option<String> {
        None
    }

    fn event(&mut self, ev: ProviderEvent) -> Option<String> {
        let part = self.writer.push(ev)?;
        let chunk = self.writer.chunk(part, &self.model, &self.id);
        Some(self.frame(&chunk))
    }

    fn failed(&mut self, e: &ApiError) -> String {
        let body = gemini::error_body(e);
        let mut out = self.frame(&body);
        if self.framing == Framing::Array {
            out.push(']');
        }
        out
    }

    fn close(&mut self) -> Option<String> {
        let last = self.writer.last_chunk(&self.model, &self.id);
        let mut out = self.frame(&last);
        if self.framing == Framing::Array {
            out.push(']');
        }
        Some(out)
    }

    fn usage(&self) -> Option<Usage> {
        self.writer.usage
    }

    fn produced(&self) -> usize {
        self.writer.produced
    }
}

/// `GET /v1beta/models`: the models this token's user may use, then their aliases.
pub async fn gemini_models(state: web::Data<AppState>, ApiCaller(caller): ApiCaller) -> HttpResponse {
    match state.gateway.listing(&caller.actor).await {
        Ok(list) => {
            let models: Vec<Value> = list
                .iter()
                .map(|m| {
                    gemini::model_json(&m.id, m.target.as_deref().unwrap_or(&m.id), m.limits.0, m.limits.1)
                })
                .collect();
            HttpResponse::Ok().json(serde_json::json!({ "models": models }))
        }
        Err(e) => gemini_error(&from_domain(e, "")),
    }
}

/// `GET /v1beta/models/{model}`: one model, if this token's user may use it.
pub async fn gemini_model(
    state: web::Data<AppState>,
    ApiCaller(caller): ApiCaller,
    target: web::Path<String>,
) -> HttpResponse {
    let wanted = target.strip_prefix("models/").unwrap_or(&target);
    match state.gateway.listing(&caller.actor).await {
        Ok(list) => match list.iter().find(|m| m.id == wanted) {
            Some(m) => HttpResponse::Ok().json(gemini::model_json(
                &m.id,
                m.target.as_deref().unwrap_or(&m.id),
                m.limits.0,
                m.limits.1,
            )),
            None => gemini_error(&from_domain(crate::domain::DomainError::NotFound, wanted)),
        },
        Err(e) => gemini_error(&from_domain(e, wanted)),
    }
}

/// `POST /v1beta/models/{model}:{method}`: `generateContent`, `streamGenerateContent` or
/// `countTokens`.
pub async fn gemini_post(
    state: web::Data<AppState>,
    ApiCaller(caller): ApiCaller,
    req: HttpRequest,
    target: web::Path<String>,
    payload: web::Payload,
) -> HttpResponse {
    let Some((model, method)) = gemini::split_target(&target) else {
        return gemini_error(&ApiError::new(
            404,
            "not_found",
            "Name a model and a method: models/{model}:{method}.",
        ));
    };
    let stream = match method {
        "generateContent" => None,
        "streamGenerateContent" => {
            let sse = req.query_string().split('&').any(|p| p == "alt=sse");
            Some(if sse { Framing::Sse } else { Framing::Array })
        }
        "countTokens" => return count_tokens(&state, &caller, model, payload).await,
        "embedContent" => return embed(&state, &caller, model, payload, false).await,
        "batchEmbedContents" => return embed(&state, &caller, model, payload, true).await,
        _ => {
            let method: String = method.chars().take(40).collect();
            return gemini_error(&ApiError::new(
                404,
                "not_found",
                format!("The method \"{method}\" is not served."),
            ));
        }
    };
    let parsed = match read_json(payload).await.and_then(|body| gemini::parse_request(model, &body)) {
        Ok(p) => p,
        Err(e) => return gemini_error(&e),
    };
    let opened = match begin(&state, &caller, &parsed.model, &parsed.request).await {
        Ok(o) => o,
        Err(e) => return gemini_error(&e),
    };
    let warning = parsed.dropped.warning();
    let mut format = Generate {
        id: gateway::response_id(""),
        model: opened.model.reference(),
        framing: stream.unwrap_or(Framing::Sse),
        sent: 0,
        writer: gemini::Writer::default(),
    };
    if let Some(framing) = stream {
        let content_type = if framing == Framing::Sse { "text/event-stream" } else { "application/json" };
        let res = pump(state.into_inner(), caller, parsed.request, opened, format, content_type);
        return with_warning(res, warning);
    }
    if let Err(e) = collect(&state, &caller, &parsed.request, opened, &mut format).await {
        return gemini_error(&e);
    }
    with_warning(HttpResponse::Ok().json(format.writer.response(&format.model, &format.id)), warning)
}

/// `:countTokens`: exact when the serving provider can count, else the estimate (with a
/// `Warning` header).
async fn count_tokens(
    state: &AppState,
    caller: &crate::domain::accounts::api_tokens::TokenCaller,
    model: &str,
    payload: web::Payload,
) -> HttpResponse {
    let parsed = match read_json(payload).await.and_then(|body| gemini::parse_request(model, &body)) {
        Ok(p) => p,
        Err(e) => return gemini_error(&e),
    };
    match state.gateway.count_tokens(&caller.actor, model, &parsed.request).await {
        Ok(c) if !c.estimated => HttpResponse::Ok().json(gemini::count_json(c.tokens)),
        Ok(c) => HttpResponse::Ok()
            .insert_header((header::WARNING, super::ESTIMATE_WARNING))
            .json(gemini::count_json(c.tokens)),
        Err(e) => gemini_error(&from_domain(e, model)),
    }
}

/// `:embedContent` and `:batchEmbedContents`.
async fn embed(
    state: &AppState,
    caller: &crate::domain::accounts::api_tokens::TokenCaller,
    model: &str,
    payload: web::Payload,
    batch: bool,
) -> HttpResponse {
    let request = match read_json(payload).await.and_then(|b| embeddings::parse_google(model, &b, batch)) {
        Ok(r) => r,
        Err(e) => return gemini_error(&e),
    };
    match super::embed(state, caller, &request).await {
        Ok((_, out, _)) => HttpResponse::Ok().json(embeddings::google_json(&out.vectors, batch)),
        Err(e) => gemini_error(&e),
    }
}
