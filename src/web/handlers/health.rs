//! Liveness and readiness probes.

use actix_web::{HttpResponse, web};

use crate::state::AppState;
use crate::web::WebError;

/// `GET /healthz`: the process is up.
pub async fn healthz() -> HttpResponse {
    HttpResponse::Ok()
        .content_type("text/plain; charset=utf-8")
        .insert_header(("Cache-Control", "no-store"))
        .body("ok")
}

/// `GET /readyz`: the database answers and no migration is pending.
pub async fn readyz(state: web::Data<AppState>) -> Result<HttpResponse, WebError> {
    match crate::storage::readiness(&state.db).await {
        Ok(()) => Ok(HttpResponse::Ok()
            .content_type("text/plain; charset=utf-8")
            .insert_header(("Cache-Control", "no-store"))
            .body("ready")),
        Err(e) => {
            tracing::warn!(error = %e, "not ready");
            Err(WebError::Unavailable("not ready".into()))
        }
    }
}
