//! Settings → Memory: what the agent remembers about the member and about each workspace.

use actix_web::http::StatusCode;
use actix_web::{HttpRequest, HttpResponse, web};
use serde::Deserialize;

use crate::domain::agent::memory::{self, Scope};
use crate::state::AppState;
use crate::web::WebError;
use crate::web::extractors::CurrentUser;
use crate::web::form::{Flash, outcome};
use crate::web::render::{parse_id, settings_tab, signed_in};

async fn page(
    state: &AppState,
    req: &HttpRequest,
    user: &CurrentUser,
    flash: Flash,
    status: StatusCode,
) -> Result<HttpResponse, WebError> {
    let mut ctx = signed_in(user);
    ctx.insert("memory", &state.agent.memory_overview(&user.0.actor).await?);
    ctx.insert("max_chars", &memory::MAX_MEMORY_CHARS);
    settings_tab(state, req, ctx, "memory", &flash, status)
}

/// `GET /settings/memory`.
pub async fn show(
    state: web::Data<AppState>,
    req: HttpRequest,
    user: CurrentUser,
) -> Result<HttpResponse, WebError> {
    page(&state, &req, &user, Flash::default(), StatusCode::OK).await
}

/// One memory as edited: `scope` is `member` or a workspace id.
#[derive(Deserialize)]
pub struct MemoryForm {
    #[serde(default)]
    scope: String,
    #[serde(default)]
    content: String,
}

/// `POST /settings/memory`: replaces one memory with what the member wrote.
pub async fn save(
    state: web::Data<AppState>,
    req: HttpRequest,
    user: CurrentUser,
    form: web::Form<MemoryForm>,
) -> Result<HttpResponse, WebError> {
    let scope = match form.scope.as_str() {
        "member" => Scope::Member,
        other => Scope::Workspace(parse_id(other)?),
    };
    let written = state.agent.write_memory(&user.0.actor, scope, &form.content).await;
    let (flash, status) = outcome(written, |()| "Saved: the agent sees it from its next reply.".into())?;
    page(&state, &req, &user, flash, status).await
}
