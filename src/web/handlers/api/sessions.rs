//! The sessions API (`/v1/workspaces`, `/v1/sessions`): the same services as the browser's
//! pages, as JSON, for tokens of scope `sessions` (or `full`). Another member's session is a 404,
//! as in the browser; errors come in the OpenAI shape like the rest of `/v1`.

use actix_web::{HttpRequest, HttpResponse, web};
use serde::Deserialize;
use serde::de::DeserializeOwned;
use serde_json::{Value, json};
use uuid::Uuid;

use super::{domain_error, message_json, openai_error, read_json};
use crate::domain::DomainError;
use crate::domain::agent::{Decision, RuleScope};
use crate::domain::runs::Started;
use crate::domain::runs::agent_loop::Decided;
use crate::gateway::ApiError;
use crate::state::AppState;
use crate::web::api_caller::ApiCaller;

/// A refused call, answered in the OpenAI shape like the rest of `/v1`.
#[derive(Debug)]
pub struct Refusal(ApiError);

impl std::fmt::Display for Refusal {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.0.message)
    }
}

impl actix_web::ResponseError for Refusal {
    fn status_code(&self) -> actix_web::http::StatusCode {
        actix_web::http::StatusCode::from_u16(self.0.status)
            .unwrap_or(actix_web::http::StatusCode::BAD_REQUEST)
    }

    fn error_response(&self) -> HttpResponse {
        openai_error(&self.0)
    }
}

type Answer = Result<HttpResponse, Refusal>;

fn refuse(e: DomainError) -> Refusal {
    Refusal(domain_error(e))
}

fn id(raw: &str) -> Result<Uuid, Refusal> {
    Uuid::parse_str(raw)
        .map_err(|_| Refusal(ApiError::new(404, "not_found", "No such workspace, session or message.")))
}

async fn body<T: DeserializeOwned>(payload: web::Payload) -> Result<T, Refusal> {
    let value = read_json(payload).await.map_err(Refusal)?;
    serde_json::from_value(value)
        .map_err(|e| Refusal(ApiError::invalid(format!("The body does not fit: {e}."), None)))
}

fn started_json(s: &Started) -> Value {
    json!({ "user_message_id": s.user_message_id, "assistant_message_id": s.assistant_message_id, "created": s.created })
}

/// `GET /v1/workspaces`.
pub async fn workspaces(state: web::Data<AppState>, caller: ApiCaller) -> Answer {
    let list = state.sessions.list_workspaces(&caller.0.actor).await.map_err(refuse)?;
    Ok(HttpResponse::Ok().json(json!({ "data": list })))
}

/// A name for something new.
#[derive(Deserialize)]
pub struct NameBody {
    name: String,
}

/// `POST /v1/workspaces` `{name}`.
pub async fn create_workspace(
    state: web::Data<AppState>,
    caller: ApiCaller,
    payload: web::Payload,
) -> Answer {
    let b: NameBody = body(payload).await?;
    let w = state.sessions.create_workspace(&caller.0.actor, &b.name).await.map_err(refuse)?;
    Ok(HttpResponse::Created().json(w))
}

/// Which sessions to list.
#[derive(Deserialize)]
pub struct ListQuery {
    #[serde(default)]
    archived: bool,
    #[serde(default)]
    page: u64,
}

/// `GET /v1/workspaces/{id}/sessions?archived=&page=`.
pub async fn workspace_sessions(
    state: web::Data<AppState>,
    caller: ApiCaller,
    path: web::Path<String>,
    query: web::Query<ListQuery>,
) -> Answer {
    let workspace = id(&path)?;
    let (list, more) = state
        .sessions
        .workspace_sessions(&caller.0.actor, workspace, query.archived, query.page)
        .await
        .map_err(refuse)?;
    Ok(HttpResponse::Ok().json(json!({ "data": list, "has_more": more })))
}

/// A new session's title.
#[derive(Deserialize)]
pub struct TitleBody {
    #[serde(default)]
    title: Option<String>,
}

/// `POST /v1/workspaces/{id}/sessions` `{title}`.
pub async fn create_session(
    state: web::Data<AppState>,
    caller: ApiCaller,
    path: web::Path<String>,
    payload: web::Payload,
) -> Answer {
    let workspace = id(&path)?;
    let b: TitleBody = body(payload).await?;
    let title = b.title.unwrap_or_else(|| "New session".into());
    let s = state.sessions.create_session(&caller.0.actor, workspace, &title).await.map_err(refuse)?;
    Ok(HttpResponse::Created().json(s))
}

/// `GET /v1/sessions/{id}`: the session, its active path and a decision it waits for.
pub async fn session(state: web::Data<AppState>, caller: ApiCaller, path: web::Path<String>) -> Answer {
    let session_id = id(&path)?;
    let found = state.pages.session_state(&caller.0.actor, session_id).await.map_err(refuse)?;
    let c = &found.conversation;
    let path: Vec<Value> = c
        .path
        .iter()
        .zip(&c.siblings)
        .map(|(m, s)| {
            let mut v = message_json(m);
            v["siblings"] =
                json!({ "position": s.position, "count": s.count, "previous": s.previous, "next": s.next });
            v
        })
        .collect();
    Ok(HttpResponse::Ok().json(json!({
        "session": c.session, "role": c.role, "path": path, "message_count": c.message_count,
        "running": found.running, "pending_approval": found.pending,
    })))
}

/// What may change of a session.
#[derive(Deserialize)]
pub struct SessionPatch {
    #[serde(default)]
    title: Option<String>,
    #[serde(default)]
    archived: Option<bool>,
}

/// `PATCH /v1/sessions/{id}` `{title?, archived?}`.
pub async fn update_session(
    state: web::Data<AppState>,
    caller: ApiCaller,
    path: web::Path<String>,
    payload: web::Payload,
) -> Answer {
    let session_id = id(&path)?;
    let b: SessionPatch = body(payload).await?;
    let changed = state
        .sessions
        .change_session(&caller.0.actor, session_id, b.title.as_deref(), b.archived)
        .await
        .map_err(refuse)?;
    Ok(HttpResponse::Ok().json(changed))
}

/// `DELETE /v1/sessions/{id}`.
pub async fn delete_session(
    state: web::Data<AppState>,
    caller: ApiCaller,
    path: web::Path<String>,
) -> Answer {
    let session_id = id(&path)?;
    // A live answer is stopped first, as on the page.
    state.deletions.session(&caller.0.actor, session_id).await.map_err(refuse)?;
    Ok(HttpResponse::Ok().json(json!({ "id": session_id, "deleted": true })))
}

/// `GET /v1/sessions/{id}/messages/{message_id}/children`: the branches below a message.
pub async fn children(
    state: web::Data<AppState>,
    caller: ApiCaller,
    path: web::Path<(String, String)>,
) -> Answer {
    let (session_id, message_id) = (id(&path.0)?, id(&path.1)?);
    let list = state.sessions.children(&caller.0.actor, session_id, message_id).await.map_err(refuse)?;
    Ok(HttpResponse::Ok().json(json!({ "data": list.iter().map(message_json).collect::<Vec<_>>() })))
}

/// `POST /v1/sessions/{id}/messages/{message_id}/select`: the active path goes through it.
pub async fn select(
    state: web::Data<AppState>,
    caller: ApiCaller,
    path: web::Path<(String, String)>,
) -> Answer {
    let (session_id, message_id) = (id(&path.0)?, id(&path.1)?);
    state.sessions.select_message(&caller.0.actor, session_id, message_id).await.map_err(refuse)?;
    Ok(HttpResponse::Ok().json(json!({ "selected": message_id })))
}

/// A message to send, or an edit.
#[derive(Deserialize)]
pub struct SendBody {
    text: String,
    #[serde(default)]
    model: Option<String>,
    /// Makes a retried request safe: the same id twice sends one message.
    #[serde(default)]
    client_id: Option<String>,
}

impl SendBody {
    /// The id that makes a retry safe: `client_id` in the body, else the `Idempotency-Key`
    /// header (what HTTP clients retry with), else a fresh one. Both, differing, is refused
    /// rather than guessed at.
    fn client_id(&self, req: &HttpRequest) -> Result<String, Refusal> {
        let header = match req.headers().get("idempotency-key") {
            None => None,
            Some(value) => Some(
                value.to_str().ok().filter(|v| crate::domain::runs::valid_client_id(v)).ok_or_else(|| {
                    Refusal(ApiError::new(
                        400,
                        "invalid_request_error",
                        "Idempotency-Key must be 1-64 letters, digits, '-' or '_'.",
                    ))
                })?,
            ),
        };
        match (&self.client_id, header) {
            (Some(body), Some(header)) if body != header => Err(Refusal(ApiError::new(
                400,
                "invalid_request_error",
                "client_id and the Idempotency-Key header differ; send one of them.",
            ))),
            (Some(body), _) => Ok(body.clone()),
            (None, Some(header)) => Ok(header.to_string()),
            (None, None) => Ok(Uuid::new_v4().simple().to_string()),
        }
    }
}

fn accepted(s: &Started) -> Answer {
    Ok(HttpResponse::Accepted().json(started_json(s)))
}

/// `POST /v1/sessions/{id}/messages` `{text, model?, client_id?}`: appends the message at the
/// end of the active path and starts the answer (follow it at `/events`).
pub async fn send(
    state: web::Data<AppState>,
    caller: ApiCaller,
    path: web::Path<String>,
    req: HttpRequest,
    payload: web::Payload,
) -> Answer {
    let session_id = id(&path)?;
    let b: SendBody = body(payload).await?;
    let started = state
        .engine
        .submit(&caller.0.actor, session_id, &b.text, &b.client_id(&req)?, b.model.as_deref())
        .await
        .map_err(refuse)?;
    accepted(&started)
}

/// `POST /v1/sessions/{id}/messages/{message_id}/edit` `{text, model?, client_id?}`: a new
/// sibling of the message, answered; the old branch stays.
pub async fn edit(
    state: web::Data<AppState>,
    caller: ApiCaller,
    path: web::Path<(String, String)>,
    req: HttpRequest,
    payload: web::Payload,
) -> Answer {
    let (session_id, message_id) = (id(&path.0)?, id(&path.1)?);
    let b: SendBody = body(payload).await?;
    let started = state
        .engine
        .edit(&caller.0.actor, session_id, message_id, &b.text, &b.client_id(&req)?, b.model.as_deref())
        .await
        .map_err(refuse)?;
    accepted(&started)
}

/// `POST /v1/sessions/{id}/messages/{message_id}/regenerate`: a new answer beside this one.
pub async fn regenerate(
    state: web::Data<AppState>,
    caller: ApiCaller,
    path: web::Path<(String, String)>,
) -> Answer {
    let (session_id, message_id) = (id(&path.0)?, id(&path.1)?);
    accepted(&state.engine.retry(&caller.0.actor, session_id, message_id).await.map_err(refuse)?)
}

/// `POST /v1/sessions/{id}/messages/{message_id}/continue`: resumes a cut-off answer.
pub async fn resume(
    state: web::Data<AppState>,
    caller: ApiCaller,
    path: web::Path<(String, String)>,
) -> Answer {
    let (session_id, message_id) = (id(&path.0)?, id(&path.1)?);
    accepted(&state.engine.resume(&caller.0.actor, session_id, message_id).await.map_err(refuse)?)
}

/// `POST /v1/sessions/{id}/stop`: stops the live answer, keeping what was written.
pub async fn stop(state: web::Data<AppState>, caller: ApiCaller, path: web::Path<String>) -> Answer {
    let session_id = id(&path)?;
    let stopped = state.engine.stop(&caller.0.actor, session_id).await.map_err(refuse)?;
    Ok(HttpResponse::Ok().json(json!({ "stopped": stopped })))
}

/// A decision on a waiting tool call.
#[derive(Deserialize)]
pub struct DecisionBody {
    /// `yes`, `no`, `no_continue`, `always` or `explain`.
    decision: String,
    /// Where `always` applies: `session` (default) or `workspace`.
    #[serde(default)]
    scope: Option<String>,
}

/// `POST /v1/sessions/{id}/tool-calls/{call_id}/decision` `{decision, scope?}`.
pub async fn decide(
    state: web::Data<AppState>,
    caller: ApiCaller,
    path: web::Path<(String, String)>,
    payload: web::Payload,
) -> Answer {
    let (session_id, call_id) = (id(&path.0)?, id(&path.1)?);
    let actor = &caller.0.actor;
    state.engine.call_state(actor, session_id, call_id).await.map_err(refuse)?;
    let b: DecisionBody = body(payload).await?;
    let invalid = |m: &str, p: &str| Refusal(ApiError::invalid(m, Some(p)));
    let decision = Decision::parse(&b.decision)
        .ok_or_else(|| invalid("decision is one of yes, no, no_continue, always, explain.", "decision"))?;
    let scope = RuleScope::parse(b.scope.as_deref().unwrap_or(""))
        .ok_or_else(|| invalid("scope is one of session, workspace.", "scope"))?;
    let decided = state.engine.decide(actor, session_id, call_id, decision, scope).await.map_err(refuse)?;
    let state_now = state.engine.call_state(actor, session_id, call_id).await.map_err(refuse)?;
    let outcome = match decided {
        Decided::Resumed { .. } => "resumed",
        Decided::Explained => "explained",
        Decided::AlreadyDecided => "already_decided",
    };
    Ok(HttpResponse::Ok().json(json!({ "outcome": outcome, "call": state_now })))
}

/// `GET /v1/sessions/{id}/activity`: the session's activity log as JSON Lines.
pub async fn activity(state: web::Data<AppState>, caller: ApiCaller, path: web::Path<String>) -> Answer {
    use crate::domain::sessions::activity::{self as log, ACTIVITY_EXPORTED};
    let session_id = id(&path)?;
    let entries =
        state.sessions.activity(&caller.0.actor, session_id, ACTIVITY_EXPORTED).await.map_err(refuse)?;
    Ok(crate::web::render::json_lines(log::json_lines(&entries), None))
}
