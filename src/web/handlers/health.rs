//! Liveness and readiness probes.

use actix_web::{HttpResponse, web};

use crate::state::AppState;
use crate::web::WebError;
use crate::web::extractors::MetricsScraper;

/// `GET /healthz`: the process is up.
pub async fn healthz() -> HttpResponse {
    HttpResponse::Ok()
        .content_type("text/plain; charset=utf-8")
        .insert_header(("Cache-Control", "no-store"))
        .body("ok")
}

/// `GET /readyz`: the database answers and no migration is pending.
pub async fn readyz(state: web::Data<AppState>) -> Result<HttpResponse, WebError> {
    match state.operations.ready().await {
        Ok(()) => Ok(HttpResponse::Ok()
            .content_type("text/plain; charset=utf-8")
            .insert_header(("Cache-Control", "no-store"))
            .body("ready")),
        Err(why) => {
            tracing::warn!(error = %why, "not ready");
            Err(WebError::Unavailable("not ready".into()))
        }
    }
}

/// `GET /metrics`: the Prometheus text format, for a scraper (see [`MetricsScraper`]).
pub async fn metrics(state: web::Data<AppState>, _scraper: MetricsScraper) -> Result<HttpResponse, WebError> {
    let handle = crate::metrics::install()
        .ok_or_else(|| WebError::Unavailable("Metrics are not available.".into()))?;
    let present = state.operations.present().await?;
    Ok(HttpResponse::Ok()
        .content_type("text/plain; version=0.0.4; charset=utf-8")
        .insert_header(("Cache-Control", "no-store"))
        .body(crate::metrics::render(&handle, &present)))
}
