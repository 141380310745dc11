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
            let elapsed = started.elapsed();
            tracing::info!(status = res.status().as_u16(), ms = elapsed.as_millis() as u64, "served");
            // Only with metrics on: the route pattern is a fresh string per request.
            if crate::metrics::enabled() {
                let route = res.request().match_pattern().unwrap_or_else(|| "unmatched".to_string());
                let method = res.request().method().as_str();
                crate::metrics::http_request(&route, method, res.status().as_u16(), elapsed);
            }
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

/// What a person is told when a form or link carries a NUL character.
const NUL_REFUSED: &str = "Text may not contain NUL characters.";

/// Refuses NUL characters in query strings and form bodies before any handler sees them: no
/// text Arbor keeps may hold one (PostgreSQL refuses it in text columns, so it would otherwise
/// fail as a storage error half-way through). Form bodies are read here, up to the body limit,
/// and handed on unchanged; other bodies (uploads, JSON) are left to their readers.
pub async fn refuse_nul(
    mut req: ServiceRequest,
    next: Next<impl MessageBody>,
) -> Result<ServiceResponse<impl MessageBody>, Error> {
    use futures_util::StreamExt as _;
    if contains_nul(req.query_string().as_bytes()) {
        return Err(super::WebError::BadRequest(NUL_REFUSED.into()).into());
    }
    let is_form =
        req.headers().get(actix_web::http::header::CONTENT_TYPE).and_then(|v| v.to_str().ok()).is_some_and(
            |v| v.trim_start().to_ascii_lowercase().starts_with("application/x-www-form-urlencoded"),
        );
    if is_form {
        let limit = req
            .app_data::<actix_web::web::Data<crate::state::AppState>>()
            .map_or(1024 * 1024, |s| s.config.server.max_body_bytes);
        let mut payload = req.take_payload();
        let mut body = bytes::BytesMut::new();
        while let Some(chunk) = payload.next().await {
            let chunk = chunk?;
            if body.len() + chunk.len() > limit {
                return Err(actix_web::error::ErrorPayloadTooLarge("That request is too large."));
            }
            body.extend_from_slice(&chunk);
        }
        if contains_nul(&body) {
            return Err(super::WebError::BadRequest(NUL_REFUSED.into()).into());
        }
        req.set_payload(actix_web::dev::Payload::from(body.freeze()));
    }
    next.call(req).await
}

/// A raw NUL byte, or one percent-encoded (`%00`; a typed `%` arrives as `%25`).
fn contains_nul(raw: &[u8]) -> bool {
    raw.contains(&0) || raw.windows(3).any(|w| w[0] == b'%' && w[1] == b'0' && w[2] == b'0')
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn nul_is_found_raw_and_percent_encoded_only() {
        assert!(contains_nul(b"a=b%00c"));
        assert!(contains_nul(b"a=b\0"));
        assert!(!contains_nul(b"a=100%2500&b=%25%30%30"), "a typed % arrives as %25");
        assert!(!contains_nul(b"a=%0A%20"));
    }
}
