//! The people page: search, status, role and deletion.

use super::*;

/// Query of the users page.
#[derive(Deserialize, Default)]
#[serde(default)]
pub struct UsersQuery {
    q: String,
    page: u64,
}

#[derive(Serialize)]
struct UserView {
    id: Uuid,
    email: String,
    /// What the confirmations call them: the email, else the name.
    label: String,
    unverified_email: Option<String>,
    display_name: String,
    role: &'static str,
    status: &'static str,
    oidc: bool,
    created: String,
    last_login: String,
    is_self: bool,
}

async fn users_page(
    state: &AppState,
    req: &HttpRequest,
    admin: &AdminUser,
    query: &UsersQuery,
    flash: Flash,
    status: StatusCode,
) -> Result<HttpResponse, WebError> {
    let (rows, total) = state.admin.list_users(&admin.1, &query.q, query.page).await?;
    let users: Vec<UserView> = rows
        .into_iter()
        .map(|r| UserView {
            id: r.user.id,
            is_self: r.user.id == admin.0.user.id,
            label: if r.user.email.is_empty() { r.user.display_name.clone() } else { r.user.email.clone() },
            email: r.user.email,
            unverified_email: r.unverified_email,
            display_name: r.user.display_name,
            role: r.user.role.as_str(),
            status: r.user.status.as_str(),
            oidc: r.oidc,
            created: r.created_at.format("%Y-%m-%d").to_string(),
            last_login: r
                .last_login_at
                .map_or_else(|| "never".into(), |t| t.format("%Y-%m-%d %H:%M").to_string()),
        })
        .collect();
    let mut ctx = base_context(admin, "users", &flash);
    ctx.insert("users", &users);
    ctx.insert("total", &total);
    ctx.insert("q", &query.q);
    ctx.insert("page", &query.page);
    let page_url = |page: u64| link("/admin/users", &[("q", query.q.as_str()), ("page", &page.to_string())]);
    ctx.insert("prev_url", &(query.page > 0).then(|| page_url(query.page - 1)));
    ctx.insert("next_url", &((query.page + 1) * admin::USERS_PAGE < total).then(|| page_url(query.page + 1)));
    console_page(state, req, "users", ctx, status)
}

/// `GET /admin/users`.
pub async fn users(
    state: web::Data<AppState>,
    req: HttpRequest,
    admin: AdminUser,
    query: web::Query<UsersQuery>,
) -> Result<HttpResponse, WebError> {
    users_page(&state, &req, &admin, &query, Flash::default(), StatusCode::OK).await
}

async fn after_user_change(
    state: &AppState,
    req: &HttpRequest,
    admin: &AdminUser,
    result: DomainResult<String>,
) -> Result<HttpResponse, WebError> {
    let (flash, status) = outcome(result, |m| m)?;
    users_page(state, req, admin, &UsersQuery::default(), flash, status).await
}

/// The enable/disable form.
#[derive(Deserialize)]
pub struct StatusForm {
    active: String,
}

/// `POST /admin/users/{id}/status`.
pub async fn set_status(
    state: web::Data<AppState>,
    req: HttpRequest,
    admin: AdminUser,
    id: web::Path<Uuid>,
    form: web::Form<StatusForm>,
) -> Result<HttpResponse, WebError> {
    let active = match form.active.as_str() {
        "1" | "true" => true,
        "0" | "false" => false,
        _ => return Err(WebError::BadRequest("Say whether the account is active.".into())),
    };
    let who = origin(&req, &state, &admin.0);
    let result = state
        .admin
        .set_status(&admin.1, &who, id.into_inner(), active)
        .await
        .map(|u| format!("{} is now {}.", u.email, u.status.as_str()));
    after_user_change(&state, &req, &admin, result).await
}

/// The role form: only the role; any other field is ignored.
#[derive(Deserialize)]
pub struct RoleForm {
    role: String,
}

/// `POST /admin/users/{id}/role`.
pub async fn set_role(
    state: web::Data<AppState>,
    req: HttpRequest,
    admin: AdminUser,
    id: web::Path<Uuid>,
    form: web::Form<RoleForm>,
) -> Result<HttpResponse, WebError> {
    let role = Role::parse(&form.role).ok_or_else(|| WebError::BadRequest("Pick admin or member.".into()))?;
    let who = origin(&req, &state, &admin.0);
    let result = state
        .admin
        .set_role(&admin.1, &who, id.into_inner(), role)
        .await
        .map(|u| format!("{} is now {}.", u.email, u.role.as_str()));
    after_user_change(&state, &req, &admin, result).await
}

/// `GET /admin/users/{id}/delete`: what deleting the user would remove.
pub async fn confirm_delete_user(
    state: web::Data<AppState>,
    req: HttpRequest,
    admin: AdminUser,
    id: web::Path<Uuid>,
) -> Result<HttpResponse, WebError> {
    let id = id.into_inner();
    let summary = state.admin.deletion_summary(&admin.1, id).await?;
    let mut ctx = base_context(&admin, "users", &Flash::default());
    ctx.insert("summary", &summary);
    ctx.insert("target_id", &id);
    ctx.insert("is_self", &(id == admin.0.user.id));
    render::page(&state, &req, "pages/admin_user_delete.html", "partials/_admin_user_delete.html", ctx)
}

/// `POST /admin/users/{id}/delete`: deletes the user and their data, after stopping their
/// running answers.
pub async fn delete_user(
    state: web::Data<AppState>,
    req: HttpRequest,
    admin: AdminUser,
    id: web::Path<Uuid>,
) -> Result<HttpResponse, WebError> {
    let id = id.into_inner();
    let who = origin(&req, &state, &admin.0);
    let result = state.deletions.user(&admin.1, &who, id).await.map(|s| {
        format!("{} was deleted with {} sessions and {} messages.", s.email, s.sessions, s.messages)
    });
    after_user_change(&state, &req, &admin, result).await
}
