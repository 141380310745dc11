//! Middleware: request ids with a tracing span per request, and security headers.

use std::time::Instant;

use actix_web::body::MessageBody;
use actix_web::dev::{ServiceRequest, ServiceResponse};
use actix_web::http::header::{HeaderName, HeaderValue};
use actix_web::middleware::{DefaultHeaders, Next};
use actix_web::{Error, HttpMessage};
use tracing::Instrument;
use uuid::Uuid;

/// The id of the current request, also sent back as `X-Request-Id`.
#[derive(Debug, Clone, Copy)]
pub struct RequestId(pub Uuid);

/// The Content-Security-Policy on every response: no inline script or style, nothing external.
pub const CSP: &str = "default-src 'self'; script-src 'self'; style-src 'self'; img-src 'self' data:; \
font-src 'self'; connect-src 'self'; object-src 'none'; base-uri 'none'; frame-ancestors 'none'; \
form-action 'self'";

/// Security headers added to every response that does not set its own.
pub fn security_headers(https: bool) -> DefaultHeaders {
    let mut h = DefaultHeaders::new()
        .add(("Content-Security-Policy", CSP))
        .add(("X-Content-Type-Options", "nosniff"))
        .add(("X-Frame-Options", "DENY"))
        .add(("Referrer-Policy", "no-referrer"))
        .add(("Cross-Origin-Opener-Policy", "same-origin"))
        .add(("Permissions-Policy", "camera=(), microphone=(), geolocation=(), payment=()"));
    if https {
        h = h.add(("Strict-Transport-Security", "max-age=31536000; includeSubDomains"));
    }
    h
}

/// Paths whose last segment is a secret (a one-time setup or invitation token).
const SECRET_PATHS: &[&str] = &["/setup/", "/invite/"];

/// The path as it may be logged: a token in it is replaced by `…`.
pub fn loggable_path(path: &str) -> std::borrow::Cow<'_, str> {
    for prefix in SECRET_PATHS {
        if path.starts_with(prefix) && path.len() > prefix.len() {
            return format!("{prefix}…").into();
        }
    }
    path.into()
}

/// Gives each request an id and a span, and logs one line when it completes. The query string is
/// never logged: it may carry tokens.
pub async fn request_context(
    req: ServiceRequest,
    next: Next<impl MessageBody>,
) -> Result<ServiceResponse<impl MessageBody>, Error> {
    let id = Uuid::now_v7();
    req.extensions_mut().insert(RequestId(id));
    let path = loggable_path(req.path());
    let span = tracing::info_span!("request", id = %id, method = %req.method(), path = %path);
    let started = Instant::now();
    let result = next.call(req).instrument(span.clone()).await;
    let _entered = span.enter();
    match result {
        Ok(mut res) => {
            tracing::info!(
                status = res.status().as_u16(),
                ms = started.elapsed().as_millis() as u64,
                "served"
            );
            if let Ok(v) = HeaderValue::from_str(&id.to_string()) {
                res.headers_mut().insert(HeaderName::from_static("x-request-id"), v);
            }
            Ok(res)
        }
        Err(e) => {
            tracing::warn!(error = %e, "request failed before a response");
            Err(e)
        }
    }
}
