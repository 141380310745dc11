//! Non-streamed answers, error bodies and model lists.

use super::*;

// ---- parse_response ----

#[test]
fn nonstream_text_fixture() {
    assert_eq!(
        parse_response(NONSTREAM_TEXT.as_bytes()),
        Ok(vec![
            text("The capital of France is Paris."),
            ProviderEvent::Finish(FinishReason::Stop),
            usage(24, 8, 0),
        ])
    );
}

#[test]
fn nonstream_reasoning_and_tool_calls() {
    let body = br#"{
      "id": "5d1c3d0f-2f5e-4c7a-9b55-0c1d2e3f4a5b", "object": "chat.completion", "created": 1740000000,
      "model": "deepseek-reasoner",
      "choices": [{"index": 0, "finish_reason": "tool_calls", "message": {
        "role": "assistant", "content": "", "reasoning_content": "Need the weather.",
        "tool_calls": [
          {"id": "call_0_a", "type": "function", "function": {"name": "get_weather", "arguments": "{\"city\":\"Oslo\"}"}},
          {"type": "function", "function": {"name": "noop", "arguments": "oops"}}
        ]}}],
      "usage": {"prompt_tokens": 100, "completion_tokens": 20, "prompt_cache_hit_tokens": 64, "prompt_cache_miss_tokens": 36}
    }"#;
    assert_eq!(
        parse_response(body),
        Ok(vec![
            thought("Need the weather."),
            ProviderEvent::ToolCall {
                id: "call_0_a".into(),
                name: "get_weather".into(),
                arguments: json!({"city": "Oslo"}),
                signature: None
            },
            ProviderEvent::ToolCall {
                id: "call_5d1c3d0f-2f5e-4c7a-9b55-0c1d2e3f4a5b_1".into(),
                name: "noop".into(),
                arguments: Value::String("oops".into()),
                signature: None
            },
            ProviderEvent::Finish(FinishReason::ToolCalls),
            usage(100, 20, 64),
        ])
    );
}

#[test]
fn nonstream_reasoning_field_and_leading_keepalive_lines() {
    // DeepSeek sends empty lines while a non-streamed request waits; JSON allows them.
    let body = b"\n\n{\"choices\":[{\"index\":0,\"message\":{\"role\":\"assistant\",\"content\":\"ok\",\"reasoning\":\"hm\"}}]}";
    assert_eq!(
        parse_response(body),
        Ok(vec![thought("hm"), text("ok"), ProviderEvent::Finish(FinishReason::Stop)])
    );
}

#[test]
fn nonstream_errors() {
    assert!(parse_response(b"").is_err());
    assert!(parse_response(b"<html>").is_err());
    assert!(parse_response(b"[]").is_err());
    assert!(parse_response(br#"{"choices":[]}"#).is_err());
    assert!(parse_response(br#"{"choices":[{"index":0}]}"#).is_err());
    assert!(matches!(
        parse_response(br#"{"error":{"message":"m","type":"server_error"}}"#).as_deref(),
        Ok([ProviderEvent::Error(ProviderError { retryable: true, .. })])
    ));
}

// ---- parse_error ----

#[test]
fn error_400_fixture() {
    assert_eq!(
        parse_error(400, None, ERROR_400.as_bytes()),
        ProviderError {
            status: 400,
            kind: "context_length_exceeded".into(),
            message: "This model's maximum context length is 128000 tokens. However, your messages \
                      resulted in 131072 tokens. Please reduce the length of the messages."
                .into(),
            retryable: false,
            retry_after_secs: None,
        }
    );
}

#[test]
fn error_429_fixture() {
    let error = parse_error(429, Some("2"), ERROR_429.as_bytes());
    assert_eq!(error.kind, "rate_limit_exceeded");
    assert!(error.retryable);
    assert_eq!(error.retry_after_secs, Some(2));
    assert!(error.message.starts_with("Rate limit reached for gpt-4o"));
    // Without the header, the hint in the message ("1.554s") rounded up.
    assert_eq!(parse_error(429, None, ERROR_429.as_bytes()).retry_after_secs, Some(2));
}

#[test]
fn insufficient_quota_is_not_retryable() {
    let body = br#"{"error":{"message":"You exceeded your current quota, please check your plan and billing details.","type":"insufficient_quota","param":null,"code":"insufficient_quota"}}"#;
    let error = parse_error(429, None, body);
    assert_eq!(error.kind, "insufficient_quota");
    assert!(!error.retryable);
}

#[test]
fn retryable_statuses() {
    for status in [408, 409, 429, 500, 502, 503, 504, 529, 599] {
        assert!(parse_error(status, None, b"").retryable, "{status}");
    }
    for status in [400, 401, 403, 404, 413, 422, 600] {
        assert!(!parse_error(status, None, b"").retryable, "{status}");
    }
}

#[test]
fn non_json_bodies() {
    let error = parse_error(502, None, b"<html><body>502 Bad Gateway</body></html>\n");
    assert_eq!(error.kind, "http_502");
    assert_eq!(error.message, "<html><body>502 Bad Gateway</body></html>");
    assert!(error.retryable);

    assert_eq!(parse_error(503, None, b"").message, "HTTP 503 with an empty body");

    let long = "\u{e9}".repeat(800);
    let error = parse_error(500, None, long.as_bytes());
    assert_eq!(error.message.chars().count(), 501);
    assert!(error.message.ends_with('…'));

    // JSON, but not an error object: the text is the message.
    assert_eq!(parse_error(500, None, br#"{"detail":"x"}"#).message, r#"{"detail":"x"}"#);
}

#[test]
fn other_error_body_shapes() {
    let error = parse_error(404, None, br#"{"error":"model \"llama9\" not found, try pulling it first"}"#);
    assert_eq!(error.kind, "http_404");
    assert_eq!(error.message, "model \"llama9\" not found, try pulling it first");

    let error = parse_error(
        400,
        None,
        br#"{"object":"error","message":"max_tokens is too large","type":"BadRequestError","param":null,"code":400}"#,
    );
    assert_eq!((error.kind.as_str(), error.message.as_str()), ("BadRequestError", "max_tokens is too large"));

    let error = parse_error(
        400,
        None,
        br#"[{"error":{"code":400,"message":"API key not valid.","status":"INVALID_ARGUMENT"}}]"#,
    );
    assert_eq!((error.kind.as_str(), error.message.as_str()), ("http_400", "API key not valid."));

    let error = parse_error(401, None, br#"{"error":{"message":"Incorrect API key provided: sk-abc***xyz.","type":"invalid_request_error","param":null,"code":"invalid_api_key"}}"#);
    assert_eq!(error.kind, "invalid_api_key");

    let error = parse_error(
        400,
        None,
        br#"{"error":{"message":"Bad","type":"invalid_request_error","param":"messages","code":null}}"#,
    );
    assert_eq!(error.kind, "invalid_request_error");
}

#[test]
fn retry_after_values() {
    let now = DateTime::parse_from_rfc3339("2015-10-21T07:27:30Z").unwrap().with_timezone(&Utc);
    assert_eq!(retry_after_at("120", now), Some(120));
    assert_eq!(retry_after_at(" 0 ", now), Some(0));
    assert_eq!(retry_after_at("1.5", now), Some(2));
    assert_eq!(retry_after_at("-3", now), None);
    assert_eq!(retry_after_at("soon", now), None);
    assert_eq!(retry_after_at("", now), None);
    assert_eq!(retry_after_at("Wed, 21 Oct 2015 07:28:00 GMT", now), Some(30));
    assert_eq!(retry_after_at("Wed, 21 Oct 2015 07:00:00 GMT", now), Some(0));
    assert_eq!(retry_after_at("Wed, 21 Oct 2015 09:28:00 +0200", now), Some(30));
    // Through parse_error, against the real clock: a date in the past floors at 0.
    assert_eq!(parse_error(503, Some("Thu, 01 Jan 1970 00:00:00 GMT"), b"").retry_after_secs, Some(0));
    let soon = (Utc::now() + chrono::TimeDelta::seconds(100)).to_rfc2822();
    let secs = parse_error(503, Some(&soon), b"").retry_after_secs.unwrap();
    assert!((98..=100).contains(&secs), "{secs}");
    assert_eq!(parse_error(503, Some("7"), b"").retry_after_secs, Some(7));
}

#[test]
fn retry_hints_in_messages() {
    assert_eq!(retry_hint("Please try again in 1.554s. Visit ..."), Some(2));
    assert_eq!(retry_hint("Please try again in 20ms."), Some(1));
    assert_eq!(retry_hint("Please try again in 6m0s."), Some(360));
    assert_eq!(retry_hint("Please try again in 1m12.5s."), Some(73));
    assert_eq!(retry_hint("Please try again in 1h2m3s"), Some(3723));
    assert_eq!(retry_hint("Please Try Again In 3s"), Some(3));
    assert_eq!(retry_hint("Please try again in a moment."), None);
    assert_eq!(retry_hint("Please try again later."), None);
    assert_eq!(retry_hint("no hint"), None);
}

// ---- parse_models ----

#[test]
fn models_fixtures() {
    assert_eq!(
        parse_models(MODELS.as_bytes()),
        Ok(vec![
            "gpt-4o".to_owned(),
            "gpt-4o-mini".to_owned(),
            "o3-mini".to_owned(),
            "text-embedding-3-small".to_owned()
        ])
    );
    assert_eq!(
        parse_models(MODELS_OLLAMA.as_bytes()),
        Ok(vec!["llama3.2:latest".to_owned(), "qwen3:8b".to_owned(), "deepseek-r1:7b".to_owned()])
    );
}

#[test]
fn models_other_shapes() {
    assert_eq!(
        parse_models(br#"{"models":[{"name":"llama3:latest","model":"llama3:latest"},{"model":"phi4"}]}"#),
        Ok(vec!["llama3:latest".to_owned(), "phi4".to_owned()])
    );
    assert_eq!(parse_models(br#"{"object":"list","data":[]}"#), Ok(vec![]));
    assert_eq!(
        parse_models(br#"{"data":[{"id":"a"},{"object":"model"},{"id":7}]}"#),
        Ok(vec!["a".to_owned()])
    );
    assert!(parse_models(b"nope").is_err());
    assert!(parse_models(br#"{"error":{"message":"x"}}"#).is_err());
}
