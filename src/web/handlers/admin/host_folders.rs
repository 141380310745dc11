//! Host folders: the server folders allowed per workspace.

use super::*;

async fn host_page(
    state: &AppState,
    req: &HttpRequest,
    admin: &AdminUser,
    flash: Flash,
    status: StatusCode,
) -> Result<HttpResponse, WebError> {
    let (rows, workspaces) = state.agent.host_roots_console(&admin.1).await?;
    let mut ctx = base_context(admin, "host", &flash);
    ctx.insert("rows", &rows);
    ctx.insert("workspaces", &workspaces);
    console_page(state, req, "host_folders", ctx, status)
}

/// `GET /admin/host-folders`: host folders allowed per workspace.
pub async fn host_folders(
    state: web::Data<AppState>,
    req: HttpRequest,
    admin: AdminUser,
) -> Result<HttpResponse, WebError> {
    host_page(&state, &req, &admin, Flash::default(), StatusCode::OK).await
}

/// The form allowing a host folder.
#[derive(Deserialize)]
pub struct HostFolderForm {
    #[serde(default)]
    workspace_id: String,
    #[serde(default)]
    path: String,
}

/// `POST /admin/host-folders`: allows a host folder for a workspace.
pub async fn allow_host_folder(
    state: web::Data<AppState>,
    req: HttpRequest,
    admin: AdminUser,
    form: web::Form<HostFolderForm>,
) -> Result<HttpResponse, WebError> {
    let who = origin(&req, &state, &admin.0);
    let result = match Uuid::parse_str(form.workspace_id.trim()) {
        Ok(ws) => state.agent.allow_host_root(&admin.1, &who, &state.config.data_dir, ws, &form.path).await,
        Err(_) => Err(DomainError::Invalid("Choose a workspace.".into())),
    };
    let said = "Folder allowed: that workspace's sessions may expose it now.";
    let (flash, status) = outcome(result, |()| said.into())?;
    host_page(&state, &req, &admin, flash, status).await
}

/// `POST /admin/host-folders/{id}/delete`: withdraws a host folder.
pub async fn remove_host_folder(
    state: web::Data<AppState>,
    req: HttpRequest,
    admin: AdminUser,
    id: web::Path<Uuid>,
) -> Result<HttpResponse, WebError> {
    let who = origin(&req, &state, &admin.0);
    state.agent.remove_host_root(&admin.1, &who, id.into_inner()).await?;
    host_page(
        &state,
        &req,
        &admin,
        Flash::ok("Folder withdrawn: the agent cannot use it any more."),
        StatusCode::OK,
    )
    .await
}
