//! The share links page: every link on the instance, and revoking any of them.

use super::*;

async fn links_page(
    state: &AppState,
    req: &HttpRequest,
    admin: &AdminUser,
    flash: Flash,
) -> Result<HttpResponse, WebError> {
    let (all, creators) = state.teams.links.all(&admin.1).await?;
    // Tera looks a map up by string.
    let names: std::collections::HashMap<String, String> =
        creators.into_iter().map(|(id, n)| (id.to_string(), n)).collect();
    let mut ctx = base_context(admin, "links", &flash);
    ctx.insert("links", &crate::web::link_view::rows(&all));
    ctx.insert("creators", &names);
    ctx.insert("public_links", &state.config.sharing.public_links);
    console_page(state, req, "links", ctx, StatusCode::OK)
}

/// `GET /admin/links`.
pub async fn links(
    state: web::Data<AppState>,
    req: HttpRequest,
    admin: AdminUser,
) -> Result<HttpResponse, WebError> {
    links_page(&state, &req, &admin, Flash::default()).await
}

/// `POST /admin/links/{id}/delete`: revokes anyone's link.
pub async fn revoke_link(
    state: web::Data<AppState>,
    req: HttpRequest,
    admin: AdminUser,
    id: web::Path<String>,
) -> Result<HttpResponse, WebError> {
    let who = origin(&req, &state, &admin.0);
    state.teams.links.revoke_any(&admin.1, &who, render::parse_id(&id)?).await?;
    links_page(&state, &req, &admin, Flash::ok("Revoked: the link no longer opens.")).await
}
