//! Who calls the `/v1` API: the `ApiCaller` extractor checks the API token (`Authorization:
//! Bearer …` or `x-api-key`, either scope) before the handler runs, and refuses in the
//! caller's dialect: the Anthropic shape under `/v1/messages`, the OpenAI shape elsewhere.

use std::future::Future;
use std::pin::Pin;

use actix_web::http::StatusCode;
use actix_web::http::header;
use actix_web::{FromRequest, HttpRequest, HttpResponse, ResponseError, dev::Payload, web};
use serde_json::Value;

use crate::domain::accounts::api_tokens::{self, Refusal, TokenCaller};
use crate::gateway::{ApiError, anthropic, gemini, openai};
use crate::state::AppState;
use crate::web::extractors::bearer_token;

/// The wire format a `/v1` route speaks, for its errors.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Dialect {
    /// OpenAI's `{"error": {...}}`.
    OpenAi,
    /// Anthropic's `{"type": "error", "error": {...}}`.
    Anthropic,
    /// Google's `{"error": {"code", "message", "status"}}`.
    Gemini,
}

impl Dialect {
    /// The dialect of the route a request is for.
    pub fn of(req: &HttpRequest) -> Dialect {
        let path = req.path();
        if path.starts_with("/v1/messages") {
            Dialect::Anthropic
        } else if path.starts_with("/v1beta/") || path == "/v1beta" {
            Dialect::Gemini
        } else {
            Dialect::OpenAi
        }
    }

    /// An error in this dialect, with its status and `Retry-After`.
    pub fn error(self, e: &ApiError) -> HttpResponse {
        let body = match self {
            Dialect::OpenAi => openai::error_body(e),
            Dialect::Anthropic => anthropic::error_body(e),
            Dialect::Gemini => gemini::error_body(e),
        };
        error_response(e, body)
    }
}

/// An error's status and `Retry-After` with the body of the caller's format.
pub fn error_response(e: &ApiError, body: Value) -> HttpResponse {
    let mut res = HttpResponse::build(StatusCode::from_u16(e.status).unwrap_or(StatusCode::BAD_GATEWAY));
    if let Some(secs) = e.retry_after {
        res.insert_header((header::RETRY_AFTER, secs.to_string()));
    }
    res.json(body)
}

/// An API caller whose token was checked.
#[derive(Debug, Clone)]
pub struct ApiCaller(pub TokenCaller);

/// A refused API call, already in the caller's dialect.
#[derive(Debug)]
pub struct ApiRefusal {
    error: ApiError,
    dialect: Dialect,
}

impl std::fmt::Display for ApiRefusal {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.error.message)
    }
}

impl ResponseError for ApiRefusal {
    fn status_code(&self) -> StatusCode {
        StatusCode::from_u16(self.error.status).unwrap_or(StatusCode::UNAUTHORIZED)
    }

    fn error_response(&self) -> HttpResponse {
        self.dialect.error(&self.error)
    }
}

/// The key as Google's clients send it: `x-goog-api-key`, else `?key=` (the query string is
/// never logged).
fn google_key(req: &HttpRequest) -> Option<&str> {
    if let Some(key) = req.headers().get("x-goog-api-key").and_then(|v| v.to_str().ok()) {
        return Some(key.trim()).filter(|k| !k.is_empty());
    }
    req.query_string()
        .split('&')
        .find_map(|pair| pair.strip_prefix("key="))
        .filter(|k| !k.is_empty() && k.bytes().all(|c| c.is_ascii_alphanumeric() || c == b'_' || c == b'-'))
}

/// Whether a path belongs to the sessions API.
pub fn is_sessions_path(path: &str) -> bool {
    ["/v1/workspaces", "/v1/sessions"]
        .iter()
        .any(|p| path.strip_prefix(p).is_some_and(|rest| rest.is_empty() || rest.starts_with('/')))
}

async fn check(state: &AppState, req: &HttpRequest) -> Result<TokenCaller, ApiError> {
    let token = bearer_token(req).or_else(|| google_key(req)).ok_or_else(|| {
        ApiError::new(401, "authentication", "Send an Arbor API token as Authorization: Bearer <token>.")
    })?;
    match state.accounts.tokens.authenticate(token).await {
        Ok(Ok(caller)) if caller.scope == api_tokens::Scope::Scim => {
            Err(ApiError::new(403, "permission", "This token is for directory provisioning (SCIM) only."))
        }
        // A token reaches the part of `/v1` its scope names: the model API or the sessions API
        // (`full` both).
        Ok(Ok(caller)) if caller.scope == api_tokens::Scope::Sessions && !is_sessions_path(req.path()) => {
            Err(ApiError::new(
                403,
                "permission",
                "This token is for the sessions API (/v1/workspaces, /v1/sessions) only.",
            ))
        }
        Ok(Ok(caller)) if caller.scope == api_tokens::Scope::Api && is_sessions_path(req.path()) => {
            Err(ApiError::new(
                403,
                "permission",
                "This token is for the model API only; make one with the sessions scope for the sessions API.",
            ))
        }
        Ok(Ok(caller)) => Ok(caller),
        Ok(Err(Refusal::Invalid)) => Err(ApiError::new(
            401,
            "authentication",
            "The API token is not valid (unknown, revoked or expired).",
        )),
        Ok(Err(Refusal::Disabled)) => Err(ApiError::new(403, "permission", "This account is disabled.")),
        Err(e) => {
            tracing::error!(error = %e, "token check failed");
            Err(ApiError::new(500, "internal", "Something went wrong on our side."))
        }
    }
}

impl FromRequest for ApiCaller {
    type Error = ApiRefusal;
    type Future = Pin<Box<dyn Future<Output = Result<Self, Self::Error>>>>;

    fn from_request(req: &HttpRequest, _: &mut Payload) -> Self::Future {
        let req = req.clone();
        Box::pin(async move {
            let dialect = Dialect::of(&req);
            let Some(state) = req.app_data::<web::Data<AppState>>().cloned() else {
                let error = ApiError::new(500, "internal", "Something went wrong on our side.");
                return Err(ApiRefusal { error, dialect });
            };
            check(&state, &req).await.map(ApiCaller).map_err(|error| ApiRefusal { error, dialect })
        })
    }
}
