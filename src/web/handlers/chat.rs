//! The session page and what its composer and buttons post: send, stop, continue, retry.

use actix_web::http::StatusCode;
use actix_web::{HttpRequest, HttpResponse, web};
use serde::Deserialize;
use tera::Context;
use uuid::Uuid;

use crate::domain::chat::Conversation;
use crate::domain::runs::Started;
use crate::domain::{DomainError, chat};
use crate::state::AppState;
use crate::web::chat_view::{self, usage_view};
use crate::web::client::see_other;
use crate::web::extractors::{AdminUser, CurrentUser};
use crate::web::{WebError, render};

fn parse_id(raw: &str) -> Result<Uuid, WebError> {
    Uuid::parse_str(raw).map_err(|_| WebError::NotFound)
}

/// A fresh composer id: a repeated POST of one form is recognised by it.
fn new_client_id() -> String {
    Uuid::new_v4().simple().to_string()
}

/// Renders a template to a string.
pub fn render_to_string(state: &AppState, name: &str, ctx: &Context) -> Result<String, WebError> {
    state.templates.render(name, ctx).map_err(|e| WebError::Internal(format!("render {name}: {e}")))
}

/// A form error shown next to the composer: the status says what happened, and htmx is told
/// where the message goes.
fn composer_error(state: &AppState, status: StatusCode, message: &str) -> Result<HttpResponse, WebError> {
    let mut ctx = Context::new();
    ctx.insert("message", message);
    let html = render_to_string(state, "partials/_flash_error.html", &ctx)?;
    let mut res = render::html_response(status, html);
    res.headers_mut().insert(
        actix_web::http::header::HeaderName::from_static("hx-retarget"),
        actix_web::http::header::HeaderValue::from_static("#composer-error"),
    );
    res.headers_mut().insert(
        actix_web::http::header::HeaderName::from_static("hx-reswap"),
        actix_web::http::header::HeaderValue::from_static("innerHTML"),
    );
    Ok(res)
}

fn domain_to_composer(state: &AppState, e: DomainError) -> Result<HttpResponse, WebError> {
    match e {
        DomainError::Invalid(m) => composer_error(state, StatusCode::BAD_REQUEST, &m),
        DomainError::Conflict(m) => composer_error(state, StatusCode::CONFLICT, &m),
        other => Err(other.into()),
    }
}

/// The signed-in user, as every page needs them.
fn signed_in(user: &CurrentUser) -> Context {
    let mut ctx = Context::new();
    ctx.insert("user", &user.0.user);
    ctx.insert("csrf_token", &user.0.csrf_secret);
    ctx
}

/// What the composer and sidebar need: model choices, a fresh client id, recent sessions.
async fn composer_into(ctx: &mut Context, state: &AppState, user: &CurrentUser) {
    let actor = &user.0.actor;
    ctx.insert("models", &state.engine.providers().choices(actor).await);
    ctx.insert("client_id", &new_client_id());
    let recent = chat::recent_sessions(&state.db, actor, 30).await.unwrap_or_default();
    ctx.insert("recent", &recent);
}

/// `GET /`'s signed-in part is built here so the home page and the session page share it.
pub async fn home_context(state: &AppState, user: &CurrentUser) -> Context {
    let mut ctx = signed_in(user);
    composer_into(&mut ctx, state, user).await;
    let default = state.engine.providers().default_model(&user.0.actor).await;
    ctx.insert("selected_model", &default);
    ctx
}

/// The session and its header (model, totals, gauge); returns the conversation for callers
/// that also show messages.
async fn header_into(
    ctx: &mut Context,
    state: &AppState,
    user: &CurrentUser,
    session_id: Uuid,
) -> Result<Conversation, WebError> {
    let conv = chat::conversation(&state.db, &user.0.actor, session_id).await?;
    let selected = match conv.session.model.clone() {
        Some(m) => Some(m),
        None => state.engine.providers().default_model(&user.0.actor).await,
    };
    let info = selected.as_deref().and_then(|m| state.engine.providers().model_info(m));
    ctx.insert("gauge", &chat_view::gauge(&conv, info.as_ref()));
    ctx.insert("selected_model", &selected);
    ctx.insert("totals", &usage_view(&conv.totals));
    ctx.insert("session", &conv.session);
    Ok(conv)
}

/// `GET /s/{session_id}`: the conversation's active path, the composer and any live answer.
pub async fn show(
    state: web::Data<AppState>,
    req: HttpRequest,
    user: CurrentUser,
    path: web::Path<String>,
) -> Result<HttpResponse, WebError> {
    let mut ctx = signed_in(&user);
    let conv = header_into(&mut ctx, &state, &user, parse_id(&path)?).await?;
    ctx.insert("messages", &chat_view::message_views(conv.path).await?);
    composer_into(&mut ctx, &state, &user).await;
    render::page(&state, &req, "pages/session.html", "partials/_session.html", ctx)
}

/// The composer's fields.
#[derive(Deserialize)]
pub struct ComposerForm {
    message: String,
    #[serde(default)]
    client_id: String,
    #[serde(default)]
    model: Option<String>,
}

/// `POST /sessions`: a new session in the user's default workspace, started by its first
/// message; the browser goes to it.
pub async fn create(
    state: web::Data<AppState>,
    req: HttpRequest,
    user: CurrentUser,
    form: web::Form<ComposerForm>,
) -> Result<HttpResponse, WebError> {
    let actor = &user.0.actor;
    // The same form sent twice opens the session the first one made.
    if let Some(existing) = chat::session_by_client_id(&state.db, actor, &form.client_id).await? {
        return Ok(go_to(&req, &format!("/s/{existing}")));
    }
    if form.message.trim().is_empty() {
        return composer_error(&state, StatusCode::BAD_REQUEST, "Write a message first.");
    }
    let workspace = chat::default_workspace(&state.db, actor).await?;
    let session =
        chat::create_session(&state.db, actor, workspace.id, &chat::title_from(&form.message)).await?;
    let model = form.model.as_deref();
    match state.engine.submit(actor, session.id, &form.message, &form.client_id, model).await {
        Ok(_) => Ok(go_to(&req, &format!("/s/{}", session.id))),
        Err(e) => {
            // Nothing was sent: the empty session goes again, so a refused first message leaves
            // no trace.
            if let Err(del) = chat::delete_session(&state.db, actor, session.id).await {
                tracing::warn!(error = %del, "could not remove an empty session");
            }
            domain_to_composer(&state, e)
        }
    }
}

/// A redirect that works for htmx (`HX-Redirect`) and plain forms (303).
fn go_to(req: &HttpRequest, to: &str) -> HttpResponse {
    if render::is_htmx(req) {
        HttpResponse::Ok().insert_header(("HX-Redirect", to.to_string())).finish()
    } else {
        see_other(req, to)
    }
}

/// Renders the given messages (and a fresh composer, out of band) as the answer to a post.
async fn turn_fragment(
    state: &AppState,
    user: &CurrentUser,
    session_id: Uuid,
    started: &Started,
    with_composer: bool,
) -> Result<HttpResponse, WebError> {
    let actor = &user.0.actor;
    let mut shown = Vec::new();
    if let Some(id) = started.user_message_id {
        shown.push(chat::message(&state.db, actor, session_id, id).await?);
    }
    shown.push(chat::message(&state.db, actor, session_id, started.assistant_message_id).await?);
    let shown = chat_view::message_views(shown).await?;
    let mut ctx = signed_in(user);
    header_into(&mut ctx, state, user, session_id).await?;
    if with_composer {
        composer_into(&mut ctx, state, user).await;
    }
    ctx.insert("turn", &shown);
    ctx.insert("with_composer", &with_composer);
    let html = render_to_string(state, "partials/_turn.html", &ctx)?;
    Ok(render::html_response(StatusCode::OK, html))
}

/// `POST /s/{session_id}/messages`: appends the message and starts the answer; returns both
/// (the answer as a live skeleton). The same client id twice yields one message and one run.
pub async fn send(
    state: web::Data<AppState>,
    user: CurrentUser,
    path: web::Path<String>,
    form: web::Form<ComposerForm>,
) -> Result<HttpResponse, WebError> {
    let session_id = parse_id(&path)?;
    let actor = &user.0.actor;
    let model = form.model.as_deref();
    match state.engine.submit(actor, session_id, &form.message, &form.client_id, model).await {
        Ok(started) => turn_fragment(&state, &user, session_id, &started, true).await,
        Err(e) => domain_to_composer(&state, e),
    }
}

/// `POST /s/{session_id}/stop`: stops the live answer, keeping what was written.
pub async fn stop(
    state: web::Data<AppState>,
    user: CurrentUser,
    path: web::Path<String>,
) -> Result<HttpResponse, WebError> {
    let session_id = parse_id(&path)?;
    state.engine.stop(&user.0.actor, session_id).await?;
    // The stream reports the end; nothing to swap here.
    Ok(HttpResponse::NoContent().finish())
}

/// `POST /s/{session_id}/messages/{message_id}/continue`: resumes a cut-off answer.
pub async fn resume(
    state: web::Data<AppState>,
    user: CurrentUser,
    path: web::Path<(String, String)>,
) -> Result<HttpResponse, WebError> {
    let (session_id, message_id) = (parse_id(&path.0)?, parse_id(&path.1)?);
    let started = state.engine.resume(&user.0.actor, session_id, message_id).await?;
    turn_fragment(&state, &user, session_id, &started, false).await
}

/// `POST /s/{session_id}/messages/{message_id}/retry`: a new answer next to this one.
pub async fn retry(
    state: web::Data<AppState>,
    user: CurrentUser,
    path: web::Path<(String, String)>,
) -> Result<HttpResponse, WebError> {
    let (session_id, message_id) = (parse_id(&path.0)?, parse_id(&path.1)?);
    let started = state.engine.retry(&user.0.actor, session_id, message_id).await?;
    turn_fragment(&state, &user, session_id, &started, false).await
}

/// Renders one message of the actor's session, as the `done` event and pages show it.
pub async fn final_message_html(
    state: &AppState,
    user: &CurrentUser,
    session_id: Uuid,
    message_id: Uuid,
) -> Result<String, WebError> {
    let mut ctx = signed_in(user);
    header_into(&mut ctx, state, user, session_id).await?;
    let m = chat::message(&state.db, &user.0.actor, session_id, message_id).await?;
    let mut views = chat_view::message_views(vec![m]).await?;
    ctx.insert("m", &views.pop());
    render_to_string(state, "partials/_message_final.html", &ctx)
}

/// `POST /admin/models/refresh`: forgets the discovered model lists.
pub async fn refresh_models(state: web::Data<AppState>, _admin: AdminUser) -> HttpResponse {
    state.engine.providers().refresh();
    HttpResponse::Ok()
        .content_type("text/html; charset=utf-8")
        .body("<p class=\"flash\">Model lists will be fetched again from the providers.</p>")
}
