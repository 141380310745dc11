//! The directory page: the SCIM endpoint's address and the tokens an identity provider uses.

use super::*;

async fn directory_page(
    state: &AppState,
    req: &HttpRequest,
    admin: &AdminUser,
    (flash, status): (Flash, StatusCode),
    created: Option<String>,
) -> Result<HttpResponse, WebError> {
    let mut ctx = base_context(admin, "directory", &flash);
    ctx.insert("tokens", &state.scim.tokens(&admin.1).await?);
    ctx.insert("created", &created);
    ctx.insert("base_url", &format!("{}/scim/v2", state.config.public_url()));
    console_page(state, req, "directory", ctx, status)
}

/// `GET /admin/directory`.
pub async fn directory(
    state: web::Data<AppState>,
    req: HttpRequest,
    admin: AdminUser,
) -> Result<HttpResponse, WebError> {
    directory_page(&state, &req, &admin, (Flash::default(), StatusCode::OK), None).await
}

/// The new-token form.
#[derive(Deserialize)]
pub struct ScimTokenForm {
    #[serde(default)]
    name: String,
}

/// `POST /admin/directory/tokens`: a SCIM token, shown once.
pub async fn create_scim_token(
    state: web::Data<AppState>,
    req: HttpRequest,
    admin: AdminUser,
    form: web::Form<ScimTokenForm>,
) -> Result<HttpResponse, WebError> {
    let who = origin(&req, &state, &admin.0);
    match state.scim.issue_token(&admin.1, &who, &form.name).await {
        Ok(made) => {
            let token = made.token.expose().to_string();
            directory_page(
                &state,
                &req,
                &admin,
                (Flash::ok("Token made: copy it now, it is not shown again."), StatusCode::OK),
                Some(token),
            )
            .await
        }
        Err(e) => directory_page(&state, &req, &admin, refusal(e)?, None).await,
    }
}

/// `POST /admin/directory/tokens/{id}/revoke`.
pub async fn revoke_scim_token(
    state: web::Data<AppState>,
    req: HttpRequest,
    admin: AdminUser,
    id: web::Path<String>,
) -> Result<HttpResponse, WebError> {
    let who = origin(&req, &state, &admin.0);
    state.scim.revoke_token(&admin.1, &who, render::parse_id(&id)?).await?;
    directory_page(
        &state,
        &req,
        &admin,
        (Flash::ok("Revoked: the identity provider can no longer provision with it."), StatusCode::OK),
        None,
    )
    .await
}
