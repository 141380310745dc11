//! The session and home pages' read models, shared by the handlers that render them or
//! fragments of them: the sidebar, the composer, the session header, the thread window with
//! its agent state and files, and one finished message.

use actix_web::HttpResponse;
use actix_web::http::StatusCode;
use tera::Context;
use uuid::Uuid;

use crate::domain::DomainError;
use crate::domain::sessions::access::ShareRole;
use crate::domain::sessions::{self, Conversation};
use crate::state::AppState;
use crate::web::extractors::CurrentUser;
use crate::web::render::{render_to_string, signed_in};
use crate::web::session_view::{self, usage_view};
use crate::web::{WebError, form, render};

/// A fresh composer id: a repeated POST of one form is recognised by it.
pub(crate) fn new_client_id() -> String {
    Uuid::new_v4().simple().to_string()
}

/// A form error shown next to the composer: the status says what happened, and htmx is told
/// where the message goes.
pub(crate) fn composer_error(
    state: &AppState,
    status: StatusCode,
    message: &str,
) -> Result<HttpResponse, WebError> {
    form::refused(state, status, message, "#composer-error")
}

pub(crate) fn domain_to_composer(state: &AppState, e: DomainError) -> Result<HttpResponse, WebError> {
    match e {
        DomainError::Invalid(m) => composer_error(state, StatusCode::BAD_REQUEST, &m),
        DomainError::Conflict(m) => composer_error(state, StatusCode::CONFLICT, &m),
        DomainError::Upstream(m) => composer_error(state, StatusCode::BAD_GATEWAY, &m),
        other => Err(other.into()),
    }
}

/// What the composer and sidebar need: model choices, a fresh client id, the workspaces.
pub(crate) async fn composer_into(
    ctx: &mut Context,
    state: &AppState,
    user: &CurrentUser,
    active: Option<Uuid>,
) {
    composer_fields_into(ctx, state, user).await;
    sidebar_into(ctx, state, user, active).await;
}

/// The composer alone: model choices and a fresh client id.
pub(crate) async fn composer_fields_into(ctx: &mut Context, state: &AppState, user: &CurrentUser) {
    ctx.insert("models", &state.engine.providers().choices(&user.0.actor).await);
    ctx.insert("client_id", &new_client_id());
}

/// `GET /`'s signed-in part is built here so the home page and the session page share it;
/// `workspace` is where a new session starts (the default workspace when none or not the user's).
pub(crate) async fn home_context(
    state: &AppState,
    user: &CurrentUser,
    workspace: Option<Uuid>,
) -> Result<Context, WebError> {
    let actor = &user.0.actor;
    let mut ctx = signed_in(user);
    composer_into(&mut ctx, state, user, None).await;
    let chosen = match workspace {
        Some(id) => state.sessions.view_workspace(actor, id).await.ok().map(|(w, _)| w),
        None => None,
    };
    let workspace = match chosen {
        Some(w) => w,
        None => state.sessions.default_workspace(actor).await?,
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
pub(crate) async fn header_into(
    ctx: &mut Context,
    state: &AppState,
    user: &CurrentUser,
    session_id: Uuid,
    window: usize,
) -> Result<Conversation, WebError> {
    header_into_at(ctx, state, user, session_id, None, window).await
}

/// [`header_into`] with the content window ending before `before`.
pub(crate) async fn header_into_at(
    ctx: &mut Context,
    state: &AppState,
    user: &CurrentUser,
    session_id: Uuid,
    before: Option<Uuid>,
    window: usize,
) -> Result<Conversation, WebError> {
    let conv = state.sessions.conversation_window(&user.0.actor, session_id, before, window).await?;
    let selected = match conv.session.model.clone() {
        Some(m) => Some(m),
        None => state.engine.providers().default_model(&user.0.actor).await,
    };
    let info = match selected.as_deref() {
        Some(m) => state.engine.model_info(&user.0.actor, &conv.session, m).await,
        None => None,
    };
    ctx.insert("gauge", &session_view::gauge(&conv, info.as_ref()));
    ctx.insert("selected_model", &selected);
    ctx.insert("totals", &usage_view(&conv.totals));
    ctx.insert("session", &conv.session);
    ctx.insert("message_count", &conv.message_count);
    // What the page offers: a viewer gets no composer, no edit or retry, no decisions.
    // Flags that restrict, so a fragment rendered without them offers everything (the server
    // refuses what the role does not allow either way).
    ctx.insert("role", &conv.role);
    ctx.insert("viewer", &(conv.role < ShareRole::Editor));
    ctx.insert("may_not_delete", &(conv.role < ShareRole::Owner));
    ctx.insert("shared", &(conv.session.owner_id != user.0.user.id));
    ctx.insert("public_links", &state.config.sharing.public_links);
    Ok(conv)
}

/// Everything `partials/_session.html` shows: header, settings, the thread's last window and
/// the composer.
pub(crate) async fn session_context(
    state: &AppState,
    user: &CurrentUser,
    session_id: Uuid,
    with_sidebar: bool,
) -> Result<Context, WebError> {
    session_context_at(state, user, session_id, with_sidebar, None).await
}

/// [`session_context`] with the window placed so that `focus` (on the active path) is in it.
pub(crate) async fn session_context_at(
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
            let skeleton = state.sessions.conversation_window(&user.0.actor, session_id, None, 0).await?;
            skeleton
                .path
                .iter()
                .position(|m| m.id == f)
                .and_then(|i| skeleton.path.get(i + session_view::THREAD_WINDOW / 2))
                .map(|m| m.id)
        }
        None => None,
    };
    let conv = header_into_at(&mut ctx, state, user, session_id, before, session_view::THREAD_WINDOW).await?;
    let (mut messages, older) = session_view::thread_window(&conv, before).await?;
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
    views: &mut [session_view::MessageView],
) -> Result<(), WebError> {
    let actor = &user.0.actor;
    let (workspace, _) = state.sessions.view_workspace(actor, session.workspace_id).await?;
    let calls = state.engine.calls_by_result(actor, session.id).await?;
    session_view::attach_calls(views, &calls);
    files_into(state, views).await?;
    // A sub-agent's work hangs below its result, beside the parent's next answer.
    for v in views.iter_mut() {
        let Some(result) = v.tool_result.as_mut().filter(|r| r.name == "subagent") else { continue };
        let message = state.sessions.message(actor, session.id, v.id).await?;
        result.side_branch =
            state.sessions.side_branches(actor, session.id, &message).await?.into_iter().next();
    }
    let pending = state.engine.pending_call(actor, session.id).await?;
    // A call a stopped, interrupted or failed run left unfinished is offered again.
    let unfinished = match pending {
        Some(_) => None,
        None => state.engine.unfinished_call(actor, session.id).await?,
    };
    ctx.insert("pending", &pending);
    ctx.insert("unfinished", &unfinished);
    ctx.insert("todos", &state.agent.todos(session.id).await?);
    ctx.insert("context_files", &state.engine.files_in_context(actor, session.id).await?);
    ctx.insert("approval_modes", &sessions::APPROVAL_MODES);
    ctx.insert("workspace_approval_mode", &workspace.approval_mode);
    authors_into(state, user, views).await
}

/// Says who asked (and for whom an answer was written) on the messages someone other than the
/// reader wrote: in a shared workspace the thread shows its people; in one's own, nothing.
async fn authors_into(
    state: &AppState,
    user: &CurrentUser,
    views: &mut [session_view::MessageView],
) -> Result<(), WebError> {
    let mut others: Vec<Uuid> =
        views.iter().filter_map(|v| v.author_id).filter(|id| *id != user.0.user.id).collect();
    others.sort_unstable();
    others.dedup();
    let names = crate::domain::accounts::names(&state.db, &others).await?;
    for v in views.iter_mut().filter(|v| v.role == "user" || v.role == "assistant") {
        if let Some(id) = v.author_id.filter(|id| *id != user.0.user.id) {
            v.author = Some(names.get(&id).cloned().unwrap_or_else(|| "a former member".into()));
        }
    }
    Ok(())
}

/// Adds each message's attached files to its view: the person's uploads, and the images
/// answers and tool results made.
pub(crate) async fn files_into(
    state: &AppState,
    views: &mut [session_view::MessageView],
) -> Result<(), WebError> {
    let ids: Vec<Uuid> = views.iter().map(|v| v.id).collect();
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
) -> Result<Vec<session_view::MessageView>, WebError> {
    let Some(at) = conv.path.iter().position(|m| m.id == message_id) else { return Ok(Vec::new()) };
    let mut tail = Vec::new();
    for m in conv.path.iter().skip(at + 1) {
        if m.role == crate::domain::sessions::tree::Role::User {
            break;
        }
        tail.push(state.sessions.message(&user.0.actor, conv.session.id, m.id).await?);
    }
    session_view::message_views(tail).await
}

/// A session's settings as the form shows them.
#[derive(serde::Serialize)]
pub(crate) struct SettingsView {
    model: String,
    temperature: String,
    max_output_tokens: String,
    reasoning_effort: String,
    thinking_budget: String,
    system_prompt: String,
    exposed_roots: String,
    approval_mode: String,
}

pub(crate) fn settings_view(session: &sessions::ChatSession) -> SettingsView {
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
pub(crate) async fn session_fragment(
    state: &AppState,
    user: &CurrentUser,
    session_id: Uuid,
) -> Result<HttpResponse, WebError> {
    let ctx = session_context(state, user, session_id, false).await?;
    let html = render_to_string(state, "partials/_session.html", &ctx)?;
    Ok(render::html_response(StatusCode::OK, html))
}

/// Renders one message of the actor's session, as the `done` event and pages show it.
pub(crate) async fn final_message_html(
    state: &AppState,
    user: &CurrentUser,
    session_id: Uuid,
    message_id: Uuid,
) -> Result<String, WebError> {
    let mut ctx = signed_in(user);
    // The latest exchange whole: the context gauge reads its usage.
    let conv = header_into(&mut ctx, state, user, session_id, 2).await?;
    let m = state.sessions.message(&user.0.actor, session_id, message_id).await?;
    let mut views = vec![session_view::single_view(&conv, m).await?];
    views.extend(run_tail(state, user, &conv, message_id).await?);
    agent_into(&mut ctx, state, user, &conv.session, &mut views).await?;
    let mut views = views.into_iter();
    ctx.insert("m", &views.next());
    ctx.insert("tail", &views.collect::<Vec<_>>());
    render_to_string(state, "partials/_message_final.html", &ctx)
}

pub(crate) use crate::domain::sessions::SidebarWorkspace;

/// Puts the sidebar's workspaces and sessions into a page's context; `active` is highlighted.
pub(crate) async fn sidebar_into(
    ctx: &mut Context,
    state: &AppState,
    user: &CurrentUser,
    active: Option<Uuid>,
) {
    let workspaces = state.sessions.sidebar(&user.0.actor, active).await.unwrap_or_else(|e| {
        tracing::warn!(error = %e, "sidebar could not be loaded");
        Vec::new()
    });
    ctx.insert("sidebar", &workspaces);
    ctx.insert("active_session", &active);
}
