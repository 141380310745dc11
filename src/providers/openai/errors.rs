//! OpenAI-compatible error bodies: the status, the kind, the retry delay and a quoted message.

use chrono::{DateTime, Utc};
use serde_json::{Map, Value};

use super::super::types::*;
use super::{ERROR_BODY_CHARS, truncate_chars};

/// Classifies an HTTP error answer.
///
/// - The body is OpenAI's `{"error": {"message", "type", "param", "code"}}`; also understood:
///   `{"error": "text"}`, vLLM's older top-level `{"object": "error", "message", "type", "code"}`,
///   and a one-element array of those. `kind` is the string `code` when there is one (it is the
///   more precise: `rate_limit_exceeded`, `context_length_exceeded`, `invalid_api_key`), else
///   `type`, else `http_<status>`. A body that is none of these becomes the message, cut to
///   500 characters.
/// - Retryable: 408, 409, 429 and 5xx, except a 429 whose code or type is
///   `insufficient_quota` (out of credits: waiting does not help).
/// - `retry_after_secs`: the `Retry-After` header, in seconds or as an HTTP-date (seconds from
///   now, at least 0); without it, OpenAI's "Please try again in 1.554s" hint in the message,
///   rounded up.
pub fn parse_error(status: u16, retry_after: Option<&str>, body: &[u8]) -> ProviderError {
    let parsed = serde_json::from_slice::<Value>(body).ok();
    let described = parsed.as_ref().and_then(error_fields);
    let fallback_kind = format!("http_{status}");
    let (kind, message, quota) = match described {
        Some(fields) => {
            let message = fields.message.unwrap_or_else(|| body_text(status, body));
            (fields.kind.unwrap_or(fallback_kind), message, fields.quota)
        }
        None => (fallback_kind, body_text(status, body), false),
    };
    let retry_after_secs =
        retry_after.and_then(|value| retry_after_at(value, Utc::now())).or_else(|| retry_hint(&message));
    ProviderError { status, kind, message, retryable: status_retryable(status) && !quota, retry_after_secs }
}

/// What an error object says.
pub(super) struct ErrorFields {
    /// `code` (a string), else `type`.
    kind: Option<String>,
    /// `message`.
    message: Option<String>,
    /// Whether the code or type is `insufficient_quota`.
    quota: bool,
}

/// Finds the error object in an error body (see [`parse_error`]).
pub(super) fn error_fields(body: &Value) -> Option<ErrorFields> {
    match body {
        Value::Array(items) => items.first().and_then(error_fields),
        Value::Object(object) => match object.get("error") {
            Some(Value::Object(error)) => Some(fields_of(error)),
            Some(Value::String(message)) => {
                Some(ErrorFields { kind: None, message: Some(message.clone()), quota: false })
            }
            _ if object.get("message").is_some_and(Value::is_string) => Some(fields_of(object)),
            _ => None,
        },
        _ => None,
    }
}

/// Reads `message`, `code` and `type` of an error object.
pub(super) fn fields_of(error: &Map<String, Value>) -> ErrorFields {
    let text =
        |key: &str| error.get(key).and_then(Value::as_str).filter(|s| !s.is_empty()).map(str::to_owned);
    let code = text("code");
    let kind_type = text("type");
    let quota = [&code, &kind_type].into_iter().flatten().any(|s| s == "insufficient_quota");
    ErrorFields { kind: code.or(kind_type), message: text("message"), quota }
}

/// An in-stream (or 200-body) error object as a [`ProviderError`].
pub(super) fn error_from_value(error: &Value, status: u16) -> ProviderError {
    let (kind, message, quota, retry_hint_kinds) = match error {
        Value::Object(object) => {
            let fields = fields_of(object);
            let kinds: Vec<String> = ["code", "type"]
                .into_iter()
                .filter_map(|key| object.get(key).and_then(Value::as_str).map(str::to_owned))
                .collect();
            (fields.kind, fields.message, fields.quota, kinds)
        }
        Value::String(message) => (None, Some(message.clone()), false, Vec::new()),
        other => (None, Some(other.to_string()), false, Vec::new()),
    };
    // vLLM puts the HTTP status in a numeric `code`.
    let status = match error.get("code").and_then(Value::as_u64) {
        Some(code @ 100..=599) if status == 0 => u16::try_from(code).unwrap_or(0),
        _ => status,
    };
    let message = message.unwrap_or_else(|| "An error occurred during streaming".to_owned());
    let retryable = !quota
        && if status != 0 {
            status_retryable(status)
        } else {
            retry_hint_kinds.iter().any(|k| retryable_kind(k))
        };
    let retry_after_secs = retry_hint(&message);
    ProviderError {
        status,
        kind: kind.unwrap_or_else(|| "error".to_owned()),
        message,
        retryable,
        retry_after_secs,
    }
}

/// Whether an HTTP status is worth retrying.
pub(super) fn status_retryable(status: u16) -> bool {
    matches!(status, 408 | 409 | 429 | 500..=599)
}

/// Whether an in-stream error's `type` or `code` (no status known) is worth retrying.
pub(super) fn retryable_kind(kind: &str) -> bool {
    matches!(
        kind,
        "server_error"
            | "rate_limit_exceeded"
            | "rate_limit_error"
            | "overloaded"
            | "overloaded_error"
            | "service_unavailable"
            | "timeout"
    )
}

/// A non-JSON (or unrecognised) error body as a message, cut to [`ERROR_BODY_CHARS`].
pub(super) fn body_text(status: u16, body: &[u8]) -> String {
    let text = String::from_utf8_lossy(body);
    let text = text.trim();
    if text.is_empty() {
        return format!("HTTP {status} with an empty body");
    }
    truncate_chars(text, ERROR_BODY_CHARS)
}

/// A `Retry-After` value (delay-seconds or HTTP-date) as seconds from `now`, at least 0.
pub(super) fn retry_after_at(value: &str, now: DateTime<Utc>) -> Option<u64> {
    let value = value.trim();
    if let Ok(seconds) = value.parse::<u64>() {
        return Some(seconds);
    }
    if let Ok(seconds) = value.parse::<f64>() {
        return (seconds.is_finite() && seconds >= 0.0).then(|| seconds.ceil() as u64);
    }
    let date = DateTime::parse_from_rfc2822(value).ok()?;
    let seconds = date.with_timezone(&Utc).signed_duration_since(now).num_seconds();
    Some(u64::try_from(seconds).unwrap_or(0))
}

/// OpenAI's "Please try again in 1.554s" (also `20ms`, `6m0s`, `1h2m3s`) as whole seconds, rounded up.
pub(super) fn retry_hint(message: &str) -> Option<u64> {
    const MARKER: &str = "try again in ";
    let start = message.to_ascii_lowercase().find(MARKER)? + MARKER.len();
    let mut rest = message.get(start..)?;
    let mut total = 0.0_f64;
    let mut any = false;
    loop {
        let number_len = rest.find(|c: char| !(c.is_ascii_digit() || c == '.')).unwrap_or(rest.len());
        if number_len == 0 {
            break;
        }
        let Ok(number) = rest.get(..number_len).unwrap_or_default().parse::<f64>() else {
            break;
        };
        let after = rest.get(number_len..).unwrap_or_default();
        let (scale, unit_len) = if after.starts_with("ms") {
            (0.001, 2)
        } else if after.starts_with('s') {
            (1.0, 1)
        } else if after.starts_with('m') {
            (60.0, 1)
        } else if after.starts_with('h') {
            (3600.0, 1)
        } else {
            break;
        };
        total += number * scale;
        any = true;
        rest = after.get(unit_len..).unwrap_or_default();
    }
    (any && total.is_finite()).then(|| total.ceil() as u64)
}
