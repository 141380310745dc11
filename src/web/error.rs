//! The web error: maps domain failures to status codes, and renders friendly error pages.

use actix_web::body::BoxBody;
use actix_web::dev::ServiceResponse;
use actix_web::http::StatusCode;
use actix_web::http::header::{self, HeaderValue};
use actix_web::middleware::ErrorHandlerResponse;
use actix_web::{HttpResponse, ResponseError, web};

use crate::domain::DomainError;
use crate::state::AppState;

/// The message a person sees for an error response; kept apart from what is logged.
#[derive(Debug, Clone)]
pub struct PublicMessage(pub String);

/// Everything a handler can fail with.
#[derive(Debug, thiserror::Error)]
pub enum WebError {
    /// Missing, or not the requester's.
    #[error("not found")]
    NotFound,
    /// No valid session.
    #[error("sign-in required")]
    Unauthenticated,
    /// Signed in but not allowed; the text is shown.
    #[error("{0}")]
    Forbidden(String),
    /// Bad input; the text is shown.
    #[error("{0}")]
    BadRequest(String),
    /// Conflicts with current state; the text is shown.
    #[error("{0}")]
    Conflict(String),
    /// A body over its limit (413); the text is shown.
    #[error("{0}")]
    PayloadTooLarge(String),
    /// Rate-limited; the text is shown, the number is `Retry-After` in seconds.
    #[error("{0}")]
    TooManyRequests(String, u64),
    /// A dependency is down; the text is shown.
    #[error("{0}")]
    Unavailable(String),
    /// A model provider failed (502); the text is shown.
    #[error("{0}")]
    BadGateway(String),
    /// At capacity for now (503); the text is shown, the number is `Retry-After` in seconds.
    #[error("{0}")]
    Busy(String, u64),
    /// A bug or an outage; the detail is logged, never shown.
    #[error("internal error")]
    Internal(String),
}

impl From<DomainError> for WebError {
    fn from(e: DomainError) -> Self {
        match e {
            DomainError::NotFound => WebError::NotFound,
            DomainError::Forbidden => WebError::Forbidden("You may not do that.".into()),
            DomainError::Invalid(m) => WebError::BadRequest(m),
            DomainError::Conflict(m) => WebError::Conflict(m),
            DomainError::Limited(m, secs) => WebError::TooManyRequests(m, secs),
            DomainError::Busy(m, secs) => WebError::Busy(m, secs),
            DomainError::TooLarge(m) => WebError::PayloadTooLarge(m),
            DomainError::Upstream(m) => WebError::BadGateway(m),
            DomainError::Storage(s) => WebError::Internal(s.to_string()),
        }
    }
}

impl From<crate::storage::StorageError> for WebError {
    fn from(e: crate::storage::StorageError) -> Self {
        WebError::Internal(e.to_string())
    }
}

impl WebError {
    /// What the person is told.
    pub fn public_message(&self) -> String {
        match self {
            WebError::NotFound => "We could not find that page.".into(),
            WebError::Unauthenticated => "Please sign in to continue.".into(),
            WebError::Internal(_) => "Something went wrong on our side. It has been logged.".into(),
            WebError::Forbidden(m)
            | WebError::BadRequest(m)
            | WebError::Conflict(m)
            | WebError::PayloadTooLarge(m)
            | WebError::Unavailable(m)
            | WebError::BadGateway(m)
            | WebError::Busy(m, _)
            | WebError::TooManyRequests(m, _) => m.clone(),
        }
    }
}

impl ResponseError for WebError {
    fn status_code(&self) -> StatusCode {
        match self {
            WebError::NotFound => StatusCode::NOT_FOUND,
            WebError::Unauthenticated => StatusCode::UNAUTHORIZED,
            WebError::Forbidden(_) => StatusCode::FORBIDDEN,
            WebError::BadRequest(_) => StatusCode::BAD_REQUEST,
            WebError::Conflict(_) => StatusCode::CONFLICT,
            WebError::PayloadTooLarge(_) => StatusCode::PAYLOAD_TOO_LARGE,
            WebError::Unavailable(_) | WebError::Busy(..) => StatusCode::SERVICE_UNAVAILABLE,
            WebError::BadGateway(_) => StatusCode::BAD_GATEWAY,
            WebError::TooManyRequests(..) => StatusCode::TOO_MANY_REQUESTS,
            WebError::Internal(_) => StatusCode::INTERNAL_SERVER_ERROR,
        }
    }

    fn error_response(&self) -> HttpResponse<BoxBody> {
        if let WebError::Internal(detail) = self {
            tracing::error!(error = %detail, "request failed");
        }
        let message = self.public_message();
        let mut builder = HttpResponse::build(self.status_code());
        builder.content_type("text/plain; charset=utf-8");
        if let WebError::TooManyRequests(_, secs) | WebError::Busy(_, secs) = self {
            builder.insert_header((actix_web::http::header::RETRY_AFTER, secs.to_string()));
        }
        let mut res = builder.body(message.clone());
        res.extensions_mut().insert(PublicMessage(message));
        res
    }
}

/// Default text for statuses that did not come from a [`WebError`] (e.g. 405 from the router).
fn default_message(status: StatusCode) -> String {
    match status {
        StatusCode::NOT_FOUND => "We could not find that page.".into(),
        StatusCode::METHOD_NOT_ALLOWED => "That action is not available here.".into(),
        StatusCode::PAYLOAD_TOO_LARGE => "That request is too large.".into(),
        s if s.is_server_error() => "Something went wrong on our side. It has been logged.".into(),
        s => s.canonical_reason().unwrap_or("Request failed").to_string(),
    }
}

/// Where an anonymous browser asking for a page is sent instead of a bare 401: the sign-in
/// page, remembering where it wanted to go. htmx requests get `HX-Redirect`; API and event
/// stream requests keep their 401.
fn login_redirect(req: &actix_web::HttpRequest) -> Option<HttpResponse> {
    let accepts_html = req
        .headers()
        .get(header::ACCEPT)
        .and_then(|v| v.to_str().ok())
        .is_some_and(|a| a.contains("text/html"));
    let htmx = super::render::is_htmx(req);
    if req.method() != actix_web::http::Method::GET || !(accepts_html || htmx) {
        return None;
    }
    let target = req.uri().path_and_query().map(|p| p.as_str()).unwrap_or("/");
    let encoded: String = url_encode(target);
    let location = format!("/login?next={encoded}");
    Some(if htmx {
        HttpResponse::Unauthorized().insert_header(("HX-Redirect", location)).finish()
    } else {
        HttpResponse::SeeOther().insert_header((header::LOCATION, location)).finish()
    })
}

/// Percent-encodes everything but unreserved characters and `/`.
fn url_encode(s: &str) -> String {
    s.bytes()
        .map(|b| match b {
            b'A'..=b'Z' | b'a'..=b'z' | b'0'..=b'9' | b'-' | b'.' | b'_' | b'~' | b'/' => {
                (b as char).to_string()
            }
            _ => format!("%{b:02X}"),
        })
        .collect()
}

/// Replaces plain-text error bodies with the friendly page, or its fragment for HTMX requests.
/// JSON, HTML and event-stream bodies are left alone: their handler chose them.
pub fn render_error_page<B>(res: ServiceResponse<B>) -> actix_web::Result<ErrorHandlerResponse<B>> {
    let plain = match res.response().headers().get(header::CONTENT_TYPE) {
        None => true,
        Some(v) => v.to_str().map(|s| s.starts_with("text/plain")).unwrap_or(false),
    };
    let Some(state) = res.request().app_data::<web::Data<AppState>>().cloned() else {
        return Ok(ErrorHandlerResponse::Response(res.map_into_left_body()));
    };
    if !plain {
        return Ok(ErrorHandlerResponse::Response(res.map_into_left_body()));
    }
    let status = res.status();
    if status == StatusCode::UNAUTHORIZED
        && let Some(redirect) = login_redirect(res.request())
    {
        return Ok(ErrorHandlerResponse::Response(res.into_response(redirect).map_into_right_body()));
    }
    let message = res
        .response()
        .extensions()
        .get::<PublicMessage>()
        .map(|m| m.0.clone())
        .unwrap_or_else(|| default_message(status));
    let (req, old) = res.into_parts();
    let htmx = super::render::is_htmx(&req);
    let html = super::render::error_html(&state, &req, status, &message, htmx);
    let mut new = HttpResponse::build(status);
    for (name, value) in old.headers() {
        if name != header::CONTENT_TYPE && name != header::CONTENT_LENGTH {
            new.append_header((name.clone(), value.clone()));
        }
    }
    new.insert_header((header::CONTENT_TYPE, HeaderValue::from_static("text/html; charset=utf-8")));
    new.insert_header((header::VARY, HeaderValue::from_static("HX-Request")));
    Ok(ErrorHandlerResponse::Response(ServiceResponse::new(req, new.body(html)).map_into_right_body()))
}
