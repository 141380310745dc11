//! The agent's confirmation dialog (decide, poll, resume an unfinished call), the "Files in context"
//! panel and the "always" rules in settings.

use actix_web::http::StatusCode;
use actix_web::{HttpRequest, HttpResponse, web};
use serde::Deserialize;
use uuid::Uuid;

use crate::domain::DomainError;
use crate::domain::agent::{Decision, RuleScope};
use crate::domain::runs::agent_loop::Decided;
use crate::state::AppState;
use crate::web::extractors::CurrentUser;
use crate::web::form;
use crate::web::form::Flash;
use crate::web::render::{parse_id, render_to_string, signed_in};
use crate::web::session_view;
use crate::web::{WebError, render};

/// The dialog's form.
#[derive(Deserialize)]
pub struct DecisionForm {
    #[serde(default)]
    decision: String,
    #[serde(default)]
    scope: String,
}

/// An error shown inside the dialog, which stays as it is.
fn dialog_error(
    state: &AppState,
    call_id: Uuid,
    status: StatusCode,
    message: &str,
) -> Result<HttpResponse, WebError> {
    form::refused(state, status, message, &format!("#confirm-error-{call_id}"))
}

/// The dialog as it stands: still waiting (the dialog), or decided (a line saying how, and
/// what the run wrote since).
async fn dialog_html(
    state: &AppState,
    user: &CurrentUser,
    session_id: Uuid,
    call_id: Uuid,
) -> Result<String, WebError> {
    let dialog = state.pages.call_dialog(&user.0.actor, session_id, call_id).await?;
    let mut ctx = signed_in(user);
    ctx.insert("session", &dialog.session);
    // A viewer is offered no decision and no Stop on what the run writes next.
    ctx.insert("viewer", &(dialog.role < crate::model::teams::ShareRole::Editor));
    let Some(decided) = dialog.decided else {
        ctx.insert("pending", &dialog.call.call);
        return render_to_string(state, "partials/_confirm.html", &ctx);
    };
    // What the run wrote from this call's result on.
    let mut messages = decided.messages.into_iter();
    let mut tail = Vec::new();
    if let Some(first) = messages.next() {
        tail.push(session_view::single_view(&decided.conversation, first).await?);
        tail.extend(session_view::message_views(messages.collect()).await?);
    }
    session_view::attach_calls(&mut tail, &decided.calls);
    ctx.insert("tail", &tail);
    ctx.insert("call", &dialog.call);
    ctx.insert("client_id", "");
    render_to_string(state, "partials/_confirm_resolved.html", &ctx)
}

/// `POST /s/{session_id}/tool-calls/{call_id}/decision`: yes, no, no_continue, always or
/// explain. A call decided already (in another tab) answers with how it was decided.
pub async fn decide(
    state: web::Data<AppState>,
    user: CurrentUser,
    path: web::Path<(String, String)>,
    form: web::Form<DecisionForm>,
) -> Result<HttpResponse, WebError> {
    let (session_id, call_id) = (parse_id(&path.0)?, parse_id(&path.1)?);
    // The call must be this user's before anything about the form is said.
    state.engine.call_state(&user.0.actor, session_id, call_id).await?;
    let Some(decision) = Decision::parse(&form.decision) else {
        return dialog_error(&state, call_id, StatusCode::BAD_REQUEST, "Choose one of the buttons.");
    };
    let Some(scope) = RuleScope::parse(&form.scope) else {
        return dialog_error(&state, call_id, StatusCode::BAD_REQUEST, "Choose where \"always\" applies.");
    };
    let decided = state.engine.decide(&user.0.actor, session_id, call_id, decision, scope).await;
    answer_decided(&state, &user, (session_id, call_id), decided).await
}

/// What a decision (or a resumption) answers: the dialog as it now stands, or the reason it
/// could not be taken, inside the dialog.
async fn answer_decided(
    state: &AppState,
    user: &CurrentUser,
    (session_id, call_id): (Uuid, Uuid),
    decided: Result<Decided, DomainError>,
) -> Result<HttpResponse, WebError> {
    match decided {
        Ok(Decided::Resumed { .. } | Decided::Explained | Decided::AlreadyDecided) => {}
        Err(DomainError::Conflict(m) | DomainError::Invalid(m)) => {
            return dialog_error(state, call_id, StatusCode::CONFLICT, &m);
        }
        Err(DomainError::Limited(m, _)) => {
            return dialog_error(state, call_id, StatusCode::TOO_MANY_REQUESTS, &m);
        }
        Err(e) => return Err(e.into()),
    }
    let html = dialog_html(state, user, session_id, call_id).await?;
    Ok(render::html_response(StatusCode::OK, html))
}

/// `POST /s/{session_id}/tool-calls/{call_id}/resume`: "Run it" (`yes`) or "Skip"
/// (`no_continue`) on a call that a stopped, interrupted or failed run left unfinished; the run
/// goes on from there. Answers like a decision.
pub async fn resume(
    state: web::Data<AppState>,
    user: CurrentUser,
    path: web::Path<(String, String)>,
    form: web::Form<DecisionForm>,
) -> Result<HttpResponse, WebError> {
    let (session_id, call_id) = (parse_id(&path.0)?, parse_id(&path.1)?);
    state.engine.call_state(&user.0.actor, session_id, call_id).await?;
    let decision = match Decision::parse(&form.decision) {
        Some(d @ (Decision::Yes | Decision::NoContinue)) => d,
        _ => {
            return dialog_error(&state, call_id, StatusCode::BAD_REQUEST, "Choose \"Run it\" or \"Skip\".");
        }
    };
    let resumed = state.engine.resume_call(&user.0.actor, session_id, call_id, decision).await;
    answer_decided(&state, &user, (session_id, call_id), resumed).await
}

/// The "Files in context" panel's form.
#[derive(Deserialize)]
pub struct FileChoiceForm {
    #[serde(default)]
    path: String,
    #[serde(default)]
    choice: String,
}

/// `POST /s/{session_id}/files`: pins a file into the session's context, drops one, or lets the
/// path decide again (`choice` pin, drop or track); answers with the panel.
pub async fn choose_file(
    state: web::Data<AppState>,
    user: CurrentUser,
    path: web::Path<String>,
    form: web::Form<FileChoiceForm>,
) -> Result<HttpResponse, WebError> {
    let session_id = parse_id(&path)?;
    let actor = &user.0.actor;
    match state.engine.choose_file(actor, session_id, &form.path, &form.choice).await {
        Ok(()) => {}
        Err(DomainError::Invalid(m)) => {
            return form::refused(&state, StatusCode::BAD_REQUEST, &m, "#context-files-error");
        }
        Err(e) => return Err(e.into()),
    }
    let panel = state.pages.context_files(actor, session_id).await?;
    let mut ctx = signed_in(&user);
    ctx.insert("session", &panel.session);
    ctx.insert("context_files", &panel.files);
    ctx.insert("open_panel", &true);
    let html = render_to_string(&state, "partials/_context_files.html", &ctx)?;
    Ok(render::html_response(StatusCode::OK, html))
}

/// The dialog's query: `poll=1` answers 204 while nothing changed.
#[derive(Deserialize)]
pub struct CallQuery {
    #[serde(default)]
    poll: Option<String>,
}

/// `GET /s/{session_id}/tool-calls/{call_id}`: the dialog, or how it was decided. Open tabs
/// poll it, so a decision made in one shows in all.
pub async fn show(
    state: web::Data<AppState>,
    user: CurrentUser,
    path: web::Path<(String, String)>,
    query: web::Query<CallQuery>,
) -> Result<HttpResponse, WebError> {
    let (session_id, call_id) = (parse_id(&path.0)?, parse_id(&path.1)?);
    let call = state.engine.call_state(&user.0.actor, session_id, call_id).await?;
    if query.poll.is_some() && call.status == "proposed" {
        return Ok(HttpResponse::NoContent().finish());
    }
    let html = dialog_html(&state, &user, session_id, call_id).await?;
    Ok(render::html_response(StatusCode::OK, html))
}

/// `GET /s/{session_id}/pending-watch`: polled by every open session page. When a call waits
/// for a decision that the page does not show (`X-Arbor-Showing`), or a run is live that the
/// page does not follow (`X-Arbor-Following` empty), the page reloads to show it.
pub async fn pending_watch(
    state: web::Data<AppState>,
    req: HttpRequest,
    user: CurrentUser,
    path: web::Path<String>,
) -> Result<HttpResponse, WebError> {
    let session_id = parse_id(&path)?;
    let pending = match state.engine.pending_call(&user.0.actor, session_id).await {
        // Gone, or no longer shared with the reader: still a 404, whose notice the page shows
        // (app.js swaps a 4xx that names its place) and then stops watching.
        Err(crate::domain::DomainError::NotFound) => {
            return Ok(HttpResponse::NotFound()
                .insert_header(("HX-Retarget", "#thread"))
                .insert_header(("HX-Reswap", "afterbegin"))
                .content_type("text/html; charset=utf-8")
                .body(crate::web::sse::REVOKED_NOTICE));
        }
        other => other?,
    };
    let header = |name: &str| req.headers().get(name).and_then(|v| v.to_str().ok());
    let showing = header("x-arbor-showing").unwrap_or_default();
    // A run someone else started (a teammate in a shared workspace, or another tab) that this
    // page does not follow: the reloaded page shows it streaming and follows it live.
    let not_following = header("x-arbor-following") == Some("");
    let unfollowed_run = not_following && state.runs.is_active(session_id);
    // The path went on past the page's last message (a reply written through the sessions API,
    // or in another tab, that ended between two watches).
    let went_on = match header("x-arbor-last") {
        _ if !not_following || unfollowed_run => false,
        // An empty page, and the session has begun since.
        Some("") => state
            .sessions
            .view_session(&user.0.actor, session_id)
            .await
            .is_ok_and(|(s, _)| s.active_root_id.is_some()),
        Some(raw) => match Uuid::parse_str(raw) {
            Ok(last) => state
                .sessions
                .message(&user.0.actor, session_id, last)
                .await
                .is_ok_and(|m| m.chosen_child_id.is_some()),
            Err(_) => false,
        },
        None => false,
    };
    match pending {
        Some(call) if call.id.to_string() != showing => {
            Ok(HttpResponse::Ok().insert_header(("HX-Refresh", "true")).finish())
        }
        _ if unfollowed_run || went_on => {
            Ok(HttpResponse::Ok().insert_header(("HX-Refresh", "true")).finish())
        }
        _ => Ok(HttpResponse::NoContent().finish()),
    }
}

async fn approvals_page(
    state: &AppState,
    req: &HttpRequest,
    user: &CurrentUser,
    flash: Flash,
) -> Result<HttpResponse, WebError> {
    let mut ctx = signed_in(user);
    ctx.insert("rules", &state.agent.list_rules(user.0.actor.user_id()).await?);
    render::settings_tab(state, req, ctx, "approvals", &flash, StatusCode::OK)
}

/// `GET /settings/approvals`: the "always" rules.
pub async fn approvals(
    state: web::Data<AppState>,
    req: HttpRequest,
    user: CurrentUser,
) -> Result<HttpResponse, WebError> {
    approvals_page(&state, &req, &user, Flash::default()).await
}

/// `POST /settings/approvals/{id}/delete`: revokes a rule.
pub async fn revoke(
    state: web::Data<AppState>,
    req: HttpRequest,
    user: CurrentUser,
    id: web::Path<Uuid>,
) -> Result<HttpResponse, WebError> {
    state.agent.revoke_rule(user.0.actor.user_id(), id.into_inner()).await?;
    let flash = Flash::ok("Rule revoked: such calls ask again.");
    approvals_page(&state, &req, &user, flash).await
}
