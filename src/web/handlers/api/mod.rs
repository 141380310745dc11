//! The gateway: Arbor's providers offered in the OpenAI (Chat Completions, Responses),
//! Anthropic (Messages) and Google GenAI formats, authenticated by API tokens. Errors come back
//! in the caller's format with the status its SDK expects. Every surface streams through one
//! loop ([`pump`]), which records the usage once, whether the answer ends, fails or the caller
//! goes away.

mod anthropic;
mod gemini;
mod openai;
mod relay;
mod responses;
pub mod session_events;
pub mod session_ws;
pub mod sessions;

pub use anthropic::{count_tokens, messages};
pub use gemini::{gemini_model, gemini_models, gemini_post};
pub use openai::chat_completions;
pub use responses::{create_response, delete_response, get_response};

use actix_web::http::header::{self, HeaderValue};
use actix_web::{HttpResponse, web};
use futures_util::StreamExt;
use serde_json::{Value, json};

use crate::domain::DomainError;
use crate::domain::accounts::api_tokens::TokenCaller;
use crate::domain::gateway::{self, Finished, OpenError, Opened};
use crate::gateway::{ApiError, openai as openai_wire};
use crate::providers::types::{ChatRequest, ProviderError, ProviderEvent, Usage};
use crate::state::AppState;
use crate::web::api_caller::{ApiCaller, Dialect, error_response};

/// The `Warning` on a token count that is Arbor's estimate.
const ESTIMATE_WARNING: &str = "199 - \"the count is an estimate (OpenAI's o200k_base tokenizer): the serving provider cannot count tokens\"";

/// The largest request body the gateway reads (inline images included).
pub const MAX_BODY: usize = 16 * 1024 * 1024;

/// A domain refusal in API terms.
pub(super) fn from_domain(e: DomainError, model: &str) -> ApiError {
    match e {
        DomainError::NotFound => ApiError::new(
            404,
            "model_not_found",
            format!("The model \"{model}\" does not exist or is not available to you."),
        ),
        DomainError::Forbidden => ApiError::new(403, "permission", "You may not do that."),
        DomainError::Invalid(m) => ApiError::new(400, "invalid_request", m),
        DomainError::Conflict(m) => ApiError::new(409, "conflict", m),
        DomainError::Limited(m, secs) => {
            ApiError { status: 429, kind: "rate_limit", message: m, param: None, retry_after: Some(secs) }
        }
        DomainError::Busy(m, secs) => {
            ApiError { status: 503, kind: "overloaded", message: m, param: None, retry_after: Some(secs) }
        }
        DomainError::TooLarge(m) => ApiError::new(413, "invalid_request", m),
        DomainError::Upstream(m) => ApiError::new(502, "upstream", m),
        DomainError::Storage(s) => {
            tracing::error!(error = %s, "gateway storage failure");
            ApiError::new(500, "internal", "Something went wrong on our side.")
        }
    }
}

/// A domain refusal in API terms.
pub(super) fn domain_error(e: DomainError) -> ApiError {
    match e {
        DomainError::NotFound => ApiError::new(404, "not_found", "No such workspace, session or message."),
        other => from_domain(other, ""),
    }
}

/// A message as the API shows it: its parts, and its text for convenience.
pub(super) fn message_json(m: &crate::domain::sessions::tree::Message) -> Value {
    json!({
        "id": m.id, "parent_id": m.parent_id, "chosen_child_id": m.chosen_child_id,
        "role": m.role, "kind": m.kind, "status": m.status, "text": m.text(), "parts": m.parts,
        "model": m.model, "error": m.error, "usage": m.usage, "created_at": m.created_at,
    })
}

/// One of the member's live-stream slots (event streams and sockets count alike), or the
/// refusal (SECURITY.md 54).
pub(super) fn stream_slot(
    state: &AppState,
    actor: &crate::domain::accounts::Actor,
) -> Result<crate::limits::Slot, ApiError> {
    let max = state.config.limits.streams_per_member;
    state.streams.try_take(actor.user_id(), max).ok_or_else(|| {
        let message = format!("You hold {max} live streams, the most allowed: close one first.");
        ApiError { status: 429, kind: "rate_limit", message, param: None, retry_after: Some(5) }
    })
}

/// A provider's failure in API terms: its rate limit and bad requests pass through; a refused
/// key or an outage is Arbor's upstream failing (502), not the caller's credentials.
pub(super) fn from_provider(e: &ProviderError) -> ApiError {
    let message = crate::domain::providers::describe_error(e);
    match e.status {
        429 => ApiError {
            status: 429,
            kind: "rate_limit",
            message,
            param: None,
            retry_after: e.retry_after_secs,
        },
        400 | 404 | 413 | 422 => ApiError::new(400, "invalid_request", message),
        529 | 503 => ApiError::new(503, "overloaded", message),
        _ => ApiError::new(502, "upstream", message),
    }
}

/// An error in the OpenAI shape.
pub(super) fn openai_error(e: &ApiError) -> HttpResponse {
    error_response(e, openai_wire::error_body(e))
}

/// Reads a JSON body of at most [`MAX_BODY`] bytes.
pub(super) async fn read_json(mut payload: web::Payload) -> Result<Value, ApiError> {
    let mut body = web::BytesMut::new();
    while let Some(chunk) = payload.next().await {
        let chunk = chunk.map_err(|_| ApiError::invalid("The request body could not be read.", None))?;
        if body.len() + chunk.len() > MAX_BODY {
            return Err(ApiError::new(413, "invalid_request", "The request body is larger than 16 MiB."));
        }
        body.extend_from_slice(&chunk);
    }
    serde_json::from_slice(&body)
        .map_err(|e| ApiError::invalid(format!("The body is not valid JSON: {e}."), None))
}

/// Finds the model chain for `model` and opens the first that starts answering.
pub(super) async fn begin(
    state: &AppState,
    caller: &TokenCaller,
    model: &str,
    request: &ChatRequest,
) -> Result<Opened, ApiError> {
    let providers = state.engine.providers();
    // The user's own keys are read once for the whole request.
    let own = providers.own_keys(&caller.actor).await.map_err(|e| from_domain(e, model))?;
    let chain =
        state.gateway.chain_with(&caller.actor, model, &own).await.map_err(|e| from_domain(e, model))?;
    state.gateway.open_with(&caller.actor, &chain, request, &own).await.map_err(|e| match e {
        OpenError::Domain(e) => from_domain(e, model),
        OpenError::Provider(e) => from_provider(&e),
    })
}

/// Work a stream format does before its closing bytes (storing the answer).
pub(super) type Settling = std::pin::Pin<Box<dyn std::future::Future<Output = ()> + Send>>;

/// One wire format's streamed answer: the bytes each provider event becomes, and how the
/// stream opens, fails and ends. The format also counts what was produced, for usage.
pub(super) trait StreamFormat: Send + 'static {
    /// Bytes before the first event.
    fn open(&mut self) -> Option<String>;
    /// Bytes for one event (not an error); `None` when it makes none.
    fn event(&mut self, ev: ProviderEvent) -> Option<String>;
    /// The bytes that report a failure after the stream began (the stream then ends).
    fn failed(&mut self, e: &ApiError) -> String;
    /// Work to finish before the closing bytes of an answer that ended normally.
    fn settle(&mut self) -> Option<Settling> {
        None
    }
    /// The closing bytes of an answer that ended normally.
    fn close(&mut self) -> Option<String>;
    /// Token counts the provider reported.
    fn usage(&self) -> Option<Usage>;
    /// Characters of text and tool arguments produced.
    fn produced(&self) -> usize;
}

/// Streams `opened` to the caller in `format`: the response body reads the provider as fast as
/// the caller reads, and the usage is recorded once at the end whatever happened ([`relay`]).
pub(super) fn pump<F: StreamFormat + Unpin>(
    state: std::sync::Arc<AppState>,
    caller: TokenCaller,
    request: ChatRequest,
    opened: Opened,
    format: F,
    content_type: &'static str,
) -> HttpResponse {
    HttpResponse::Ok()
        .insert_header((header::CONTENT_TYPE, HeaderValue::from_static(content_type)))
        .insert_header((header::CACHE_CONTROL, HeaderValue::from_static("no-cache")))
        .insert_header(("X-Accel-Buffering", "no"))
        .streaming(relay::Relay::new(state, caller, request, opened, format))
}

/// Reads a whole answer into `format`'s events (for non-streamed calls) and records its usage;
/// the provider's failure, if any.
pub(super) async fn collect<F: StreamFormat>(
    state: &AppState,
    caller: &TokenCaller,
    request: &ChatRequest,
    opened: Opened,
    format: &mut F,
) -> Result<(), ApiError> {
    let Opened { model, mut stream, started, hold } = opened;
    let mut failure = None;
    while let Some(ev) = stream.next().await {
        if let ProviderEvent::Error(e) = ev {
            failure = Some(from_provider(&e));
            break;
        }
        format.event(ev);
    }
    let done = Finished {
        model: &model,
        request,
        reported: format.usage(),
        produced_chars: format.produced(),
        started,
        hold,
    };
    gateway::record(&state.usage, state.engine.providers(), &caller.actor, done);
    failure.map_or(Ok(()), Err)
}

/// Embeds `request.inputs` with the model it names (or a chain), for any surface.
pub(super) async fn embed(
    state: &AppState,
    caller: &TokenCaller,
    request: &crate::gateway::embeddings::Request,
) -> Result<(String, crate::providers::types::Embeddings, u64), ApiError> {
    let model = &request.model;
    let chain = state.gateway.chain(&caller.actor, model).await.map_err(|e| from_domain(e, model))?;
    let (served, out) =
        state.gateway.embed(&caller.actor, &chain, &request.inputs).await.map_err(|e| match e {
            OpenError::Domain(e) => from_domain(e, model),
            OpenError::Provider(e) => from_provider(&e),
        })?;
    let chars: usize = request.inputs.iter().map(String::len).sum();
    let tokens = out.input_tokens.unwrap_or_else(|| crate::domain::runs::context::estimate_tokens(chars));
    Ok((served.reference(), out, tokens))
}

/// `POST /v1/embeddings`: OpenAI embeddings from any provider that has them.
pub async fn embeddings(
    state: web::Data<AppState>,
    ApiCaller(caller): ApiCaller,
    payload: web::Payload,
) -> HttpResponse {
    let request = match read_json(payload).await.and_then(|b| crate::gateway::embeddings::parse_openai(&b)) {
        Ok(r) => r,
        Err(e) => return openai_error(&e),
    };
    match embed(&state, &caller, &request).await {
        Ok((model, out, tokens)) => HttpResponse::Ok().json(crate::gateway::embeddings::openai_json(
            &model,
            &out.vectors,
            request.base64,
            tokens,
        )),
        Err(e) => openai_error(&e),
    }
}

/// Adds the `Warning` header naming what the request carried that was not sent on.
pub(super) fn with_warning(mut res: HttpResponse, warning: Option<String>) -> HttpResponse {
    if let Some(value) = warning.and_then(|w| HeaderValue::from_str(&w).ok()) {
        res.headers_mut().append(header::WARNING, value);
    }
    res
}

/// `GET /v1/models`: the models this token's user may use, then their aliases.
pub async fn models(state: web::Data<AppState>, ApiCaller(caller): ApiCaller) -> HttpResponse {
    match state.gateway.listing(&caller.actor).await {
        Ok(list) => {
            let data: Vec<Value> = list
                .into_iter()
                .map(|m| {
                    let mut v = json!({ "id": m.id, "object": "model", "created": 0, "owned_by": m.owner });
                    if let Some(target) = m.target {
                        v["target"] = json!(target);
                    }
                    v
                })
                .collect();
            HttpResponse::Ok().json(json!({ "object": "list", "data": data }))
        }
        Err(e) => openai_error(&from_domain(e, "")),
    }
}

/// Whether a path belongs to the API (its errors are JSON in the caller's dialect).
pub fn is_api_path(path: &str) -> bool {
    ["/v1", "/v1beta"]
        .iter()
        .any(|p| path.strip_prefix(p).is_some_and(|rest| rest.is_empty() || rest.starts_with('/')))
}

/// An API path served with another method: 405 in the caller's dialect.
pub async fn wrong_method(req: actix_web::HttpRequest) -> HttpResponse {
    let e = ApiError::new(405, "invalid_request", format!("{} is not allowed on this route.", req.method()));
    Dialect::of(&req).error(&e)
}

/// An API path that does not exist: 404 in the caller's dialect (never the HTML page).
pub async fn no_route(req: actix_web::HttpRequest) -> HttpResponse {
    let e =
        ApiError::new(404, "not_found", format!("There is no API route {} {}.", req.method(), req.path()));
    Dialect::of(&req).error(&e)
}

/// `GET /v1/openapi.json`: the gateway's routes as an OpenAPI 3.1 document.
pub async fn openapi() -> HttpResponse {
    HttpResponse::Ok().json(crate::gateway::openapi::document())
}
