//! Instance MCP servers: add, edit, delete.

use super::*;

async fn mcp_page(
    state: &AppState,
    req: &HttpRequest,
    admin: &AdminUser,
    flash: Flash,
    status: StatusCode,
) -> Result<HttpResponse, WebError> {
    let mut ctx = base_context(admin, "mcp", &flash);
    ctx.insert("servers", &state.mcp.list(&admin.1).await?);
    console_page(state, req, "mcp", ctx, status)
}

/// `GET /admin/mcp`.
pub async fn mcp_show(
    state: web::Data<AppState>,
    req: HttpRequest,
    admin: AdminUser,
) -> Result<HttpResponse, WebError> {
    mcp_page(&state, &req, &admin, Flash::default(), StatusCode::OK).await
}

async fn after_mcp_change<T>(
    state: &AppState,
    req: &HttpRequest,
    admin: &AdminUser,
    result: DomainResult<T>,
    ok: &str,
) -> Result<HttpResponse, WebError> {
    let (flash, status) = outcome(result, |_| ok.into())?;
    mcp_page(state, req, admin, flash, status).await
}

/// `POST /admin/mcp`: adds a server.
pub async fn mcp_create(
    state: web::Data<AppState>,
    req: HttpRequest,
    admin: AdminUser,
    form: web::Form<ServerForm>,
) -> Result<HttpResponse, WebError> {
    let who = origin(&req, &state, &admin.0);
    let result = state.mcp.create(&admin.1, &who, &form).await;
    after_mcp_change(&state, &req, &admin, result, "MCP server added.").await
}

/// `POST /admin/mcp/{id}`: saves a server.
pub async fn mcp_update(
    state: web::Data<AppState>,
    req: HttpRequest,
    admin: AdminUser,
    id: web::Path<Uuid>,
    form: web::Form<ServerForm>,
) -> Result<HttpResponse, WebError> {
    let who = origin(&req, &state, &admin.0);
    let result = state.mcp.update(&admin.1, &who, id.into_inner(), &form).await;
    after_mcp_change(&state, &req, &admin, result, "Saved.").await
}

/// `POST /admin/mcp/{id}/delete`.
pub async fn mcp_delete(
    state: web::Data<AppState>,
    req: HttpRequest,
    admin: AdminUser,
    id: web::Path<Uuid>,
) -> Result<HttpResponse, WebError> {
    let who = origin(&req, &state, &admin.0);
    state.mcp.delete(&admin.1, &who, id.into_inner()).await?;
    mcp_page(&state, &req, &admin, Flash::ok("MCP server deleted."), StatusCode::OK).await
}
