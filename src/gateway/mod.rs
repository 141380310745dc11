//! The gateway's wire formats: requests in the OpenAI and Anthropic shapes turned into the
//! provider-neutral [`ChatRequest`](crate::providers::types::ChatRequest), and answers (whole or
//! streamed) and errors turned back into the caller's shape. Pure translation; no I/O.

pub mod anthropic;
pub mod embeddings;
pub mod gemini;
pub mod openai;
pub mod openapi;
pub mod responses;

/// The most tools one request may offer (OpenAI's own limit is 128; Claude Code sends about
/// 30): more is refused before any of them is copied.
pub const MAX_TOOLS: usize = 512;

/// Refuses a tool list longer than [`MAX_TOOLS`].
pub fn check_tool_count(n: usize) -> Result<(), ApiError> {
    if n > MAX_TOOLS {
        return Err(ApiError::invalid(
            format!("tools: at most {MAX_TOOLS} tools may be offered."),
            Some("tools"),
        ));
    }
    Ok(())
}

/// What a request carried that the gateway does not send on to the serving model: named in
/// a `Warning` response header instead of refused, since the real API accepts it.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Dropped(Vec<String>);

impl Dropped {
    /// Most names kept; a hostile body cannot grow the header without bound.
    const MAX: usize = 24;

    /// Names one thing left out (once). Callers pass plain words, never request text.
    pub fn add(&mut self, what: &str) {
        if self.0.len() < Self::MAX && !self.0.iter().any(|w| w == what) {
            self.0.push(what.to_string());
        }
    }

    /// The `Warning` header value (code 299, a persistent warning), when something was left out.
    pub fn warning(&self) -> Option<String> {
        (!self.0.is_empty()).then(|| format!("299 arbor \"Not sent to the model: {}\"", self.0.join(", ")))
    }
}

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
