//! The session and home pages as the templates show them, from the read models
//! `domain::pages` gathers: the sidebar, the composer, the session header, the thread window
//! with its agent state and files, and one finished message. Shared by the handlers that
//! render these pages or fragments of them.

use actix_web::HttpResponse;
use actix_web::http::StatusCode;
use tera::Context;
use uuid::Uuid;

use crate::domain::DomainError;
use crate::domain::pages::{AgentPanel, HomePage, MessageExtras, SessionHeader};
use crate::domain::providers::ModelChoice;
use crate::domain::sessions::access::ShareRole;
use crate::domain::sessions::{self, ChatSession, SidebarWorkspace};
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

/// The composer's fields: model choices and a fresh client id.
pub(crate) fn composer_into(ctx: &mut Context, models: &[ModelChoice]) {
    ctx.insert("models", models);
    ctx.insert("client_id", &new_client_id());
}

/// The sidebar's workspaces and sessions; `active` is highlighted.
pub(crate) fn sidebar_into(ctx: &mut Context, sidebar: &[SidebarWorkspace], active: Option<Uuid>) {
    ctx.insert("sidebar", sidebar);
    ctx.insert("active_session", &active);
}

/// `GET /`'s signed-in part, which the search page shows too: the composer (where a new
/// session starts) and the sidebar.
pub(crate) fn home_context(user: &CurrentUser, home: &HomePage) -> Context {
    let mut ctx = signed_in(user);
    composer_into(&mut ctx, &home.models);
    sidebar_into(&mut ctx, &home.sidebar, None);
    ctx.insert("selected_model", &home.selected_model);
    ctx.insert("workspace", &home.workspace);
    ctx
}

/// The session and its header (model, totals, gauge, tree).
pub(crate) fn header_into(ctx: &mut Context, state: &AppState, user: &CurrentUser, header: &SessionHeader) {
    let conv = &header.conversation;
    ctx.insert("gauge", &session_view::gauge(conv, header.model_info.as_ref()));
    ctx.insert("totals", &usage_view(&conv.totals));
    ctx.insert("message_count", &conv.message_count);
    access_into(ctx, state, user, &conv.session, conv.role, &header.selected_model);
}

/// The session, its model and what the reader may do in it: what every fragment of the
/// session's messages needs (the header's counts and gauge aside).
pub(crate) fn access_into(
    ctx: &mut Context,
    state: &AppState,
    user: &CurrentUser,
    session: &ChatSession,
    role: ShareRole,
    selected_model: &Option<String>,
) {
    ctx.insert("selected_model", selected_model);
    ctx.insert("session", session);
    // What the page offers: a viewer gets no composer, no edit or retry, no decisions.
    // Flags that restrict, so a fragment rendered without them offers everything (the server
    // refuses what the role does not allow either way).
    ctx.insert("role", &role);
    ctx.insert("viewer", &(role < ShareRole::Editor));
    ctx.insert("may_not_delete", &(role < ShareRole::Owner));
    ctx.insert("shared", &(session.owner_id != user.0.user.id));
    ctx.insert("public_links", &state.config.sharing.public_links);
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
    let page = state.pages.session(&user.0.actor, session_id, focus, with_sidebar).await?;
    let mut ctx = signed_in(user);
    header_into(&mut ctx, state, user, &page.header);
    let conv = &page.header.conversation;
    let mut messages = session_view::thread_window(conv, page.window.clone()).await?;
    extras_into(&mut messages, &page.extras, user);
    agent_into(&mut ctx, &page.agent);
    ctx.insert("focus", &page.focus);
    ctx.insert("messages", &messages);
    ctx.insert("older_before", &page.older_before());
    ctx.insert("settings", &settings_view(&conv.session));
    ctx.insert("prompt_variables", crate::domain::sessions::prompt::VARIABLES);
    composer_into(&mut ctx, &page.models);
    if let Some(sidebar) = &page.sidebar {
        sidebar_into(&mut ctx, sidebar, Some(session_id));
    }
    Ok(ctx)
}

/// What the agent adds to a session's page: the waiting call, the todo list, the approval
/// modes.
fn agent_into(ctx: &mut Context, agent: &AgentPanel) {
    ctx.insert("pending", &agent.pending);
    ctx.insert("unfinished", &agent.unfinished);
    ctx.insert("todos", &agent.todos);
    ctx.insert("context_files", &agent.context_files);
    ctx.insert("approval_modes", &sessions::APPROVAL_MODES);
    ctx.insert("workspace_approval_mode", &agent.workspace_approval_mode);
}

/// Adds each message's attached files to its view.
pub(crate) fn files_into(
    views: &mut [session_view::MessageView],
    files: &std::collections::HashMap<Uuid, Vec<crate::domain::files::FileView>>,
) {
    for v in views.iter_mut() {
        if let Some(f) = files.get(&v.id) {
            v.files = f.clone();
        }
    }
}

/// Adds to each shown message what the page gathered for it: its tool card's diff and
/// decision, its files, a sub-agent's work below its result, and who wrote it when that was
/// someone other than the reader (in a shared workspace the thread shows its people; in one's
/// own, nothing).
pub(crate) fn extras_into(
    views: &mut [session_view::MessageView],
    extras: &MessageExtras,
    user: &CurrentUser,
) {
    session_view::attach_calls(views, &extras.calls);
    files_into(views, &extras.files);
    for v in views.iter_mut() {
        if let Some(result) = v.tool_result.as_mut().filter(|r| r.name == "subagent") {
            result.side_branch = extras.side_branches.get(&v.id).copied();
        }
        if (v.role == "user" || v.role == "assistant")
            && let Some(id) = v.author_id.filter(|id| *id != user.0.user.id)
        {
            v.author = Some(extras.authors.get(&id).cloned().unwrap_or_else(|| "a former member".into()));
        }
    }
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

/// Renders one message of the actor's session, as the `done` event and pages show it; `plain`
/// when the run that wrote it said that answer is all it wrote (then the agent's panel is left
/// as the page shows it, see [`crate::domain::pages::Pages::message`]).
pub(crate) async fn final_message_html(
    state: &AppState,
    user: &CurrentUser,
    session_id: Uuid,
    message_id: Uuid,
    plain: bool,
) -> Result<String, WebError> {
    let page = state.pages.message(&user.0.actor, session_id, message_id, plain).await?;
    let mut ctx = signed_in(user);
    header_into(&mut ctx, state, user, &page.header);
    let mut messages = page.messages.into_iter();
    let first = messages.next().ok_or(WebError::NotFound)?;
    let mut views = vec![session_view::single_view(&page.header.conversation, first).await?];
    views.extend(session_view::message_views(messages.collect()).await?);
    extras_into(&mut views, &page.extras, user);
    if let Some(agent) = &page.agent {
        agent_into(&mut ctx, agent);
    }
    ctx.insert("agent_panel", &page.agent.is_some());
    let mut views = views.into_iter();
    ctx.insert("m", &views.next());
    ctx.insert("tail", &views.collect::<Vec<_>>());
    render_to_string(state, "partials/_message_final.html", &ctx)
}
