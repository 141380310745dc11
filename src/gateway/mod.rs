//! The gateway's wire formats: requests in the OpenAI and Anthropic shapes turned into the
//! provider-neutral [`ChatRequest`](crate::providers::types::ChatRequest), and answers (whole or
//! streamed) and errors turned back into the caller's shape. Pure translation; no I/O.

pub mod anthropic;
pub mod openai;
pub mod openapi;

/// Whether an inline image's media type is one every provider takes.
pub fn image_type_allowed(mime: &str) -> bool {
    matches!(mime, "image/png" | "image/jpeg" | "image/gif" | "image/webp")
}

/// An error as the API reports it, before it is put in the caller's format.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ApiError {
    /// HTTP status.
    pub status: u16,
    /// A short code (`invalid_request`, `authentication`, `permission`, `not_found`,
    /// `rate_limit`, `upstream`, `overloaded`, `internal`).
    pub kind: &'static str,
    /// What went wrong, safe to show.
    pub message: String,
    /// The request field at fault, when one is.
    pub param: Option<String>,
    /// Seconds to wait before trying again (429).
    pub retry_after: Option<u64>,
}

impl ApiError {
    /// A 400 about a request field.
    pub fn invalid(message: impl Into<String>, param: Option<&str>) -> ApiError {
        ApiError {
            status: 400,
            kind: "invalid_request",
            message: message.into(),
            param: param.map(str::to_string),
            retry_after: None,
        }
    }

    /// An error with this status and kind.
    pub fn new(status: u16, kind: &'static str, message: impl Into<String>) -> ApiError {
        ApiError { status, kind, message: message.into(), param: None, retry_after: None }
    }
}
