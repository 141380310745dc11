//! CSRF protection for every state-changing request: the request must come from our own
//! origin (`Sec-Fetch-Site`, else `Origin`), and a signed-in session must also present its
//! token in `X-CSRF-Token` (htmx adds it from the page's meta tag).

use actix_web::body::MessageBody;
use actix_web::dev::{ServiceRequest, ServiceResponse};
use actix_web::http::Method;
use actix_web::middleware::Next;
use actix_web::{Error, web};
use subtle::ConstantTimeEq;

use super::WebError;
use super::extractors::MaybeUser;
use crate::state::AppState;

/// Header carrying the session's CSRF token.
pub const CSRF_HEADER: &str = "X-CSRF-Token";

/// Paths authenticated by API tokens instead of cookies (the gateway's APIs).
const EXEMPT_PREFIXES: &[&str] = &["/v1/", "/v1beta/", "/scim/"];

fn is_safe(method: &Method) -> bool {
    matches!(*method, Method::GET | Method::HEAD | Method::OPTIONS)
}

/// Whether the request was sent by a page of this very origin.
fn same_origin(req: &ServiceRequest, state: &AppState) -> bool {
    let header = |name: &str| req.headers().get(name).and_then(|v| v.to_str().ok()).map(str::to_string);
    if let Some(site) = header("Sec-Fetch-Site") {
        return site == "same-origin";
    }
    let Some(origin) = header("Origin") else {
        return false;
    };
    if !state.config.server.public_url.is_empty() {
        return origin == state.config.public_url();
    }
    // No public URL configured (local use): the origin must match the Host we were reached at.
    let host = req.connection_info().host().to_string();
    origin == format!("http://{host}") || origin == format!("https://{host}")
}

/// Rejects cross-site or token-less state changes with 403 before any handler runs.
pub async fn csrf_guard(
    mut req: ServiceRequest,
    next: Next<impl MessageBody>,
) -> Result<ServiceResponse<impl MessageBody>, Error> {
    if is_safe(req.method()) || EXEMPT_PREFIXES.iter().any(|p| req.path().starts_with(p)) {
        return next.call(req).await;
    }
    // A bearer token without any cookie is not a credential a browser sends by itself, so a
    // cross-site page cannot forge such a request.
    if req.headers().get("cookie").is_none() && super::extractors::bearer_token(req.request()).is_some() {
        return next.call(req).await;
    }
    let state = req
        .app_data::<web::Data<AppState>>()
        .cloned()
        .ok_or_else(|| WebError::Internal("app state missing".into()))?;
    if !same_origin(&req, &state) {
        return Err(WebError::Forbidden(
            "This request did not come from an Arbor page, so it was refused.".into(),
        )
        .into());
    }
    let user = req.extract::<MaybeUser>().await?;
    if let Some(auth) = user.0 {
        let sent = req.headers().get(CSRF_HEADER).map(|v| v.as_bytes()).unwrap_or_default();
        if !bool::from(sent.ct_eq(auth.csrf_secret.as_bytes())) {
            return Err(
                WebError::Forbidden("Your page was out of date. Reload it and try again.".into()).into()
            );
        }
    }
    next.call(req).await
}
