//! Settings → Memory: what the agent remembers about the member and about each workspace.

use actix_web::http::StatusCode;
use actix_web::{HttpRequest, HttpResponse, web};
use serde::Deserialize;
use tera::Context;

use crate::domain::DomainError;
use crate::domain::agent::memory::{self, Scope};
use crate::state::AppState;
use crate::web::WebError;
use crate::web::extractors::CurrentUser;
use crate::web::form::Flash;
use crate::web::render::parse_id;

async fn page(
    state: &AppState,
    req: &HttpRequest,
    user: &CurrentUser,
    flash: Flash,
    status: StatusCode,
) -> Result<HttpResponse, WebError> {
    let mut ctx = Context::new();
    ctx.insert("user", &user.0.user);
    ctx.insert("csrf_token", &user.0.csrf_secret);
    ctx.insert("memory", &state.agent.memory_overview(&user.0.actor).await?);
    ctx.insert("max_chars", &memory::MAX_MEMORY_CHARS);
    super::settings::settings_tab(state, req, ctx, "memory", &flash, status)
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
    match state.agent.write_memory(&user.0.actor, scope, &form.content).await {
        Ok(()) => {
            let flash =
                Flash { ok: Some("Saved: the agent sees it from its next reply.".into()), error: None };
            page(&state, &req, &user, flash, StatusCode::OK).await
        }
        Err(DomainError::Invalid(m)) => {
            page(&state, &req, &user, Flash { ok: None, error: Some(m) }, StatusCode::BAD_REQUEST).await
        }
        Err(e) => Err(e.into()),
    }
}
