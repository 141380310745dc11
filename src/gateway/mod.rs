//! The gateway's wire formats: requests in the OpenAI and Anthropic shapes turned into the
//! provider-neutral [`ChatRequest`](crate::providers::types::ChatRequest), and answers (whole or
//! streamed) and errors turned back into the caller's shape. Pure translation; no I/O.

pub mod anthropic;
pub mod embeddings;
pub mod gemini;
pub mod openai;
pub mod openapi;
pub mod responses;

/// The request's `model`: a non-empty string, trimmed.
pub fn model_field(
    obj: &serde_json::Map<String, serde_json::Value>,
    message: &str,
) -> Result<String, ApiError> {
    obj.get("model")
        .and_then(serde_json::Value::as_str)
        .map(str::trim)
        .filter(|m| !m.is_empty())
        .map(str::to_string)
        .ok_or_else(|| ApiError::invalid(message, Some("model")))
}

/// An optional sampling temperature between 0 and `max`, named `param` when refused.
pub fn temperature_field(
    v: Option<&serde_json::Value>,
    max: f64,
    param: &str,
) -> Result<Option<f32>, ApiError> {
    match v {
        None | Some(serde_json::Value::Null) => Ok(None),
        Some(v) => v.as_f64().filter(|t| (0.0..=max).contains(t)).map(|t| Some(t as f32)).ok_or_else(|| {
            ApiError::invalid(format!("temperature must be between 0 and {max}."), Some(param))
        }),
    }
}

/// An optional positive token count, named `param` when refused.
pub fn tokens_field(v: Option<&serde_json::Value>, param: &str) -> Result<Option<u32>, ApiError> {
    match v {
        None | Some(serde_json::Value::Null) => Ok(None),
        Some(v) => v
            .as_u64()
            .and_then(|n| u32::try_from(n).ok())
            .filter(|n| *n > 0)
            .map(Some)
            .ok_or_else(|| ApiError::invalid(format!("{param} must be a positive integer."), Some(param))),
    }
}

/// The items of an optional `tools` array (at most [`MAX_TOOLS`]); none when absent.
pub fn tools_array(v: Option<&serde_json::Value>) -> Result<&[serde_json::Value], ApiError> {
    match v {
        None | Some(serde_json::Value::Null) => Ok(&[]),
        Some(serde_json::Value::Array(list)) => {
            check_tool_count(list.len())?;
            Ok(list)
        }
        Some(_) => Err(ApiError::invalid("tools must be an array.", Some("tools"))),
    }
}

/// A word from a request that is safe to name in a header (a type or field name), else `other`.
pub fn plain_word(word: &str) -> &str {
    if !word.is_empty() && word.len() <= 40 && word.bytes().all(|c| c.is_ascii_alphanumeric() || c == b'_') {
        word
    } else {
        "other"
    }
}

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
