//! Workspaces and the sidebar: create, settings, delete; rename, archive and delete sessions.

use actix_web::http::StatusCode;
use actix_web::{HttpRequest, HttpResponse, web};
use serde::Deserialize;
use tera::Context;
use uuid::Uuid;

use crate::domain::DomainError;
use crate::domain::sessions;
use crate::domain::sessions::SidebarWorkspace;
use crate::state::AppState;
use crate::web::client::see_other;
use crate::web::extractors::CurrentUser;
use crate::web::form;
use crate::web::render::{parse_id, render_to_string, signed_in};
use crate::web::session_page::sidebar_into;
use crate::web::{WebError, render};

/// The sidebar alone, as the answer to an action taken in it.
async fn sidebar_fragment(state: &AppState, user: &CurrentUser) -> Result<HttpResponse, WebError> {
    let mut ctx = signed_in(user);
    sidebar_into(&mut ctx, &state.pages.sidebar(&user.0.actor, None).await, None);
    let html = render_to_string(state, "partials/_sidebar.html", &ctx)?;
    Ok(render::html_response(StatusCode::OK, html))
}

/// `GET /sidebar`: the sidebar, for pages that do not draw it themselves (settings, the admin
/// console…), which load it when they open so that it is the same on every page.
pub async fn sidebar(state: web::Data<AppState>, user: CurrentUser) -> Result<HttpResponse, WebError> {
    sidebar_fragment(&state, &user).await
}

/// The page the request came from, as htmx reports it (path only).
fn current_path(req: &HttpRequest) -> String {
    let url = req.headers().get("HX-Current-URL").and_then(|v| v.to_str().ok()).unwrap_or("");
    let after_scheme = url.split_once("://").map_or(url, |(_, rest)| rest);
    let path = after_scheme.find('/').map_or("", |i| &after_scheme[i..]);
    path.split(['?', '#']).next().unwrap_or("").to_string()
}

/// After a sidebar action on a session: pages that show it (or a workspace page) are reloaded,
/// anywhere else only the sidebar is.
async fn after_session_change(
    state: &AppState,
    req: &HttpRequest,
    user: &CurrentUser,
    session_id: Uuid,
    gone: bool,
) -> Result<HttpResponse, WebError> {
    let here = current_path(req);
    if here == format!("/s/{session_id}") {
        if gone {
            return Ok(see_other(req, "/"));
        }
        return Ok(HttpResponse::Ok().insert_header(("HX-Refresh", "true")).finish());
    }
    if here.starts_with("/w/") {
        return Ok(HttpResponse::Ok().insert_header(("HX-Refresh", "true")).finish());
    }
    sidebar_fragment(state, user).await
}

/// The new-workspace form.
#[derive(Deserialize)]
pub struct NameForm {
    #[serde(default)]
    name: String,
}

/// `POST /workspaces`: creates a workspace and opens its page.
pub async fn create(
    state: web::Data<AppState>,
    req: HttpRequest,
    user: CurrentUser,
    form: web::Form<NameForm>,
) -> Result<HttpResponse, WebError> {
    match state.sessions.create_workspace(&user.0.actor, &form.name).await {
        Ok(w) => Ok(see_other(&req, &format!("/w/{}", w.id))),
        Err(DomainError::Invalid(m)) => {
            form::refused(&state, StatusCode::BAD_REQUEST, &m, "#new-workspace-error")
        }
        Err(e) => Err(e.into()),
    }
}

/// Query of the workspace page and the sidebar's "more" loader.
#[derive(Deserialize)]
pub struct PageQuery {
    #[serde(default)]
    page: u64,
}

async fn workspace_context(
    state: &AppState,
    user: &CurrentUser,
    workspace_id: Uuid,
) -> Result<Context, WebError> {
    let page = state.pages.workspace(&user.0.actor, workspace_id).await?;
    let mut ctx = signed_in(user);
    sidebar_into(&mut ctx, &page.sidebar, None);
    if let Some(shares) = &page.shares {
        ctx.insert("shares", shares);
        ctx.insert("workspace_id", &page.workspace.id);
    }
    if let Some(keys) = &page.owner_keys {
        ctx.insert("my_keys", keys);
    }
    ctx.insert("role", &page.role);
    ctx.insert("shared", &(page.workspace.owner_id != user.0.user.id));
    ctx.insert("workspace", &page.workspace);
    ctx.insert("contents", &page.contents);
    ctx.insert("archived", &page.archived);
    ctx.insert("models", &page.models);
    ctx.insert("approval_modes", &sessions::APPROVAL_MODES);
    ctx.insert("default_compact_at", &crate::domain::runs::compaction::DEFAULT_COMPACT_AT_PERCENT);
    ctx.insert("prompt_variables", crate::domain::sessions::prompt::VARIABLES);
    Ok(ctx)
}

/// `GET /w/{workspace_id}`: the workspace's settings, archived sessions and delete button.
pub async fn show(
    state: web::Data<AppState>,
    req: HttpRequest,
    user: CurrentUser,
    path: web::Path<String>,
) -> Result<HttpResponse, WebError> {
    let ctx = workspace_context(&state, &user, parse_id(&path)?).await?;
    render::page(&state, &req, "pages/workspace.html", "partials/_workspace.html", ctx)
}

/// The workspace settings form.
#[derive(Deserialize, Default)]
#[serde(default)]
pub struct WorkspaceSettingsForm {
    name: String,
    system_prompt: String,
    default_model: String,
    approval_mode: String,
    infer_titles: Option<String>,
    compact_at_percent: String,
}

/// The workspace's page again, saying it was saved.
async fn saved(state: &AppState, user: &CurrentUser, workspace_id: Uuid) -> Result<HttpResponse, WebError> {
    let mut ctx = workspace_context(state, user, workspace_id).await?;
    ctx.insert("saved", &true);
    let html = render_to_string(state, "partials/_workspace.html", &ctx)?;
    Ok(render::html_response(StatusCode::OK, html))
}

/// `POST /w/{workspace_id}`: saves the workspace's name and defaults.
pub async fn save(
    state: web::Data<AppState>,
    user: CurrentUser,
    path: web::Path<String>,
    form: web::Form<WorkspaceSettingsForm>,
) -> Result<HttpResponse, WebError> {
    let workspace_id = parse_id(&path)?;
    let input = sessions::WorkspaceForm {
        name: form.name.clone(),
        system_prompt: form.system_prompt.clone(),
        default_model: form.default_model.clone(),
        approval_mode: form.approval_mode.clone(),
        infer_titles: form.infer_titles.is_some(),
        compact_at_percent: form.compact_at_percent.clone(),
    };
    match state.sessions.update_workspace(&user.0.actor, workspace_id, &input).await {
        Ok(_) => saved(&state, &user, workspace_id).await,
        Err(DomainError::Invalid(m)) => {
            form::refused(&state, StatusCode::BAD_REQUEST, &m, "#workspace-error")
        }
        Err(e) => Err(e.into()),
    }
}

/// The workspace key form: one of the owner's key ids, or blank for none.
#[derive(Deserialize)]
pub struct WorkspaceKeyForm {
    key: String,
}

/// `POST /w/{workspace_id}/key`: attaches one of the owner's provider keys to the workspace
/// (runs in it use it, whoever starts them), or detaches it.
pub async fn attach_key(
    state: web::Data<AppState>,
    req: HttpRequest,
    user: CurrentUser,
    path: web::Path<String>,
    form: web::Form<WorkspaceKeyForm>,
) -> Result<HttpResponse, WebError> {
    let workspace_id = parse_id(&path)?;
    let who = crate::web::client::origin(&req, &state, &user.0);
    match state.sessions.attach_key(&user.0.actor, &who, workspace_id, &form.key).await {
        Ok(_) => saved(&state, &user, workspace_id).await,
        Err(DomainError::Invalid(m)) => {
            form::refused(&state, StatusCode::BAD_REQUEST, &m, "#workspace-key-error")
        }
        Err(e) => Err(e.into()),
    }
}

/// `POST /w/{workspace_id}/delete`: deletes the workspace with all its sessions.
pub async fn delete(
    state: web::Data<AppState>,
    req: HttpRequest,
    user: CurrentUser,
    path: web::Path<String>,
) -> Result<HttpResponse, WebError> {
    let workspace_id = parse_id(&path)?;
    state.deletions.workspace(&user.0.actor, workspace_id).await?;
    Ok(see_other(&req, "/"))
}

/// `GET /w/{workspace_id}/sessions?page=N`: the next page of the sidebar's sessions.
pub async fn sessions_page(
    state: web::Data<AppState>,
    user: CurrentUser,
    path: web::Path<String>,
    query: web::Query<PageQuery>,
) -> Result<HttpResponse, WebError> {
    let workspace_id = parse_id(&path)?;
    let (workspace, role) = state.sessions.view_workspace(&user.0.actor, workspace_id).await?;
    let (sessions, more) =
        state.sessions.workspace_sessions(&user.0.actor, workspace.id, false, query.page).await?;
    let mut ctx = signed_in(&user);
    let shared = workspace.owner_id != user.0.user.id;
    ctx.insert(
        "w",
        &SidebarWorkspace { workspace, sessions, more: more.then_some(query.page + 1), role, shared },
    );
    ctx.insert("active_session", &None::<Uuid>);
    let html = render_to_string(&state, "partials/_sidebar_sessions.html", &ctx)?;
    Ok(render::html_response(StatusCode::OK, html))
}

/// The rename form.
#[derive(Deserialize)]
pub struct TitleForm {
    #[serde(default)]
    title: String,
}

/// `POST /s/{session_id}/rename`: a title the user chose (never replaced by a proposed one).
pub async fn rename_session(
    state: web::Data<AppState>,
    req: HttpRequest,
    user: CurrentUser,
    path: web::Path<String>,
    form: web::Form<TitleForm>,
) -> Result<HttpResponse, WebError> {
    let session_id = parse_id(&path)?;
    state.sessions.rename_session(&user.0.actor, session_id, &form.title).await?;
    after_session_change(&state, &req, &user, session_id, false).await
}

/// The archive form: `archived=true` archives, anything else restores.
#[derive(Deserialize)]
pub struct ArchiveForm {
    #[serde(default)]
    archived: String,
}

/// `POST /s/{session_id}/archive`: hides the session from the sidebar, or restores it.
pub async fn archive_session(
    state: web::Data<AppState>,
    req: HttpRequest,
    user: CurrentUser,
    path: web::Path<String>,
    form: web::Form<ArchiveForm>,
) -> Result<HttpResponse, WebError> {
    let session_id = parse_id(&path)?;
    state.sessions.set_archived(&user.0.actor, session_id, form.archived == "true").await?;
    after_session_change(&state, &req, &user, session_id, false).await
}

/// `POST /s/{session_id}/delete`: deletes the session with all its branches.
pub async fn delete_session(
    state: web::Data<AppState>,
    req: HttpRequest,
    user: CurrentUser,
    path: web::Path<String>,
) -> Result<HttpResponse, WebError> {
    let session_id = parse_id(&path)?;
    state.deletions.session(&user.0.actor, session_id).await?;
    after_session_change(&state, &req, &user, session_id, true).await
}
