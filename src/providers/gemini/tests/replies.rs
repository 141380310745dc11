//! URLs, headers, error bodies, model lists and token counts.

use super::requests::{msg, request, text_part, weather_tool};
use super::*;

// ---- URLs, headers, errors --------------------------------------------------------------

#[test]
fn endpoints() {
    let g = "https://generativelanguage.googleapis.com";
    assert_eq!(
        endpoint(g, "gemini-2.5-flash", true),
        "https://generativelanguage.googleapis.com/v1beta/models/gemini-2.5-flash:streamGenerateContent?alt=sse"
    );
    assert_eq!(
        endpoint(g, "models/gemini-2.5-pro", false),
        "https://generativelanguage.googleapis.com/v1beta/models/gemini-2.5-pro:generateContent"
    );
    for base in [
        "https://generativelanguage.googleapis.com/",
        "https://generativelanguage.googleapis.com/v1beta",
        "https://generativelanguage.googleapis.com/v1beta/",
        " https://generativelanguage.googleapis.com ",
        "",
    ] {
        assert_eq!(
            endpoint(base, "gemini-2.5-flash", false),
            "https://generativelanguage.googleapis.com/v1beta/models/gemini-2.5-flash:generateContent",
            "{base:?}"
        );
    }
    assert_eq!(
        endpoint("https://proxy.example/gemini/v1", "gemini-2.0-flash", false),
        "https://proxy.example/gemini/v1/models/gemini-2.0-flash:generateContent"
    );
    assert_eq!(
        endpoint("http://127.0.0.1:8080/google", "gemini x:y/z?", true),
        "http://127.0.0.1:8080/google/v1beta/models/gemini%20x%3Ay%2Fz%3F:streamGenerateContent?alt=sse"
    );
    assert_eq!(
        endpoint(g, "tunedModels/my-model-123", false),
        "https://generativelanguage.googleapis.com/v1beta/tunedModels/my-model-123:generateContent"
    );
    assert_eq!(models_endpoint(g), "https://generativelanguage.googleapis.com/v1beta/models?pageSize=1000");
    assert_eq!(
        count_tokens_endpoint(g, "models/gemini-2.5-flash"),
        "https://generativelanguage.googleapis.com/v1beta/models/gemini-2.5-flash:countTokens"
    );
}

#[test]
fn api_key_goes_in_a_header_never_in_a_url() {
    let key = "AIzaSyDUMMY-key_0123456789abcdefghijklm";
    assert_eq!(
        headers(&format!(" {key}\n")),
        vec![("x-goog-api-key", key.to_string()), ("content-type", "application/json".to_string())]
    );
    for url in [
        endpoint(DEFAULT_BASE_URL, "gemini-2.5-flash", true),
        endpoint(DEFAULT_BASE_URL, "gemini-2.5-flash", false),
        models_endpoint(DEFAULT_BASE_URL),
        count_tokens_endpoint(DEFAULT_BASE_URL, "gemini-2.5-flash"),
    ] {
        assert!(!url.contains("key"), "{url}");
        assert!(!url.contains(key), "{url}");
    }
}

#[test]
fn rate_limit_error_with_retry_info() {
    let err = parse_error(429, None, ERROR_429_JSON.as_bytes());
    assert_eq!(err.status, 429);
    assert_eq!(err.kind, "RESOURCE_EXHAUSTED");
    assert!(err.retryable);
    assert_eq!(err.retry_after_secs, Some(29));
    assert!(err.message.starts_with("You exceeded your current quota"), "{}", err.message);
    // The header wins over the body; an HTTP-date header falls back to the body.
    assert_eq!(parse_error(429, Some("7"), ERROR_429_JSON.as_bytes()).retry_after_secs, Some(7));
    assert_eq!(parse_error(429, Some(" 1.2 "), ERROR_429_JSON.as_bytes()).retry_after_secs, Some(2));
    assert_eq!(
        parse_error(429, Some("Wed, 21 Oct 2015 07:28:00 GMT"), ERROR_429_JSON.as_bytes()).retry_after_secs,
        Some(29)
    );
    let fractional = json!({"error": {"code": 429, "message": "slow down", "status": "RESOURCE_EXHAUSTED",
        "details": [{"@type": "type.googleapis.com/google.rpc.RetryInfo", "retryDelay": "1.5s"}]}});
    assert_eq!(parse_error(429, None, fractional.to_string().as_bytes()).retry_after_secs, Some(2));
}

#[test]
fn bad_request_error() {
    let err = parse_error(400, None, ERROR_400_JSON.as_bytes());
    assert_eq!(err.status, 400);
    assert_eq!(err.kind, "INVALID_ARGUMENT");
    assert!(!err.retryable);
    assert_eq!(err.retry_after_secs, None);
    assert!(err.message.starts_with("Function call is missing a thought_signature"), "{}", err.message);
}

#[test]
fn error_classification() {
    let body = |code: u16, status: &str| {
        json!({"error": {"code": code, "message": "m", "status": status}}).to_string().into_bytes()
    };
    for (code, status, retryable) in [
        (500, "INTERNAL", true),
        (503, "UNAVAILABLE", true),
        (504, "DEADLINE_EXCEEDED", true),
        (403, "PERMISSION_DENIED", false),
        (404, "NOT_FOUND", false),
        (400, "FAILED_PRECONDITION", false),
    ] {
        let err = parse_error(code, None, &body(code, status));
        assert_eq!((err.status, err.kind.as_str(), err.retryable), (code, status, retryable));
    }
    // Wrapped in an array, as some Google front ends answer.
    let wrapped = format!("[{}]", String::from_utf8_lossy(&body(503, "UNAVAILABLE")));
    let err = parse_error(503, None, wrapped.as_bytes());
    assert_eq!((err.kind.as_str(), err.message.as_str(), err.retryable), ("UNAVAILABLE", "m", true));
    // Not JSON: a proxy's HTML page.
    let err = parse_error(502, None, b"<html><body>Bad Gateway</body></html>");
    assert_eq!(
        err,
        ProviderError {
            status: 502,
            kind: "http_502".into(),
            message: "<html><body>Bad Gateway</body></html>".into(),
            retryable: true,
            retry_after_secs: None,
        }
    );
    let err = parse_error(401, None, b"");
    assert_eq!((err.kind.as_str(), err.retryable), ("http_401", false));
    assert!(err.message.contains("401"));
    let long = "x".repeat(2000);
    let err = parse_error(500, None, long.as_bytes());
    assert_eq!(err.message.chars().count(), MAX_QUOTED_BODY_CHARS + 1);
    // An error object without a status or message.
    let err = parse_error(500, None, br#"{"error": {"code": 500}}"#);
    assert_eq!(err.kind, "http_500");
    assert!(err.message.contains("http_500"));
}

#[test]
fn keys_are_redacted_from_error_messages() {
    let key = "AIzaSyA1b2C3d4E5f6G7h8I9j0KLmnOPqrSTuvw";
    let message = format!(
        "Request to https://generativelanguage.googleapis.com/v1beta/models/x:generateContent?key={key}&alt=sse \
         failed (api_key={key}); raw key {key}, short AIza ok."
    );
    let body = json!({"error": {"code": 400, "message": message, "status": "INVALID_ARGUMENT"}});
    let err = parse_error(400, None, body.to_string().as_bytes());
    assert_eq!(
        err.message,
        "Request to https://generativelanguage.googleapis.com/v1beta/models/x:generateContent?key=***&alt=sse \
         failed (api_key=***); raw key ***, short AIza ok."
    );
    assert!(!err.message.contains(key));
    // Also in non-JSON bodies and in-stream errors.
    let err = parse_error(403, None, format!("denied for KEY={key}").as_bytes());
    assert_eq!(err.message, "denied for KEY=***");
    let chunk =
        json!({"error": {"code": 400, "message": format!("bad ?key={key}"), "status": "INVALID_ARGUMENT"}});
    let (events, _) = decode_chunks(&[chunk]);
    assert_eq!(
        events,
        vec![ProviderEvent::Error(ProviderError {
            status: 400,
            kind: "INVALID_ARGUMENT".into(),
            message: "bad ?key=***".into(),
            retryable: false,
            retry_after_secs: None,
        })]
    );
    assert_eq!(redact_secrets("key= and key=&x and ünïcödé key=ä€"), "key= and key=&x and ünïcödé key=***");
}

// ---- models and token counting ------------------------------------------------------------

#[test]
fn model_list() {
    assert_eq!(
        parse_models(MODELS_JSON.as_bytes()).unwrap(),
        vec!["gemini-2.0-flash", "gemini-2.5-flash", "gemini-2.5-pro"]
    );
    assert_eq!(parse_models(b"{}").unwrap(), Vec::<String>::new());
    assert!(parse_models(b"[]").is_err());
    assert!(parse_models(b"nope").is_err());
    assert!(parse_models(br#"{"models": 3}"#).is_err());
    let err =
        parse_models(br#"{"error": {"code": 403, "message": "no ?key=abc", "status": "PERMISSION_DENIED"}}"#)
            .unwrap_err();
    assert!(err.0.contains("PERMISSION_DENIED") && err.0.contains("key=***") && !err.0.contains("abc"));
}

#[test]
fn token_counting() {
    assert_eq!(parse_count_tokens(COUNT_TOKENS_JSON.as_bytes()), Ok(31));
    assert_eq!(parse_count_tokens(b"{}"), Ok(0));
    assert!(parse_count_tokens(br#"{"totalTokens": -1}"#).is_err());
    assert!(parse_count_tokens(br#"{"totalTokens": "31"}"#).is_err());
    assert!(
        parse_count_tokens(br#"{"error": {"code": 400, "message": "m", "status": "INVALID_ARGUMENT"}}"#)
            .is_err()
    );

    let req = ChatRequest {
        model: "models/gemini-2.5-flash".into(),
        system: Some("Be brief.".into()),
        tools: vec![weather_tool()],
        params: GenParams { temperature: Some(1.0), ..Default::default() },
        ..request(vec![msg(ChatRole::User, vec![text_part("Hello")])])
    };
    let body = build_count_tokens(&req);
    let full = build_request(&req);
    assert_eq!(
        body,
        json!({"generateContentRequest": {
            "model": "models/gemini-2.5-flash",
            "contents": full["contents"],
            "systemInstruction": full["systemInstruction"],
            "tools": full["tools"]
        }})
    );
    let bare = ChatRequest { model: "gemini-2.5-flash".into(), ..req };
    assert_eq!(
        build_count_tokens(&bare)["generateContentRequest"]["model"],
        json!("models/gemini-2.5-flash")
    );
}
