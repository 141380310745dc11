//! The session page and what its composer and buttons post: send, stop, continue, retry.

use actix_web::http::StatusCode;
use actix_web::{HttpRequest, HttpResponse, web};
use serde::Deserialize;
use tera::Context;
use uuid::Uuid;

use crate::domain::runs::Started;
use crate::domain::sessions::Conversation;
use crate::domain::{DomainError, sessions};
use crate::state::AppState;
use crate::web::chat_view::{self, usage_view};
use crate::web::client::see_other;
use crate::web::extractors::{AdminUser, CurrentUser};
use crate::web::render::{parse_id, render_to_string, signed_in};
use crate::web::{WebError, form, render};

/// A fresh composer id: a repeated POST of one form is recognised by it.
fn new_client_id() -> String {
    Uuid::new_v4().simple().to_string()
}

/// A form error shown next to the composer: the status says what happened, and htmx is told
/// where the message goes.
fn composer_error(state: &AppState, status: StatusCode, message: &str) -> Result<HttpResponse, WebError> {
    form::refused(state, status, message, "#composer-error")
}

fn domain_to_composer(state: &AppState, e: DomainError) -> Result<HttpResponse, WebError> {
    match e {
        DomainError::Invalid(m) => composer_error(state, StatusCode::BAD_REQUEST, &m),
        DomainError::Conflict(m) => composer_error(state, StatusCode::CONFLICT, &m),
        other => Err(other.into()),
    }
}

/// What the composer and sidebar need: model choices, a fresh client id, the workspaces.
async fn composer_into(ctx: &mut Context, state: &AppState, user: &CurrentUser, active: Option<Uuid>) {
    composer_fields_into(ctx, state, user).await;
    super::workspaces::sidebar_into(ctx, state, user, active).await;
}

/// The composer alone: model choices and a fresh client id.
async fn composer_fields_into(ctx: &mut Context, state: &AppState, user: &CurrentUser) {
    ctx.insert("models", &state.engine.providers().choices(&user.0.actor).await);
    ctx.insert("client_id", &new_client_id());
}

/// `GET /`'s signed-in part is built here so the home page and the session page share it;
/// `workspace` is where a new session starts (the default workspace when none or not the user's).
pub async fn home_context(
    state: &AppState,
    user: &CurrentUser,
    workspace: Option<Uuid>,
) -> Result<Context, WebError> {
    let actor = &user.0.actor;
    let mut ctx = signed_in(user);
    composer_into(&mut ctx, state, user, None).await;
    let chosen = match workspace {
        Some(id) => sessions::get_workspace(&state.db, actor, id).await.ok(),
        None => None,
    };
    let workspace = match chosen {
        Some(w) => w,
        None => sessions::default_workspace(&state.db, actor).await?,
    };
    let default = match workspace.default_model.clone() {
        Some(m) => Some(m),
        None => state.engine.providers().default_model(actor).await,
    };
    ctx.insert("selected_model", &default);
    ctx.insert("workspace", &workspace);
    Ok(ctx)
}

/// The session and its header (model, totals, gauge, tree); returns the conversation for
/// callers that also show messages.
async fn header_into(
    ctx: &mut Context,
    state: &AppState,
    user: &CurrentUser,
    session_id: Uuid,
    window: usize,
) -> Result<Conversation, WebError> {
    header_into_at(ctx, state, user, session_id, None, window).await
}

/// [`header_into`] with the content window ending before `before`.
async fn header_into_at(
    ctx: &mut Context,
    state: &AppState,
    user: &CurrentUser,
    session_id: Uuid,
    before: Option<Uuid>,
    window: usize,
) -> Result<Conversation, WebError> {
    let conv = sessions::conversation_window(&state.db, &user.0.actor, session_id, before, window).await?;
    let selected = match conv.session.model.clone() {
        Some(m) => Some(m),
        None => state.engine.providers().default_model(&user.0.actor).await,
    };
    let info = selected.as_deref().and_then(|m| state.engine.providers().model_info(m));
    ctx.insert("gauge", &chat_view::gauge(&conv, info.as_ref()));
    ctx.insert("selected_model", &selected);
    ctx.insert("totals", &usage_view(&conv.totals));
    ctx.insert("session", &conv.session);
    ctx.insert("message_count", &conv.message_count);
    Ok(conv)
}

/// Everything `partials/_session.html` shows: header, settings, the thread's last window and
/// the composer.
async fn session_context(
    state: &AppState,
    user: &CurrentUser,
    session_id: Uuid,
    with_sidebar: bool,
) -> Result<Context, WebError> {
    session_context_at(state, user, session_id, with_sidebar, None).await
}

/// [`session_context`] with the window placed so that `focus` (on the active path) is in it.
async fn session_context_at(
    state: &AppState,
    user: &CurrentUser,
    session_id: Uuid,
    with_sidebar: bool,
    focus: Option<Uuid>,
) -> Result<Context, WebError> {
    let mut ctx = signed_in(user);
    // The window ends half a window after the focused message, when that is not the end.
    let before = match focus {
        Some(f) => {
            let skeleton =
                sessions::conversation_window(&state.db, &user.0.actor, session_id, None, 0).await?;
            skeleton
                .path
                .iter()
                .position(|m| m.id == f)
                .and_then(|i| skeleton.path.get(i + chat_view::THREAD_WINDOW / 2))
                .map(|m| m.id)
        }
        None => None,
    };
    let conv = header_into_at(&mut ctx, state, user, session_id, before, chat_view::THREAD_WINDOW).await?;
    let (mut messages, older) = chat_view::thread_window(&conv, before).await?;
    ctx.insert("focus", &focus);
    agent_into(&mut ctx, state, user, &conv.session, &mut messages).await?;
    ctx.insert("messages", &messages);
    ctx.insert("older_before", &older);
    ctx.insert("settings", &settings_view(&conv.session));
    ctx.insert("prompt_variables", crate::domain::sessions::prompt::VARIABLES);
    if with_sidebar {
        composer_into(&mut ctx, state, user, Some(session_id)).await;
    } else {
        composer_fields_into(&mut ctx, state, user).await;
    }
    Ok(ctx)
}

/// What the agent adds to a session's page: the waiting call, the todo list, the approval
/// modes, and each tool card's diff and decision.
pub(crate) async fn agent_into(
    ctx: &mut Context,
    state: &AppState,
    user: &CurrentUser,
    session: &sessions::ChatSession,
    views: &mut [chat_view::MessageView],
) -> Result<(), WebError> {
    let actor = &user.0.actor;
    let workspace = sessions::get_workspace(&state.db, actor, session.workspace_id).await?;
    let calls = crate::domain::runs::agent_loop::calls_by_result(&state.db, actor, session.id).await?;
    chat_view::attach_calls(views, &calls);
    files_into(state, views).await?;
    // A sub-agent's work hangs below its result, beside the parent's next answer.
    for v in views.iter_mut() {
        let Some(result) = v.tool_result.as_mut().filter(|r| r.name == "subagent") else { continue };
        let message = sessions::message(&state.db, actor, session.id, v.id).await?;
        result.side_branch =
            sessions::side_branches(&state.db, actor, session.id, &message).await?.into_iter().next();
    }
    ctx.insert(
        "pending",
        &crate::domain::runs::agent_loop::pending_call(&state.db, actor, session.id).await?,
    );
    ctx.insert("todos", &crate::domain::agent::todos(&state.db, session.id).await?);
    ctx.insert("approval_modes", &sessions::APPROVAL_MODES);
    ctx.insert("workspace_approval_mode", &workspace.approval_mode);
    Ok(())
}

/// Adds each message's attached files to its view.
pub(crate) async fn files_into(
    state: &AppState,
    views: &mut [chat_view::MessageView],
) -> Result<(), WebError> {
    let ids: Vec<Uuid> = views.iter().filter(|v| v.role == "user").map(|v| v.id).collect();
    let mut files = crate::domain::files::views_of(&state.db, &ids).await?;
    for v in views.iter_mut() {
        if let Some(f) = files.remove(&v.id) {
            v.files = f;
        }
    }
    Ok(())
}

/// The messages after `message_id` on the active path, up to the next message of the user: what
/// a run wrote after it (tool results, the next answer).
pub(crate) async fn run_tail(
    state: &AppState,
    user: &CurrentUser,
    conv: &crate::domain::sessions::Conversation,
    message_id: Uuid,
) -> Result<Vec<chat_view::MessageView>, WebError> {
    let Some(at) = conv.path.iter().position(|m| m.id == message_id) else { return Ok(Vec::new()) };
    let mut tail = Vec::new();
    for m in conv.path.iter().skip(at + 1) {
        if m.role == crate::domain::sessions::tree::Role::User {
            break;
        }
        tail.push(sessions::message(&state.db, &user.0.actor, conv.session.id, m.id).await?);
    }
    chat_view::message_views(tail).await
}

/// A session's settings as the form shows them.
#[derive(serde::Serialize)]
struct SettingsView {
    model: String,
    temperature: String,
    max_output_tokens: String,
    reasoning_effort: String,
    thinking_budget: String,
    system_prompt: String,
    exposed_roots: String,
    approval_mode: String,
}

fn settings_view(session: &sessions::ChatSession) -> SettingsView {
    let params: crate::providers::types::GenParams =
        serde_json::from_value(session.params.clone()).unwrap_or_default();
    let effort = params
        .reasoning_effort
        .and_then(|e| serde_json::to_value(e).ok())
        .and_then(|v| v.as_str().map(str::to_string))
        .unwrap_or_default();
    SettingsView {
        model: session.model.clone().unwrap_or_default(),
        temperature: params.temperature.map(|t| t.to_string()).unwrap_or_default(),
        max_output_tokens: params.max_output_tokens.map(|t| t.to_string()).unwrap_or_default(),
        reasoning_effort: effort,
        thinking_budget: params.thinking_budget.map(|t| t.to_string()).unwrap_or_default(),
        system_prompt: session.system_prompt.clone().unwrap_or_default(),
        exposed_roots: session.exposed_roots.join("\n"),
        approval_mode: session.approval_mode.clone().unwrap_or_default(),
    }
}

/// The whole session section, as a fragment: what tree changes (edit, switch, delete, retry)
/// and settings answer with.
async fn session_fragment(
    state: &AppState,
    user: &CurrentUser,
    session_id: Uuid,
) -> Result<HttpResponse, WebError> {
    let ctx = session_context(state, user, session_id, false).await?;
    let html = render_to_string(state, "partials/_session.html", &ctx)?;
    Ok(render::html_response(StatusCode::OK, html))
}

/// `GET /s/{session_id}`: the conversation's active path, the composer and any live answer.
pub async fn show(
    state: web::Data<AppState>,
    req: HttpRequest,
    user: CurrentUser,
    path: web::Path<String>,
) -> Result<HttpResponse, WebError> {
    let session_id = parse_id(&path)?;
    // A search hit: its branch becomes the active path, and the page shows it.
    let focus = match web::Query::<ShowQuery>::from_query(req.query_string()).ok().and_then(|q| q.at.clone())
    {
        Some(raw) => {
            let id = parse_id(&raw)?;
            sessions::select_message(&state.db, &user.0.actor, session_id, id).await?;
            Some(id)
        }
        None => None,
    };
    let ctx = session_context_at(&state, &user, session_id, true, focus).await?;
    render::page(&state, &req, "pages/session.html", "partials/_session.html", ctx)
}

/// Query of the session page: `at` names a message to show (a search hit).
#[derive(Deserialize)]
pub struct ShowQuery {
    at: Option<String>,
}

/// Query of the "earlier messages" loader.
#[derive(Deserialize)]
pub struct OlderQuery {
    before: String,
}

/// `GET /s/{session_id}/older?before={message_id}`: the window of the active path before a message.
pub async fn older(
    state: web::Data<AppState>,
    user: CurrentUser,
    path: web::Path<String>,
    query: web::Query<OlderQuery>,
) -> Result<HttpResponse, WebError> {
    let session_id = parse_id(&path)?;
    let before = parse_id(&query.before)?;
    let conv = sessions::conversation_window(
        &state.db,
        &user.0.actor,
        session_id,
        Some(before),
        chat_view::THREAD_WINDOW,
    )
    .await?;
    let (messages, older) = chat_view::thread_window(&conv, Some(before)).await?;
    let mut ctx = signed_in(&user);
    ctx.insert("session", &conv.session);
    ctx.insert("messages", &messages);
    ctx.insert("older_before", &older);
    ctx.insert("client_id", &new_client_id());
    let html = render_to_string(&state, "partials/_older.html", &ctx)?;
    Ok(render::html_response(StatusCode::OK, html))
}

/// The composer's fields.
#[derive(Deserialize)]
pub struct ComposerForm {
    #[serde(default)]
    message: String,
    #[serde(default)]
    client_id: String,
    /// Uploaded files to attach: their ids, comma-separated.
    #[serde(default)]
    attachments: String,
    #[serde(default)]
    model: Option<String>,
    /// Where a new session starts (home composer only).
    #[serde(default)]
    workspace_id: Option<String>,
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
    if let Some(existing) = sessions::session_by_client_id(&state.db, actor, &form.client_id).await? {
        return Ok(see_other(&req, &format!("/s/{existing}")));
    }
    if form.message.trim().is_empty() {
        return composer_error(&state, StatusCode::BAD_REQUEST, "Write a message first.");
    }
    let workspace = match form.workspace_id.as_deref().filter(|w| !w.is_empty()) {
        Some(raw) => sessions::get_workspace(&state.db, actor, parse_id(raw)?).await?,
        None => sessions::default_workspace(&state.db, actor).await?,
    };
    let session =
        sessions::create_session(&state.db, actor, workspace.id, &sessions::title_from(&form.message))
            .await?;
    let model = form.model.as_deref();
    match state.engine.submit(actor, session.id, &form.message, &form.client_id, model).await {
        Ok(_) => Ok(see_other(&req, &format!("/s/{}", session.id))),
        Err(e) => {
            // Nothing was sent: the empty session goes again, so a refused first message leaves
            // no trace.
            if let Err(del) = sessions::delete_session(&state.db, actor, session.id).await {
                tracing::warn!(error = %del, "could not remove an empty session");
            }
            domain_to_composer(&state, e)
        }
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
        shown.push(sessions::message(&state.db, actor, session_id, id).await?);
    }
    shown.push(sessions::message(&state.db, actor, session_id, started.assistant_message_id).await?);
    let mut shown = chat_view::message_views(shown).await?;
    files_into(state, &mut shown).await?;
    let mut ctx = signed_in(user);
    header_into(&mut ctx, state, user, session_id, 0).await?;
    if with_composer {
        composer_fields_into(&mut ctx, state, user).await;
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
    if let Some((expose, folder)) = root_command(&form.message) {
        return match sessions::change_root(&state.db, actor, session_id, folder, expose).await {
            Ok((_, notice)) => {
                let mut ctx = session_context(&state, &user, session_id, false).await?;
                ctx.insert("composer_notice", &notice);
                let html = render_to_string(&state, "partials/_session.html", &ctx)?;
                let mut res = render::html_response(StatusCode::OK, html);
                form::retarget(&mut res, "#session", "outerHTML");
                Ok(res)
            }
            Err(e) => domain_to_composer(&state, e),
        };
    }
    let model = form.model.as_deref();
    let uploads = match crate::domain::files::parse_upload_ids(&form.attachments) {
        Ok(u) => u,
        Err(e) => return domain_to_composer(&state, e),
    };
    match state
        .engine
        .submit_with_files(actor, session_id, &form.message, &form.client_id, model, &uploads)
        .await
    {
        Ok(started) => turn_fragment(&state, &user, session_id, &started, true).await,
        Err(e) => domain_to_composer(&state, e),
    }
}

/// `/expose folder` or `/unexpose folder` typed in the composer: (expose?, folder).
fn root_command(message: &str) -> Option<(bool, &str)> {
    let m = message.trim();
    for (word, expose) in [("/expose", true), ("/unexpose", false)] {
        if let Some(rest) = m.strip_prefix(word)
            && (rest.is_empty() || rest.starts_with(char::is_whitespace))
        {
            return Some((expose, rest.trim()));
        }
    }
    None
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
    state.engine.retry(&user.0.actor, session_id, message_id).await?;
    session_fragment(&state, &user, session_id).await
}

/// Renders one message of the actor's session, as the `done` event and pages show it.
pub async fn final_message_html(
    state: &AppState,
    user: &CurrentUser,
    session_id: Uuid,
    message_id: Uuid,
) -> Result<String, WebError> {
    let mut ctx = signed_in(user);
    // The latest exchange whole: the context gauge reads its usage.
    let conv = header_into(&mut ctx, state, user, session_id, 2).await?;
    let m = sessions::message(&state.db, &user.0.actor, session_id, message_id).await?;
    let mut views = vec![chat_view::single_view(&conv, m).await?];
    views.extend(run_tail(state, user, &conv, message_id).await?);
    agent_into(&mut ctx, state, user, &conv.session, &mut views).await?;
    let mut views = views.into_iter();
    ctx.insert("m", &views.next());
    ctx.insert("tail", &views.collect::<Vec<_>>());
    render_to_string(state, "partials/_message_final.html", &ctx)
}

/// `POST /admin/models/refresh`: forgets the discovered model lists.
pub async fn refresh_models(state: web::Data<AppState>, _admin: AdminUser) -> HttpResponse {
    state.engine.providers().refresh();
    HttpResponse::Ok()
        .content_type("text/html; charset=utf-8")
        .body("<p class=\"flash\">Model lists will be fetched again from the providers.</p>")
}

/// The edit form of a user message.
#[derive(Deserialize)]
pub struct EditForm {
    message: String,
    #[serde(default)]
    client_id: String,
    #[serde(default)]
    model: Option<String>,
}

/// `POST /s/{session_id}/messages/{message_id}/edit`: the edited text becomes a new sibling of
/// the message, is answered, and the session shows the new branch (the old one stays).
pub async fn edit(
    state: web::Data<AppState>,
    user: CurrentUser,
    path: web::Path<(String, String)>,
    form: web::Form<EditForm>,
) -> Result<HttpResponse, WebError> {
    let (session_id, message_id) = (parse_id(&path.0)?, parse_id(&path.1)?);
    let actor = &user.0.actor;
    let model = form.model.as_deref();
    match state.engine.edit(actor, session_id, message_id, &form.message, &form.client_id, model).await {
        Ok(_) => session_fragment(&state, &user, session_id).await,
        Err(e) => domain_to_composer(&state, e),
    }
}

/// `POST /s/{session_id}/messages/{message_id}/select`: makes the path through this message the
/// active one ("‹ 2 / 3 ›" and the tree overview).
pub async fn select(
    state: web::Data<AppState>,
    user: CurrentUser,
    path: web::Path<(String, String)>,
) -> Result<HttpResponse, WebError> {
    let (session_id, message_id) = (parse_id(&path.0)?, parse_id(&path.1)?);
    sessions::select_message(&state.db, &user.0.actor, session_id, message_id).await?;
    session_fragment(&state, &user, session_id).await
}

/// `POST /s/{session_id}/messages/{message_id}/delete`: deletes the message and its branch.
pub async fn delete_message(
    state: web::Data<AppState>,
    user: CurrentUser,
    path: web::Path<(String, String)>,
) -> Result<HttpResponse, WebError> {
    let (session_id, message_id) = (parse_id(&path.0)?, parse_id(&path.1)?);
    let active = state.runs.is_active(session_id);
    match sessions::delete_branch(&state.db, &user.0.actor, session_id, message_id, active).await {
        Ok(_) => {
            // The index drops the removed messages when a search next meets them.
            state.after_deletion(None);
            session_fragment(&state, &user, session_id).await
        }
        Err(e) => domain_to_composer(&state, e),
    }
}

/// `POST /s/{session_id}/settings`: model, generation settings, system prompt, exposed folders.
pub async fn save_settings(
    state: web::Data<AppState>,
    user: CurrentUser,
    path: web::Path<String>,
    form: web::Form<sessions::SessionForm>,
) -> Result<HttpResponse, WebError> {
    let session_id = parse_id(&path)?;
    match sessions::update_session(&state.db, &user.0.actor, session_id, &form).await {
        Ok(_) => session_fragment(&state, &user, session_id).await,
        Err(DomainError::Invalid(m)) => form::refused(&state, StatusCode::BAD_REQUEST, &m, "#settings-error"),
        Err(e) => Err(e.into()),
    }
}

/// `POST /s/{session_id}/prompt-preview`: the posted template rendered as this session's system
/// prompt would be; a template error is shown with its line.
pub async fn prompt_preview(
    state: web::Data<AppState>,
    user: CurrentUser,
    path: web::Path<String>,
    form: web::Form<sessions::SessionForm>,
) -> Result<HttpResponse, WebError> {
    let actor = &user.0.actor;
    let session = sessions::get_session(&state.db, actor, parse_id(&path)?).await?;
    let workspace = sessions::get_workspace(&state.db, actor, session.workspace_id).await?;
    let mut probe = session.clone();
    probe.exposed_roots = sessions::parse_roots(&form.exposed_roots).unwrap_or(session.exposed_roots);
    let template = match form.system_prompt.trim() {
        "" => workspace.system_prompt.clone().unwrap_or_default(),
        t => t.to_string(),
    };
    let model = match form.model.trim() {
        "" => state.engine.providers().default_model(actor).await.unwrap_or_default(),
        m => m.to_string(),
    };
    let mut ctx = Context::new();
    if template.chars().count() > sessions::MAX_PROMPT_CHARS {
        ctx.insert(
            "error",
            &format!("The system prompt is longer than {} characters.", sessions::MAX_PROMPT_CHARS),
        );
    } else {
        match state.engine.render_prompt(actor, &workspace, &probe, &template, &model).await {
            Ok(text) => ctx.insert("preview", &text),
            Err(e) => {
                ctx.insert("error", &e.message);
                ctx.insert("error_line", &e.line);
            }
        }
    }
    let html = render_to_string(&state, "partials/_prompt_preview.html", &ctx)?;
    Ok(render::html_response(StatusCode::OK, html))
}

/// `GET /s/{session_id}/tree`: the tree overview, loaded when it is opened (a long session's
/// drawing would otherwise weigh on every page).
pub async fn tree(
    state: web::Data<AppState>,
    user: CurrentUser,
    path: web::Path<String>,
) -> Result<HttpResponse, WebError> {
    let session_id = parse_id(&path)?;
    let overview = sessions::tree_overview(&state.db, &user.0.actor, session_id).await?;
    let mut ctx = signed_in(&user);
    ctx.insert("overview", &overview);
    ctx.insert("session_id", &session_id);
    let html = render_to_string(&state, "partials/_tree.html", &ctx)?;
    Ok(render::html_response(StatusCode::OK, html))
}

/// Most messages a side branch shows inline.
const SIDE_BRANCH_LIMIT: usize = 200;

/// `GET /s/{session_id}/messages/{message_id}/branch`: a side branch (a sub-agent's work) from
/// this message down, for its card.
pub async fn branch(
    state: web::Data<AppState>,
    user: CurrentUser,
    path: web::Path<(String, String)>,
) -> Result<HttpResponse, WebError> {
    let (session_id, message_id) = (parse_id(&path.0)?, parse_id(&path.1)?);
    let actor = &user.0.actor;
    let messages = sessions::branch_from(&state.db, actor, session_id, message_id, SIDE_BRANCH_LIMIT).await?;
    let session = sessions::get_session(&state.db, actor, session_id).await?;
    let views = chat_view::message_views(messages).await?;
    let mut ctx = signed_in(&user);
    ctx.insert("session", &session);
    ctx.insert("messages", &views);
    ctx.insert("client_id", "");
    let html = render_to_string(&state, "partials/_side_branch.html", &ctx)?;
    Ok(render::html_response(StatusCode::OK, html))
}

#[cfg(test)]
mod tests {
    use super::root_command;

    #[test]
    fn only_whole_commands_change_folders() {
        assert_eq!(root_command("/expose notes"), Some((true, "notes")));
        assert_eq!(root_command("  /unexpose   src/app  "), Some((false, "src/app")));
        assert_eq!(root_command("/expose"), Some((true, "")));
        assert_eq!(root_command("/exposure is a word"), None);
        assert_eq!(root_command("please /expose notes"), None);
    }
}
