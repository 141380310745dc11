//! Settings → Prompts: the member's library of system prompt templates, sharing one with a
//! group, and the templates colleagues shared with theirs.

use actix_web::http::StatusCode;
use actix_web::{HttpRequest, HttpResponse, web};
use serde::Deserialize;
use uuid::Uuid;

use crate::domain::sessions;
use crate::state::AppState;
use crate::web::WebError;
use crate::web::client::origin;
use crate::web::extractors::CurrentUser;
use crate::web::form::{Flash, outcome};
use crate::web::render::{settings_tab, signed_in};

async fn prompts_page(
    state: &AppState,
    req: &HttpRequest,
    user: &CurrentUser,
    flash: Flash,
    status: StatusCode,
) -> Result<HttpResponse, WebError> {
    let page = state.pages.prompts(&user.0.actor).await?;
    let mut ctx = signed_in(user);
    ctx.insert("templates", &page.templates);
    ctx.insert("shared_templates", &page.shared);
    ctx.insert("my_groups", &page.groups);
    ctx.insert("prompt_variables", sessions::prompt::VARIABLES);
    settings_tab(state, req, ctx, "prompts", &flash, status)
}

/// `GET /settings/prompts`.
pub async fn show(
    state: web::Data<AppState>,
    req: HttpRequest,
    user: CurrentUser,
) -> Result<HttpResponse, WebError> {
    prompts_page(&state, &req, &user, Flash::default(), StatusCode::OK).await
}

/// The new-template form.
#[derive(Deserialize)]
pub struct TemplateForm {
    name: String,
    body: String,
}

/// `POST /settings/prompts`: saves a new template.
pub async fn create(
    state: web::Data<AppState>,
    req: HttpRequest,
    user: CurrentUser,
    form: web::Form<TemplateForm>,
) -> Result<HttpResponse, WebError> {
    let who = origin(&req, &state, &user.0);
    let created = state.sessions.create_template(&user.0.actor, &who, &form.name, &form.body).await;
    let (flash, status) = outcome(created, |t| format!("Template {} saved.", t.name))?;
    prompts_page(&state, &req, &user, flash, status).await
}

/// `POST /settings/prompts/{id}/delete`.
pub async fn delete(
    state: web::Data<AppState>,
    req: HttpRequest,
    user: CurrentUser,
    id: web::Path<Uuid>,
) -> Result<HttpResponse, WebError> {
    let who = origin(&req, &state, &user.0);
    state.sessions.delete_template(&user.0.actor, &who, id.into_inner()).await?;
    prompts_page(&state, &req, &user, Flash::ok("Template deleted."), StatusCode::OK).await
}

/// The share form: a group's id, or blank for nobody.
#[derive(Deserialize)]
pub struct ShareForm {
    group: String,
}

/// `POST /settings/prompts/{id}/share`.
pub async fn share(
    state: web::Data<AppState>,
    req: HttpRequest,
    user: CurrentUser,
    id: web::Path<Uuid>,
    form: web::Form<ShareForm>,
) -> Result<HttpResponse, WebError> {
    let who = origin(&req, &state, &user.0);
    let shared = state.sessions.share_template(&user.0.actor, &who, id.into_inner(), &form.group).await;
    let said = match form.group.trim() {
        "" => "Shared with nobody.",
        _ => "Shared: the group's members can read and copy it.",
    };
    let (flash, status) = outcome(shared, |()| said.into())?;
    prompts_page(&state, &req, &user, flash, status).await
}
