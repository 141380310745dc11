//! The groups page: make, rename and delete groups, and manage who is in them.

use super::*;
use crate::domain::teams::groups;

#[derive(Serialize)]
struct GroupRow {
    id: Uuid,
    name: String,
    managed_by_idp: bool,
    members: u64,
}

async fn groups_page(
    state: &AppState,
    req: &HttpRequest,
    admin: &AdminUser,
    flash: Flash,
    status: StatusCode,
) -> Result<HttpResponse, WebError> {
    let rows: Vec<GroupRow> = state
        .teams
        .groups
        .list(&admin.1)
        .await?
        .into_iter()
        .map(|(g, members)| GroupRow { id: g.id, name: g.name, managed_by_idp: g.managed_by_idp, members })
        .collect();
    let mut ctx = base_context(admin, "groups", &flash);
    ctx.insert("groups", &rows);
    console_page(state, req, "groups", ctx, status)
}

async fn group_page(
    state: &AppState,
    req: &HttpRequest,
    admin: &AdminUser,
    id: Uuid,
    flash: Flash,
    status: StatusCode,
) -> Result<HttpResponse, WebError> {
    let (group, members) = state.teams.groups.detail(&admin.1, id).await?;
    let mut ctx = base_context(admin, "groups", &flash);
    ctx.insert("group", &group);
    ctx.insert("members", &members);
    ctx.insert("members_shown", &groups::MEMBERS_SHOWN);
    ctx.insert("approval_modes", &crate::domain::sessions::APPROVAL_MODES);
    ctx.insert("instance_loosest", &state.config.agent.loosest_approval_mode);
    console_page(state, req, "group", ctx, status)
}

/// `GET /admin/groups`.
pub async fn groups(
    state: web::Data<AppState>,
    req: HttpRequest,
    admin: AdminUser,
) -> Result<HttpResponse, WebError> {
    groups_page(&state, &req, &admin, Flash::default(), StatusCode::OK).await
}

/// The name form (making and renaming).
#[derive(Deserialize)]
pub struct GroupNameForm {
    name: String,
}

/// `POST /admin/groups`: makes a group by hand.
pub async fn create_group(
    state: web::Data<AppState>,
    req: HttpRequest,
    admin: AdminUser,
    form: web::Form<GroupNameForm>,
) -> Result<HttpResponse, WebError> {
    let who = origin(&req, &state, &admin.0);
    let (flash, status) = outcome(state.teams.groups.create(&admin.1, &who, &form.name).await, |g| {
        format!("Group {} made.", g.name)
    })?;
    groups_page(&state, &req, &admin, flash, status).await
}

/// `GET /admin/groups/{id}`.
pub async fn group(
    state: web::Data<AppState>,
    req: HttpRequest,
    admin: AdminUser,
    id: web::Path<String>,
) -> Result<HttpResponse, WebError> {
    group_page(&state, &req, &admin, render::parse_id(&id)?, Flash::default(), StatusCode::OK).await
}

/// `POST /admin/groups/{id}/rename`.
pub async fn rename_group(
    state: web::Data<AppState>,
    req: HttpRequest,
    admin: AdminUser,
    id: web::Path<String>,
    form: web::Form<GroupNameForm>,
) -> Result<HttpResponse, WebError> {
    let id = render::parse_id(&id)?;
    let who = origin(&req, &state, &admin.0);
    let (flash, status) = outcome(state.teams.groups.rename(&admin.1, &who, id, &form.name).await, |g| {
        format!("Renamed to {}.", g.name)
    })?;
    group_page(&state, &req, &admin, id, flash, status).await
}

/// The grants form: the role at first sign-in and the least-asking approval mode.
#[derive(Deserialize)]
pub struct GrantsForm {
    default_role: String,
    #[serde(default)]
    loosest_approval_mode: String,
}

/// `POST /admin/groups/{id}/grants`.
pub async fn set_group_grants(
    state: web::Data<AppState>,
    req: HttpRequest,
    admin: AdminUser,
    id: web::Path<String>,
    form: web::Form<GrantsForm>,
) -> Result<HttpResponse, WebError> {
    let id = render::parse_id(&id)?;
    let who = origin(&req, &state, &admin.0);
    let grants = groups::Grants {
        default_role: form.default_role.clone(),
        loosest_approval_mode: form.loosest_approval_mode.clone(),
    };
    let (flash, status) = outcome(state.teams.groups.set_grants(&admin.1, &who, id, &grants).await, |g| {
        format!("What {} grants is saved.", g.name)
    })?;
    group_page(&state, &req, &admin, id, flash, status).await
}

/// `POST /admin/groups/{id}/delete`: back to the list.
pub async fn delete_group(
    state: web::Data<AppState>,
    req: HttpRequest,
    admin: AdminUser,
    id: web::Path<String>,
) -> Result<HttpResponse, WebError> {
    let who = origin(&req, &state, &admin.0);
    let group = state.teams.groups.delete(&admin.1, &who, render::parse_id(&id)?).await?;
    let mut res = groups_page(
        &state,
        &req,
        &admin,
        Flash::ok(format!("Group {} deleted.", group.name)),
        StatusCode::OK,
    )
    .await?;
    if let Ok(v) = HeaderValue::from_str("/admin/groups") {
        res.headers_mut().insert(header::HeaderName::from_static("hx-push-url"), v);
    }
    Ok(res)
}

/// The add-member form.
#[derive(Deserialize)]
pub struct MemberForm {
    email: String,
}

/// `POST /admin/groups/{id}/members`: adds a person by email.
pub async fn add_group_member(
    state: web::Data<AppState>,
    req: HttpRequest,
    admin: AdminUser,
    id: web::Path<String>,
    form: web::Form<MemberForm>,
) -> Result<HttpResponse, WebError> {
    let id = render::parse_id(&id)?;
    let who = origin(&req, &state, &admin.0);
    let (flash, status) =
        outcome(state.teams.groups.add_member(&admin.1, &who, id, &form.email).await, |u| {
            format!("{} is in the group.", u.email)
        })?;
    group_page(&state, &req, &admin, id, flash, status).await
}

/// `POST /admin/groups/{id}/members/{user}/remove`.
pub async fn remove_group_member(
    state: web::Data<AppState>,
    req: HttpRequest,
    admin: AdminUser,
    path: web::Path<(String, String)>,
) -> Result<HttpResponse, WebError> {
    let (id, user) = (render::parse_id(&path.0)?, render::parse_id(&path.1)?);
    let who = origin(&req, &state, &admin.0);
    state.teams.groups.remove_member(&admin.1, &who, id, user).await?;
    group_page(&state, &req, &admin, id, Flash::ok("Taken out of the group."), StatusCode::OK).await
}
