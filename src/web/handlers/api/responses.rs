//! `POST /v1/responses`, `GET` and `DELETE /v1/responses/{id}`: the OpenAI Responses API,
//! served by whichever provider the model names. A stored response (`store`, the default) is
//! the token owner's own: `previous_response_id` continues it, and another member's id is a 404.

use std::sync::Arc;

use actix_web::{HttpResponse, web};
use serde_json::json;

use super::{
    ApiCaller, StreamFormat, begin, collect, from_domain, openai_error, pump, read_json, with_warning,
};
use crate::domain::accounts::Actor;
use crate::domain::gateway::{self, stored};
use crate::gateway::{ApiError, responses};
use crate::providers::types::{ChatMessage, ProviderEvent, Usage};
use crate::state::AppState;

/// What a finished response keeps, when it is stored.
struct Keeping {
    state: Arc<AppState>,
    actor: Actor,
    previous_id: Option<String>,
    system: Option<String>,
    /// The request's own messages (the chain's are stored already).
    input: Vec<ChatMessage>,
}

impl Keeping {
    async fn keep(self, writer: &responses::Writer) -> Result<(), ApiError> {
        let mut turn = self.input;
        turn.extend(writer.output_message());
        let body = writer.whole();
        let k = stored::Keep {
            id: writer.id(),
            previous_id: self.previous_id.as_deref(),
            system: self.system.as_deref(),
            turn: &turn,
            body: &body,
        };
        self.state.gateway.stored.keep(&self.actor, k).await.map_err(|e| from_domain(e, ""))
    }
}

/// The event stream (or the whole response), keeping it once it completed.
struct Response {
    writer: responses::Writer,
    keeping: Option<Keeping>,
}

impl StreamFormat for Response {
    fn open(&mut self) -> Option<String> {
        Some(self.writer.start())
    }

    fn event(&mut self, ev: ProviderEvent) -> Option<String> {
        Some(self.writer.push(ev))
    }

    fn failed(&mut self, e: &ApiError) -> String {
        self.writer.failed(e)
    }

    fn settle(&mut self) -> Option<super::Settling> {
        let keeping = self.keeping.take()?;
        let writer = self.writer.clone();
        // Kept before `response.completed` leaves, so the caller can continue from it at once.
        Some(Box::pin(async move {
            if let Err(e) = keeping.keep(&writer).await {
                tracing::error!(error = %e.message, "a response could not be stored");
            }
        }))
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

/// `POST /v1/responses`.
pub async fn create_response(
    state: web::Data<AppState>,
    ApiCaller(caller): ApiCaller,
    payload: web::Payload,
) -> HttpResponse {
    let mut parsed = match read_json(payload).await.and_then(|body| responses::parse_request(&body)) {
        Ok(p) => p,
        Err(e) => return openai_error(&e),
    };
    let own_input = parsed.request.messages.clone();
    if let Some(previous) = &parsed.previous_response_id {
        let chain = match state.gateway.stored.chain(&caller.actor, previous).await {
            Ok(c) => c,
            Err(crate::domain::DomainError::NotFound) => {
                let e = ApiError::new(404, "not_found", "The previous response does not exist.");
                return openai_error(&ApiError { param: Some("previous_response_id".into()), ..e });
            }
            Err(e) => return openai_error(&from_domain(e, "")),
        };
        let mut messages = chain.messages;
        messages.append(&mut parsed.request.messages);
        if let Err(e) = responses::name_results(&mut messages) {
            return openai_error(&e);
        }
        parsed.request.messages = messages;
        if parsed.request.system.is_none() {
            parsed.request.system = chain.system;
        }
    }
    let opened = match begin(&state, &caller, &parsed.model, &parsed.request).await {
        Ok(o) => o,
        Err(e) => return openai_error(&e),
    };
    let warning = parsed.dropped.warning();
    let id = gateway::response_id("resp_");
    let writer = responses::Writer::new(
        &id,
        &opened.model.reference(),
        parsed.echo.clone(),
        parsed.previous_response_id.clone(),
        parsed.store,
    );
    let keeping = parsed.store.then(|| Keeping {
        state: state.clone().into_inner(),
        actor: caller.actor.clone(),
        previous_id: parsed.previous_response_id.clone(),
        system: parsed.request.system.clone(),
        input: own_input,
    });
    let mut format = Response { writer, keeping: None };
    if parsed.stream {
        format.keeping = keeping;
        let res = pump(state.into_inner(), caller, parsed.request, opened, format, "text/event-stream");
        return with_warning(res, warning);
    }
    if let Err(e) = collect(&state, &caller, &parsed.request, opened, &mut format).await {
        return openai_error(&e);
    }
    if let Some(keeping) = keeping
        && let Err(e) = keeping.keep(&format.writer).await
    {
        return openai_error(&e);
    }
    with_warning(HttpResponse::Ok().json(format.writer.whole()), warning)
}

/// `GET /v1/responses/{id}`: a stored response of this token's owner.
pub async fn get_response(
    state: web::Data<AppState>,
    ApiCaller(caller): ApiCaller,
    id: web::Path<String>,
) -> HttpResponse {
    match state.gateway.stored.find(&caller.actor, &id).await {
        Ok(body) => HttpResponse::Ok().json(body),
        Err(e) => openai_error(&not_found_response(e)),
    }
}

/// `DELETE /v1/responses/{id}`.
pub async fn delete_response(
    state: web::Data<AppState>,
    ApiCaller(caller): ApiCaller,
    id: web::Path<String>,
) -> HttpResponse {
    match state.gateway.stored.forget(&caller.actor, &id).await {
        Ok(()) => {
            HttpResponse::Ok().json(json!({ "id": id.as_str(), "object": "response", "deleted": true }))
        }
        Err(e) => openai_error(&not_found_response(e)),
    }
}

fn not_found_response(e: crate::domain::DomainError) -> ApiError {
    match e {
        crate::domain::DomainError::NotFound => ApiError::new(404, "not_found", "No such response."),
        other => from_domain(other, ""),
    }
}
