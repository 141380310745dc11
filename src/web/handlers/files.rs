//! Uploads (raw bodies, one file each) and serving blobs to the people allowed to see them.

use actix_web::http::StatusCode;
use actix_web::{HttpResponse, web};
use serde::Deserialize;
use tera::Context;
use uuid::Uuid;

use crate::domain::{DomainError, files};
use crate::state::AppState;
use crate::web::extractors::CurrentUser;
use crate::web::render::render_to_string;
use crate::web::{WebError, render};

/// The upload's query: the file's name (metadata only).
#[derive(Deserialize)]
pub struct UploadQuery {
    #[serde(default)]
    name: String,
}

fn refusal(state: &AppState, status: StatusCode, message: &str) -> Result<HttpResponse, WebError> {
    let mut ctx = Context::new();
    ctx.insert("message", message);
    let html = render_to_string(state, "partials/_flash_error.html", &ctx)?;
    Ok(render::html_response(status, html))
}

/// `POST /uploads?name=…`: the body is the file. Answers with its chip for the composer.
pub async fn upload(
    state: web::Data<AppState>,
    req: actix_web::HttpRequest,
    user: CurrentUser,
    query: web::Query<UploadQuery>,
    body: web::Payload,
) -> Result<HttpResponse, WebError> {
    // One member may send only so many files at once (SECURITY.md 54).
    let max = state.config.limits.uploads_per_member;
    let Some(_slot) = state.uploads.try_take(user.0.actor.user_id(), max) else {
        let message = format!("You are sending {max} files already: wait for one to finish.");
        return refusal(&state, StatusCode::TOO_MANY_REQUESTS, &message);
    };
    // The body goes to disk as it comes in; its declared length is checked before a byte of it
    // is read, and a running count as it is read.
    let incoming =
        files::IncomingFile { name: &query.name, declared: crate::web::client::declared_length(&req), body };
    match state.files.receive(&user.0.actor, incoming).await {
        Ok(file) => {
            let mut ctx = Context::new();
            ctx.insert("f", &file);
            let html = render_to_string(&state, "partials/_upload_chip.html", &ctx)?;
            Ok(render::html_response(StatusCode::OK, html))
        }
        Err(DomainError::Invalid(m)) => refusal(&state, StatusCode::BAD_REQUEST, &m),
        Err(DomainError::TooLarge(m)) => refusal(&state, StatusCode::PAYLOAD_TOO_LARGE, &m),
        Err(e) => Err(e.into()),
    }
}

/// `POST /uploads/{id}/delete`: removes a file from the composer before sending.
pub async fn discard(
    state: web::Data<AppState>,
    user: CurrentUser,
    id: web::Path<Uuid>,
) -> Result<HttpResponse, WebError> {
    state.files.discard_upload(&user.0.actor, id.into_inner()).await?;
    Ok(render::html_response(StatusCode::OK, String::new()))
}

/// `GET /blobs/{hash}`: a file the user holds a reference to. Only verified raster images are
/// shown inline; everything else downloads, sandboxed and never sniffed.
pub async fn serve(
    state: web::Data<AppState>,
    user: CurrentUser,
    hash: web::Path<String>,
) -> Result<HttpResponse, WebError> {
    let served = match state.files.serve(&user.0.actor, &hash).await {
        Ok(s) => s,
        Err(DomainError::Invalid(m)) => return Err(WebError::BadRequest(m)),
        Err(e) => return Err(e.into()),
    };
    Ok(render::served_file(served))
}
