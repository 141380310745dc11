//! Settings → Export and import: downloading archives (everything, a workspace, a session, or a
//! member's data for an admin), receiving an import and showing its progress.

use actix_web::http::{StatusCode, header};
use actix_web::{HttpRequest, HttpResponse, web};
use futures_util::StreamExt;
use serde::Deserialize;
use tera::Context;
use tokio::io::AsyncWriteExt;
use uuid::Uuid;

use crate::domain::DomainError;
use crate::domain::transfer::{ExportFile, ExportWhat, ImportJob};
use crate::state::AppState;
use crate::web::WebError;
use crate::web::client::origin;
use crate::web::extractors::{AdminUser, CurrentUser};
use crate::web::form::Flash;
use crate::web::render::settings_tab;
use crate::web::render::{self, render_to_string};

/// `GET /settings/transfer`.
pub async fn show(
    state: web::Data<AppState>,
    req: HttpRequest,
    user: CurrentUser,
) -> Result<HttpResponse, WebError> {
    let page = state.pages.transfer(&user.0.actor).await?;
    let mut ctx = crate::web::render::signed_in(&user);
    ctx.insert("workspaces", &page.workspaces);
    ctx.insert("jobs", &page.imports);
    ctx.insert("max_import_mb", &(page.max_upload / (1024 * 1024)));
    settings_tab(&state, &req, ctx, "transfer", &Flash::default(), StatusCode::OK)
}

/// The archive as a download; the scratch file is already unlinked, so it is gone once sent.
fn download(export: ExportFile) -> HttpResponse {
    let file = tokio::fs::File::from_std(export.file);
    let body = futures_util::stream::unfold(file, |mut file| async move {
        use tokio::io::AsyncReadExt;
        let mut buf = vec![0u8; 64 * 1024];
        match file.read(&mut buf).await {
            Ok(0) => None,
            Ok(n) => {
                buf.truncate(n);
                Some((Ok::<_, std::io::Error>(bytes::Bytes::from(buf)), file))
            }
            Err(e) => Some((Err(e), file)),
        }
    });
    HttpResponse::Ok()
        .content_type("application/gzip")
        .insert_header((
            header::CONTENT_DISPOSITION,
            format!("attachment; filename=\"{}\"", export.file_name),
        ))
        .insert_header((header::CONTENT_LENGTH, export.size))
        .insert_header((header::CACHE_CONTROL, "no-store"))
        .streaming(body)
}

/// `GET /settings/export`: everything the member owns.
pub async fn export_everything(
    state: web::Data<AppState>,
    user: CurrentUser,
) -> Result<HttpResponse, WebError> {
    Ok(download(state.transfers.export(&user.0.actor, ExportWhat::Everything).await?))
}

/// `GET /w/{workspace_id}/export`: one workspace of the member's.
pub async fn export_workspace(
    state: web::Data<AppState>,
    user: CurrentUser,
    id: web::Path<Uuid>,
) -> Result<HttpResponse, WebError> {
    Ok(download(state.transfers.export(&user.0.actor, ExportWhat::Workspace(id.into_inner())).await?))
}

/// `GET /s/{session_id}/export`: one session the member may read.
pub async fn export_session(
    state: web::Data<AppState>,
    user: CurrentUser,
    id: web::Path<Uuid>,
) -> Result<HttpResponse, WebError> {
    Ok(download(state.transfers.export(&user.0.actor, ExportWhat::Session(id.into_inner())).await?))
}

/// `POST /admin/users/{id}/export`: a member's data for a data-protection request (audited).
pub async fn export_member(
    state: web::Data<AppState>,
    req: HttpRequest,
    admin: AdminUser,
    id: web::Path<Uuid>,
) -> Result<HttpResponse, WebError> {
    let who = origin(&req, &state, &admin.0);
    Ok(download(state.transfers.export_member(&admin.1, &who, id.into_inner()).await?))
}

/// What an import's upload names in its query.
#[derive(Deserialize)]
pub struct ImportQuery {
    #[serde(default)]
    name: String,
    /// A workspace of the member's, or blank for new ones.
    #[serde(default)]
    workspace: String,
}

fn job_card(state: &AppState, job: &ImportJob, status: StatusCode) -> Result<HttpResponse, WebError> {
    let mut ctx = Context::new();
    ctx.insert("job", job);
    Ok(render::html_response(status, render_to_string(state, "partials/_import_job.html", &ctx)?))
}

/// `POST /settings/imports?name=…&workspace=…`: the body is the file. Answers with the job's
/// card, which follows its progress.
pub async fn import(
    state: web::Data<AppState>,
    req: HttpRequest,
    user: CurrentUser,
    query: web::Query<ImportQuery>,
    mut body: web::Payload,
) -> Result<HttpResponse, WebError> {
    let actor = &user.0.actor;
    let workspace = match query.workspace.trim() {
        "" => None,
        raw => Some(
            Uuid::parse_str(raw)
                .map_err(|_| WebError::BadRequest("Choose a workspace from the list.".into()))?,
        ),
    };
    let declared = crate::web::client::declared_length(&req);
    let path = match state.transfers.prepare_import(actor, declared) {
        Ok(path) => path,
        Err(DomainError::Invalid(m)) => return Err(WebError::PayloadTooLarge(m)),
        Err(e) => return Err(e.into()),
    };
    // Received to a scratch file, counted as it comes: a body past the limit stops at it.
    let max = state.transfers.max_upload();
    let received = async {
        let mut file = tokio::fs::File::create(&path).await.map_err(|e| WebError::Internal(e.to_string()))?;
        let mut size: u64 = 0;
        while let Some(chunk) = body.next().await {
            let chunk = chunk.map_err(|_| WebError::BadRequest("The upload was interrupted.".into()))?;
            size = size.saturating_add(chunk.len() as u64);
            if size > max {
                return Err(WebError::PayloadTooLarge(crate::domain::transfer::too_large(max).to_string()));
            }
            file.write_all(&chunk).await.map_err(|e| WebError::Internal(e.to_string()))?;
        }
        file.flush().await.map_err(|e| WebError::Internal(e.to_string()))?;
        if size == 0 {
            return Err(WebError::BadRequest("The file is empty.".into()));
        }
        Ok(())
    }
    .await;
    if let Err(e) = received {
        let _ = tokio::fs::remove_file(&path).await;
        return Err(e);
    }
    let who = origin(&req, &state, &user.0);
    let job = state.transfers.start_import(actor, &who, path, &query.name, workspace).await?;
    job_card(&state, &job, StatusCode::ACCEPTED)
}

/// `GET /settings/imports/{id}`: one of the member's imports, as its card.
pub async fn import_status(
    state: web::Data<AppState>,
    user: CurrentUser,
    id: web::Path<Uuid>,
) -> Result<HttpResponse, WebError> {
    let job = state.transfers.my_import(&user.0.actor, id.into_inner())?;
    job_card(&state, &job, StatusCode::OK)
}
