//! Sharing a workspace: with people or groups, as viewer, editor or owner; changing and revoking.
//! Every answer is the sharing section of the workspace page, with what happened.

use actix_web::http::StatusCode;
use actix_web::{HttpRequest, HttpResponse, web};
use serde::Deserialize;
use uuid::Uuid;

use crate::domain::DomainError;
use crate::domain::teams::shares::{self, Target};
use crate::state::AppState;
use crate::web::client::origin;
use crate::web::extractors::CurrentUser;
use crate::web::form::{self, Flash};
use crate::web::render::{parse_id, render_to_string, signed_in};
use crate::web::{WebError, render};

/// The sharing section of a workspace's page, with a line saying what happened.
async fn shares_section(
    state: &AppState,
    user: &CurrentUser,
    workspace_id: Uuid,
    flash: Flash,
) -> Result<HttpResponse, WebError> {
    let mut ctx = signed_in(user);
    ctx.insert("workspace_id", &workspace_id);
    ctx.insert("shares", &state.teams.shares.list(&user.0.actor, workspace_id).await?);
    ctx.insert("share_flash", &flash);
    let html = render_to_string(state, "partials/_workspace_shares.html", &ctx)?;
    Ok(render::html_response(StatusCode::OK, html))
}

/// What happened, or the refusal in the form's error line.
async fn answer(
    state: &AppState,
    user: &CurrentUser,
    workspace_id: Uuid,
    result: Result<String, DomainError>,
) -> Result<HttpResponse, WebError> {
    match result {
        Ok(done) => shares_section(state, user, workspace_id, Flash::ok(done)).await,
        Err(DomainError::Invalid(m)) => form::refused(state, StatusCode::BAD_REQUEST, &m, "#share-error"),
        Err(e) => Err(e.into()),
    }
}

/// The share form: a person's email or a group's name, and the role.
#[derive(Deserialize)]
pub struct ShareForm {
    #[serde(default)]
    kind: String,
    #[serde(default)]
    who: String,
    #[serde(default)]
    role: String,
}

/// `POST /w/{workspace_id}/shares`: shares the workspace (or changes the role of a share).
pub async fn create(
    state: web::Data<AppState>,
    req: HttpRequest,
    user: CurrentUser,
    path: web::Path<String>,
    form: web::Form<ShareForm>,
) -> Result<HttpResponse, WebError> {
    let workspace_id = parse_id(&path)?;
    let target = match form.kind.as_str() {
        "person" => Target::Person(form.who.clone()),
        "group" => Target::Group(form.who.clone()),
        _ => {
            return form::refused(
                &state,
                StatusCode::BAD_REQUEST,
                "Share with a person or a group.",
                "#share-error",
            );
        }
    };
    let who = origin(&req, &state, &user.0);
    let result = match shares::parse_role(&form.role) {
        Ok(role) => state.teams.shares.share(&user.0.actor, &who, workspace_id, &target, role).await,
        Err(e) => Err(e),
    };
    let result = result.map(|s| format!("Shared as {}.", s.role.as_str()));
    answer(&state, &user, workspace_id, result).await
}

/// The role form of one share.
#[derive(Deserialize)]
pub struct RoleForm {
    #[serde(default)]
    role: String,
}

/// `POST /w/{workspace_id}/shares/{share_id}`: changes a share's role.
pub async fn change(
    state: web::Data<AppState>,
    req: HttpRequest,
    user: CurrentUser,
    path: web::Path<(String, String)>,
    form: web::Form<RoleForm>,
) -> Result<HttpResponse, WebError> {
    let (workspace_id, share_id) = (parse_id(&path.0)?, parse_id(&path.1)?);
    let who = origin(&req, &state, &user.0);
    let result = match shares::parse_role(&form.role) {
        Ok(role) => state.teams.shares.change(&user.0.actor, &who, workspace_id, share_id, role).await,
        Err(e) => Err(e),
    };
    let result = result.map(|s| format!("Now {}.", s.role.as_str()));
    answer(&state, &user, workspace_id, result).await
}

/// `POST /w/{workspace_id}/shares/{share_id}/delete`: revokes a share; the people who lose access
/// see it on their open pages at once.
pub async fn revoke(
    state: web::Data<AppState>,
    req: HttpRequest,
    user: CurrentUser,
    path: web::Path<(String, String)>,
) -> Result<HttpResponse, WebError> {
    let (workspace_id, share_id) = (parse_id(&path.0)?, parse_id(&path.1)?);
    let who = origin(&req, &state, &user.0);
    let result = state
        .teams
        .shares
        .revoke(&user.0.actor, &who, workspace_id, share_id)
        .await
        .map(|_| "No longer shared.".to_string());
    answer(&state, &user, workspace_id, result).await
}
