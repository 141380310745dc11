//! A member's "Models" view of one of their own keys: each model with every fact in force and
//! where it came from, and their override of one model.

use actix_web::http::StatusCode;
use actix_web::{HttpRequest, HttpResponse, web};
use uuid::Uuid;

use crate::domain::providers::overrides::OverrideForm;
use crate::state::AppState;
use crate::web::client::origin;
use crate::web::extractors::CurrentUser;
use crate::web::form::{Flash, outcome};
use crate::web::{WebError, render};

async fn page(
    state: &AppState,
    req: &HttpRequest,
    user: &CurrentUser,
    id: Uuid,
    flash: Flash,
    status: StatusCode,
) -> Result<HttpResponse, WebError> {
    let view = state.keys.view(&user.0.actor, id).await?;
    let mut ctx = crate::web::render::signed_in(user);
    ctx.insert("view", &view);
    ctx.insert("flash", &flash);
    ctx.insert("tab", "keys");
    render::section(
        state,
        req,
        "pages/settings_key_models.html",
        "partials/_settings_key_models.html",
        ctx,
        status,
        "#settings-key-models",
    )
}

/// `GET /settings/keys/{id}/models`.
pub async fn show(
    state: web::Data<AppState>,
    req: HttpRequest,
    user: CurrentUser,
    id: web::Path<Uuid>,
) -> Result<HttpResponse, WebError> {
    page(&state, &req, &user, id.into_inner(), Flash::default(), StatusCode::OK).await
}

/// `POST /settings/keys/{id}/models`: the member's word on what one model of the key can do.
pub async fn set(
    state: web::Data<AppState>,
    req: HttpRequest,
    user: CurrentUser,
    id: web::Path<Uuid>,
    form: web::Form<OverrideForm>,
) -> Result<HttpResponse, WebError> {
    let id = id.into_inner();
    let who = origin(&req, &state, &user.0);
    let (flash, status) = outcome(state.keys.set_override(&user.0.actor, &who, id, &form).await, |model| {
        format!("Saved what {model} can do.")
    })?;
    page(&state, &req, &user, id, flash, status).await
}
