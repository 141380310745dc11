//! Gemini's error bodies: status, retry delay and a message scrubbed of API keys.

use serde_json::Value;

use super::super::types::*;

/// Longest stretch of a non-JSON error body quoted in a [`ProviderError`] message.
pub(super) const MAX_QUOTED_BODY_CHARS: usize = 500;

// Errors

/// Classifies a non-2xx answer (`{"error": {code, message, status, details}}`, possibly wrapped
/// in an array); the delay comes from `retry-after`, else from a `google.rpc.RetryInfo` detail.
pub fn parse_error(status: u16, retry_after: Option<&str>, body: &[u8]) -> ProviderError {
    let header_delay = retry_after.and_then(parse_retry_after);
    let parsed: Option<Value> = serde_json::from_slice(body).ok();
    let error = parsed.as_ref().and_then(|v| match v {
        Value::Array(items) => items.first().and_then(|i| i.get("error")),
        _ => v.get("error"),
    });
    if let Some(error) = error.filter(|e| e.is_object()) {
        return error_from_status(error, status, header_delay);
    }
    let text = String::from_utf8_lossy(body);
    let text = text.trim();
    let message = if text.is_empty() {
        format!("Gemini answered HTTP {status} with an empty body")
    } else {
        let mut quoted: String = text.chars().take(MAX_QUOTED_BODY_CHARS).collect();
        if quoted.len() < text.len() {
            quoted.push('…');
        }
        quoted
    };
    let kind = format!("http_{status}");
    ProviderError {
        status,
        retryable: is_retryable(status, &kind),
        kind,
        message: redact_secrets(&message),
        retry_after_secs: header_delay,
    }
}

/// A [`ProviderError`] from a `google.rpc.Status` object (`status` 0: take the object's `code`).
pub(super) fn error_from_status(error: &Value, status: u16, header_delay: Option<u64>) -> ProviderError {
    let code = error.get("code").and_then(Value::as_u64).and_then(|c| u16::try_from(c).ok());
    let status = if status != 0 { status } else { code.unwrap_or(0) };
    let kind = match error.get("status").and_then(Value::as_str).filter(|s| !s.is_empty()) {
        Some(kind) => kind.to_string(),
        None => format!("http_{status}"),
    };
    let message = match error.get("message").and_then(Value::as_str).filter(|m| !m.is_empty()) {
        Some(message) => message.to_string(),
        None => format!("Gemini reported {kind} without a message"),
    };
    let retry_after_secs = header_delay.or_else(|| retry_info_delay(error));
    ProviderError {
        status,
        retryable: is_retryable(status, &kind),
        kind,
        message: redact_secrets(&message),
        retry_after_secs,
    }
}

/// Whether trying again may help: rate limits, overload, server faults and timeouts.
fn is_retryable(status: u16, kind: &str) -> bool {
    matches!(status, 429 | 500 | 502 | 503 | 504)
        || matches!(kind, "RESOURCE_EXHAUSTED" | "UNAVAILABLE" | "INTERNAL" | "DEADLINE_EXCEEDED")
}

/// `retryDelay` of a `type.googleapis.com/google.rpc.RetryInfo` detail, in whole seconds.
fn retry_info_delay(error: &Value) -> Option<u64> {
    error.get("details").and_then(Value::as_array)?.iter().find_map(|detail| {
        let kind = detail.get("@type").and_then(Value::as_str)?;
        if !kind.ends_with("google.rpc.RetryInfo") {
            return None;
        }
        parse_duration_secs(detail.get("retryDelay").and_then(Value::as_str)?)
    })
}

/// A protobuf JSON `Duration` (`"30s"`, `"1.5s"`) rounded up to whole seconds.
fn parse_duration_secs(duration: &str) -> Option<u64> {
    ceil_secs(duration.trim().strip_suffix('s')?)
}

/// A `retry-after` header in delta-seconds (an HTTP date is ignored).
fn parse_retry_after(value: &str) -> Option<u64> {
    ceil_secs(value.trim())
}

/// Non-negative decimal seconds rounded up.
fn ceil_secs(text: &str) -> Option<u64> {
    if let Ok(secs) = text.parse::<u64>() {
        return Some(secs);
    }
    let secs = text.parse::<f64>().ok().filter(|s| s.is_finite() && *s >= 0.0)?;
    // Bounded to a day, so the float-to-int conversion cannot saturate surprisingly.
    Some(secs.min(86_400.0).ceil() as u64)
}

/// Replaces `key=<value>` query values with `key=***` and Google API keys (`AIza...`) with `***`.
pub fn redact_secrets(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    let lower = text.to_ascii_lowercase();
    let mut pos = 0;
    while let Some(found) = lower[pos..].find("key=") {
        let value_start = pos + found + "key=".len();
        out.push_str(&text[pos..value_start]);
        let value_len = text[value_start..].find(ends_query_value).unwrap_or(text.len() - value_start);
        if value_len > 0 {
            out.push_str("***");
        }
        pos = value_start + value_len;
    }
    out.push_str(&text[pos..]);
    redact_google_api_keys(&out)
}

/// Characters that end a query-string value inside free text.
fn ends_query_value(c: char) -> bool {
    c.is_whitespace() || matches!(c, '&' | '#' | '"' | '\'' | '<' | '>' | ',' | ';' | ')' | ']' | '}' | '\\')
}

/// Replaces `AIza` followed by 30+ key characters (a Google API key) with `***`.
fn redact_google_api_keys(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    let mut pos = 0;
    while let Some(found) = text[pos..].find("AIza") {
        let start = pos + found;
        let tail = &text[start + 4..];
        let key_len =
            tail.find(|c: char| !(c.is_ascii_alphanumeric() || c == '-' || c == '_')).unwrap_or(tail.len());
        out.push_str(&text[pos..start]);
        if key_len >= 30 {
            out.push_str("***");
        } else {
            out.push_str(&text[start..start + 4 + key_len]);
        }
        pos = start + 4 + key_len;
    }
    out.push_str(&text[pos..]);
    out
}
