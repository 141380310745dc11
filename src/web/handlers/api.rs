//! The `/v1` gateway: Arbor's providers offered in the OpenAI format, authenticated by API
//! tokens. Errors come back in the caller's format with the status its SDK expects.

use actix_web::http::header::{self, HeaderValue};
use actix_web::{HttpResponse, web};
use bytes::Bytes;
use futures_util::StreamExt;
use serde_json::{Value, json};

use crate::domain::DomainError;
use crate::domain::accounts::api_tokens::TokenCaller;
use crate::domain::gateway::{self, Finished, OpenError, Opened};
use crate::domain::providers::aliases;
use crate::gateway::{ApiError, anthropic, openai};
use crate::providers::types::{ProviderError, ProviderEvent};
use crate::state::AppState;
use crate::web::api_caller::{ApiCaller, error_response};

/// The largest request body the gateway reads (inline images included).
pub const MAX_BODY: usize = 16 * 1024 * 1024;

/// A domain refusal in API terms.
fn from_domain(e: DomainError, model: &str) -> ApiError {
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
        DomainError::Storage(s) => {
            tracing::error!(error = %s, "gateway storage failure");
            ApiError::new(500, "internal", "Something went wrong on our side.")
        }
    }
}

/// A provider's failure in API terms: its rate limit and bad requests pass through; a refused
/// key or an outage is Arbor's upstream failing (502), not the caller's credentials.
fn from_provider(e: &ProviderError) -> ApiError {
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
fn openai_error(e: &ApiError) -> HttpResponse {
    error_response(e, openai::error_body(e))
}

/// Reads a JSON body of at most [`MAX_BODY`] bytes.
async fn read_json(mut payload: web::Payload) -> Result<Value, ApiError> {
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
async fn begin(
    state: &AppState,
    caller: &TokenCaller,
    model: &str,
    request: &crate::providers::types::ChatRequest,
) -> Result<Opened, ApiError> {
    let providers = state.engine.providers();
    // The user's own keys are read once for the whole request.
    let own = providers.own_keys(&caller.actor).await.map_err(|e| from_domain(e, model))?;
    let chain = gateway::chain_with(&state.db, providers, &caller.actor, model, &own)
        .await
        .map_err(|e| from_domain(e, model))?;
    gateway::open_with(&state.db, providers, &caller.actor, &chain, request, &own).await.map_err(
        |e| match e {
            OpenError::Domain(e) => from_domain(e, model),
            OpenError::Provider(e) => from_provider(&e),
        },
    )
}

/// A `text/event-stream` response fed by a channel the streaming task writes to.
fn event_stream(rx: tokio::sync::mpsc::Receiver<Bytes>) -> HttpResponse {
    let body = futures_util::stream::unfold(rx, |mut rx| async move {
        rx.recv().await.map(|chunk| (Ok::<_, actix_web::Error>(chunk), rx))
    });
    HttpResponse::Ok()
        .insert_header((header::CONTENT_TYPE, HeaderValue::from_static("text/event-stream")))
        .insert_header((header::CACHE_CONTROL, HeaderValue::from_static("no-cache")))
        .insert_header(("X-Accel-Buffering", "no"))
        .streaming(body)
}

/// `GET /v1/models`: the models this token's user may use, then their aliases.
pub async fn models(state: web::Data<AppState>, ApiCaller(caller): ApiCaller) -> HttpResponse {
    let mut data: Vec<Value> = state
        .engine
        .providers()
        .offered(&caller.actor)
        .await
        .into_iter()
        .flat_map(|(entry, ids)| {
            ids.into_iter().map(move |raw| {
                let (id, _) = crate::domain::providers::split_alias(&raw);
                json!({ "id": format!("{}/{id}", entry.name), "object": "model", "created": 0, "owned_by": entry.name })
            })
        })
        .collect();
    match aliases::list(&state.db, &caller.actor).await {
        Ok(list) => data.extend(list.into_iter().map(|a| {
            json!({ "id": a.alias, "object": "model", "created": 0, "owned_by": "alias", "target": a.target })
        })),
        Err(e) => return openai_error(&from_domain(e, "")),
    }
    HttpResponse::Ok().json(json!({ "object": "list", "data": data }))
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
    if parsed.stream {
        stream_completion(state.into_inner(), caller, parsed, opened)
    } else {
        whole_completion(&state, &caller, &parsed, opened).await
    }
}

/// Collects the answer and sends it as one `chat.completion`.
async fn whole_completion(
    state: &AppState,
    caller: &TokenCaller,
    parsed: &openai::Parsed,
    opened: Opened,
) -> HttpResponse {
    let Opened { model, mut stream, started } = opened;
    let mut answer = openai::Answer::default();
    let mut reported = None;
    let mut failure = None;
    while let Some(ev) = stream.next().await {
        match ev {
            ProviderEvent::TextDelta(t) => answer.text.push_str(&t),
            ProviderEvent::ThoughtDelta(t) => answer.reasoning.push_str(&t),
            ProviderEvent::ToolCall { id, name, arguments, .. } => {
                answer.tool_calls.push((id, name, arguments))
            }
            ProviderEvent::Usage(u) => reported = Some(u),
            ProviderEvent::Finish(f) => answer.finish = Some(f),
            ProviderEvent::Error(e) => {
                failure = Some(e);
                break;
            }
            _ => {}
        }
    }
    let produced =
        answer.text.len() + answer.tool_calls.iter().map(|(_, _, a)| a.to_string().len()).sum::<usize>();
    let done =
        Finished { model: &model, request: &parsed.request, reported, produced_chars: produced, started };
    gateway::record(&state.usage, state.engine.providers(), &caller.actor, done);
    if let Some(e) = failure {
        return openai_error(&from_provider(&e));
    }
    answer.usage = reported.unwrap_or_default();
    let id = gateway::response_id("chatcmpl-");
    HttpResponse::Ok().json(openai::completion(
        &id,
        chrono::Utc::now().timestamp(),
        &model.reference(),
        &answer,
    ))
}

/// Streams `chat.completion.chunk`s as the provider produces them. A task reads the provider
/// and writes to the response; if the caller goes away the provider stream is dropped, and the
/// usage so far is still recorded.
fn stream_completion(
    state: std::sync::Arc<AppState>,
    caller: TokenCaller,
    parsed: openai::Parsed,
    opened: Opened,
) -> HttpResponse {
    let (tx, rx) = tokio::sync::mpsc::channel::<Bytes>(64);
    tokio::spawn(async move {
        let Opened { model, mut stream, started } = opened;
        let (id, created, name) =
            (gateway::response_id("chatcmpl-"), chrono::Utc::now().timestamp(), model.reference());
        let send = |v: Value| {
            let tx = tx.clone();
            async move { tx.send(Bytes::from(openai::sse(&v))).await.is_ok() }
        };
        let mut produced = 0usize;
        let (mut reported, mut finish, mut calls, mut failed) = (None, None, 0usize, false);
        let mut open =
            send(openai::chunk(&id, created, &name, json!({ "role": "assistant", "content": "" }), None))
                .await;
        while open {
            let Some(ev) = stream.next().await else { break };
            open = match ev {
                ProviderEvent::TextDelta(t) => {
                    produced += t.len();
                    send(openai::chunk(&id, created, &name, json!({ "content": t }), None)).await
                }
                ProviderEvent::ThoughtDelta(t) => {
                    send(openai::chunk(&id, created, &name, json!({ "reasoning_content": t }), None)).await
                }
                ProviderEvent::ToolCall { id: call_id, name: tool, arguments, .. } => {
                    produced += arguments.to_string().len();
                    let call = openai::tool_call_json(calls, &call_id, &tool, &arguments);
                    calls += 1;
                    send(openai::chunk(&id, created, &name, json!({ "tool_calls": [call] }), None)).await
                }
                ProviderEvent::Usage(u) => {
                    reported = Some(u);
                    true
                }
                ProviderEvent::Finish(f) => {
                    finish = Some(f);
                    true
                }
                ProviderEvent::Error(e) => {
                    failed = true;
                    let _ = send(openai::error_body(&from_provider(&e))).await;
                    false
                }
                _ => true,
            };
        }
        if open && !failed {
            let reason = match (&finish, calls) {
                (Some(f), _) => openai::finish_reason(f),
                (None, 0) => "stop",
                (None, _) => "tool_calls",
            };
            let mut ok = send(openai::chunk(&id, created, &name, json!({}), Some(reason))).await;
            if ok && parsed.include_usage {
                ok = send(openai::usage_chunk(&id, created, &name, &reported.unwrap_or_default())).await;
            }
            if ok {
                let _ = tx.send(Bytes::from_static(b"data: [DONE]\n\n")).await;
            }
        }
        drop(stream);
        let done =
            Finished { model: &model, request: &parsed.request, reported, produced_chars: produced, started };
        gateway::record(&state.usage, state.engine.providers(), &caller.actor, done);
    });
    event_stream(rx)
}

/// An error in the Anthropic shape.
fn anthropic_error(e: &ApiError) -> HttpResponse {
    error_response(e, anthropic::error_body(e))
}

/// `POST /v1/messages`: Anthropic Messages, served by whichever provider the model names.
pub async fn messages(
    state: web::Data<AppState>,
    ApiCaller(caller): ApiCaller,
    payload: web::Payload,
) -> HttpResponse {
    let parsed = match read_json(payload).await.and_then(|body| anthropic::parse_request(&body)) {
        Ok(p) => p,
        Err(e) => return anthropic_error(&e),
    };
    let opened = match begin(&state, &caller, &parsed.model, &parsed.request).await {
        Ok(o) => o,
        Err(e) => return anthropic_error(&e),
    };
    if parsed.stream {
        return stream_message(state.into_inner(), caller, parsed, opened);
    }
    let Opened { model, mut stream, started } = opened;
    let mut writer = anthropic::Writer::default();
    let mut failure = None;
    while let Some(ev) = stream.next().await {
        if let ProviderEvent::Error(e) = ev {
            failure = Some(e);
            break;
        }
        writer.push(ev);
    }
    let done = Finished {
        model: &model,
        request: &parsed.request,
        reported: writer.usage,
        produced_chars: writer.produced,
        started,
    };
    gateway::record(&state.usage, state.engine.providers(), &caller.actor, done);
    if let Some(e) = failure {
        return anthropic_error(&from_provider(&e));
    }
    HttpResponse::Ok().json(writer.message(&gateway::response_id("msg_"), &model.reference()))
}

/// Streams Anthropic events as the provider produces them (see [`stream_completion`]).
fn stream_message(
    state: std::sync::Arc<AppState>,
    caller: TokenCaller,
    parsed: anthropic::Parsed,
    opened: Opened,
) -> HttpResponse {
    let (tx, rx) = tokio::sync::mpsc::channel::<Bytes>(64);
    tokio::spawn(async move {
        let Opened { model, mut stream, started } = opened;
        let estimate = crate::domain::runs::context::estimate_tokens(
            crate::domain::runs::context::request_chars(&parsed.request),
        );
        let start = anthropic::Writer::start(&gateway::response_id("msg_"), &model.reference(), estimate);
        let mut open = tx.send(Bytes::from(start)).await.is_ok();
        let mut writer = anthropic::Writer::default();
        let mut failed = false;
        while open {
            let Some(ev) = stream.next().await else { break };
            let out = match ev {
                ProviderEvent::Error(e) => {
                    failed = true;
                    anthropic::error_event(&from_provider(&e))
                }
                other => writer.push(other),
            };
            if !out.is_empty() {
                open = tx.send(Bytes::from(out)).await.is_ok();
            }
            if failed {
                break;
            }
        }
        if open && !failed {
            let _ = tx.send(Bytes::from(writer.finish())).await;
        }
        drop(stream);
        let done = Finished {
            model: &model,
            request: &parsed.request,
            reported: writer.usage,
            produced_chars: writer.produced,
            started,
        };
        gateway::record(&state.usage, state.engine.providers(), &caller.actor, done);
    });
    event_stream(rx)
}

/// `POST /v1/messages/count_tokens`: exact when the serving provider can count, otherwise
/// Arbor's estimate with a `Warning: 199` header saying so.
pub async fn count_tokens(
    state: web::Data<AppState>,
    ApiCaller(caller): ApiCaller,
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
    let parsed = match anthropic::parse_request(&body) {
        Ok(p) => p,
        Err(e) => return anthropic_error(&e),
    };
    let providers = state.engine.providers();
    let chain = match gateway::chain(&state.db, providers, &caller.actor, &parsed.model).await {
        Ok(c) => c,
        Err(e) => return anthropic_error(&from_domain(e, &parsed.model)),
    };
    let estimate = crate::domain::runs::context::estimate_tokens(
        crate::domain::runs::context::request_chars(&parsed.request),
    );
    let mut exact = None;
    if let Some(first) = chain.first() {
        match providers.resolve(&caller.actor, first).await {
            Ok(model) => {
                let mut request = parsed.request.clone();
                request.model = model.model.clone();
                match model.chat.count_tokens(&request).await {
                    Ok(n) => exact = n,
                    Err(e) => tracing::info!(status = e.status, "count_tokens: the provider could not count"),
                }
            }
            Err(e) => return anthropic_error(&from_domain(e, &parsed.model)),
        }
    }
    match exact {
        Some(n) => HttpResponse::Ok().json(json!({ "input_tokens": n })),
        None => HttpResponse::Ok()
            .insert_header((
                header::WARNING,
                "199 - \"input_tokens is an estimate (about 4 characters a token): the serving provider cannot count tokens\"",
            ))
            .json(json!({ "input_tokens": estimate })),
    }
}

/// `GET /v1/openapi.json`: the gateway's routes as an OpenAPI 3.1 document.
pub async fn openapi() -> HttpResponse {
    HttpResponse::Ok().json(crate::gateway::openapi::document())
}
