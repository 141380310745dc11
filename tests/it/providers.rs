//! Wire formats over real HTTP: each provider's request goes to the mock upstream, and its
//! streamed answer comes back through the SSE parser and that provider's decoder.

use arbor::providers::sse::SseParser;
use arbor::providers::types::{
    ChatMessage, ChatRequest, ChatRole, FinishReason, GenParams, Part, ProviderEvent,
};
use arbor::providers::{anthropic, openai};
use futures_util::StreamExt;

use crate::support::init_crypto;
use crate::support::mock_upstream::{self, Provider, Reply};

fn request() -> ChatRequest {
    ChatRequest {
        model: "test-model".into(),
        system: Some("Be brief.".into()),
        messages: vec![ChatMessage {
            role: ChatRole::User,
            parts: vec![Part::Text { text: "Hello".into() }],
        }],
        tools: vec![],
        params: GenParams::default(),
        passthrough: None,
    }
}

/// Streams a response body through the SSE parser, in the chunks the network delivered.
async fn events_of(
    res: reqwest::Response,
    mut on_event: impl FnMut(&arbor::providers::sse::SseEvent) -> Vec<ProviderEvent>,
) -> Vec<ProviderEvent> {
    let mut parser = SseParser::new();
    let mut out = Vec::new();
    let mut body = res.bytes_stream();
    while let Some(chunk) = body.next().await {
        for ev in parser.push(&chunk.unwrap()) {
            out.extend(on_event(&ev));
        }
    }
    out
}

fn text_of(events: &[ProviderEvent]) -> String {
    events
        .iter()
        .filter_map(|e| if let ProviderEvent::TextDelta(t) = e { Some(t.as_str()) } else { None })
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn openai_streams_over_http() {
    init_crypto();
    let mock = mock_upstream::start().await.unwrap();
    mock.enqueue(
        Provider::OpenAi,
        Reply::Fixture { path: "openai/text.sse".into(), chunk_delay_ms: 2, first_byte_delay_ms: 0 },
    );
    let client = reqwest::Client::new();
    let res = client
        .post(openai::endpoint(&mock.url(Provider::OpenAi)))
        .bearer_auth("sk-test")
        .json(&openai::build_request(&request(), true))
        .send()
        .await
        .unwrap();
    assert_eq!(res.status(), 200);
    let mut decoder = openai::StreamDecoder::new();
    let mut events = events_of(res, |ev| decoder.on_event(ev).unwrap()).await;
    events.extend(decoder.finish().unwrap());
    assert!(!text_of(&events).is_empty());
    assert!(events.iter().any(|e| matches!(e, ProviderEvent::Usage(_))));
    // OpenAI sends its usage chunk after the one carrying `finish_reason`.
    assert!(events.iter().any(|e| matches!(e, ProviderEvent::Finish(FinishReason::Stop))), "{events:?}");
    let sent = &mock.requests()[0];
    assert_eq!(sent.header("authorization"), Some("Bearer sk-test"));
    let body = sent.json().unwrap();
    assert_eq!(body["stream"], true);
    assert_eq!(body["stream_options"]["include_usage"], true);
    assert_eq!(body["messages"][0]["role"], "system");
    assert!(mock.problems().is_empty(), "{:?}", mock.problems());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn anthropic_streams_thinking_over_http() {
    init_crypto();
    let mock = mock_upstream::start().await.unwrap();
    mock.enqueue(
        Provider::Anthropic,
        Reply::Fixture { path: "anthropic/thinking.sse".into(), chunk_delay_ms: 1, first_byte_delay_ms: 0 },
    );
    let client = reqwest::Client::new();
    let mut req = client.post(anthropic::endpoint(&mock.url(Provider::Anthropic)));
    for (k, v) in anthropic::headers("sk-ant-test") {
        req = req.header(k, v);
    }
    let res = req.json(&anthropic::build_request(&request(), true)).send().await.unwrap();
    assert_eq!(res.status(), 200);
    let mut decoder = anthropic::StreamDecoder::new();
    let mut events = events_of(res, |ev| decoder.on_event(ev).unwrap()).await;
    events.extend(decoder.finish().unwrap());
    assert!(events.iter().any(|e| matches!(e, ProviderEvent::ThoughtDelta(_))));
    assert!(events.iter().any(|e| matches!(e, ProviderEvent::ThoughtSignature(s) if !s.is_empty())));
    assert!(!text_of(&events).is_empty());
    let sent = &mock.requests()[0];
    assert_eq!(sent.header("x-api-key"), Some("sk-ant-test"));
    assert_eq!(sent.header("anthropic-version"), Some(anthropic::API_VERSION));
    assert_eq!(sent.json().unwrap()["system"], "Be brief.");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_connection_reset_mid_stream_is_not_a_complete_answer() {
    init_crypto();
    let mock = mock_upstream::start().await.unwrap();
    mock.enqueue(
        Provider::OpenAi,
        Reply::ResetAfterEvents { path: "openai/many_small_chunks.sse".into(), events: 5 },
    );
    let res = reqwest::Client::new()
        .post(openai::endpoint(&mock.url(Provider::OpenAi)))
        .json(&openai::build_request(&request(), true))
        .send()
        .await
        .unwrap();
    let mut parser = SseParser::new();
    let mut decoder = openai::StreamDecoder::new();
    let mut body = res.bytes_stream();
    let mut transport_failed = false;
    while let Some(chunk) = body.next().await {
        match chunk {
            Ok(bytes) => {
                for ev in parser.push(&bytes) {
                    decoder.on_event(&ev).unwrap();
                }
            }
            Err(_) => transport_failed = true,
        }
    }
    assert!(transport_failed, "the reset surfaces as a transport error");
    assert!(decoder.finish().is_err(), "and the decoder refuses to call it complete");
}

mod retries {
    use std::time::Duration;

    use arbor::providers::client::{Endpoint, ProviderClient, RetryPolicy, WireFormat};
    use arbor::providers::types::ProviderEvent;
    use arbor::secret::Secret;
    use futures_util::StreamExt;

    use super::{request, text_of};
    use crate::support::init_crypto;
    use crate::support::mock_upstream::{self, MockUpstream, Provider, Reply};

    const KEY: &str = "sk-ARBOR-CANARY-7f3a";

    fn client(idle_ms: u64) -> ProviderClient {
        ProviderClient::new(Duration::from_secs(5), Duration::from_millis(idle_ms)).unwrap()
    }

    fn openai(mock: &MockUpstream) -> Endpoint {
        Endpoint {
            format: WireFormat::OpenAi,
            base_url: mock.url(Provider::OpenAi),
            api_key: Secret::new(KEY),
            reasoning_via_responses: false,
        }
    }

    fn fast() -> RetryPolicy {
        RetryPolicy {
            max_attempts: 3,
            base_delay: Duration::from_millis(10),
            max_delay: Duration::from_secs(5),
        }
    }

    fn json(status: u16, body: &str, headers: &[(&str, &str)]) -> Reply {
        Reply::Json {
            status,
            headers: headers.iter().map(|(k, v)| (k.to_string(), v.to_string())).collect(),
            body: body.into(),
        }
    }

    async fn collect(s: arbor::providers::client::EventStream) -> Vec<ProviderEvent> {
        s.collect().await
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn a_429_is_retried_after_its_retry_after() {
        init_crypto();
        let mock = mock_upstream::start().await.unwrap();
        let body = mock.fixture_text("openai/error_429.json").unwrap();
        mock.enqueue(Provider::OpenAi, json(429, &body, &[("retry-after", "1")]));
        mock.enqueue(Provider::OpenAi, Reply::fixture("openai/text.sse"));
        let started = std::time::Instant::now();
        let events = collect(client(5000).stream(&openai(&mock), &request(), &fast()).await.unwrap()).await;
        assert!(started.elapsed() >= Duration::from_secs(1), "retry-after honoured");
        assert!(!text_of(&events).is_empty());
        assert_eq!(mock.requests().len(), 2);
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn server_errors_and_resets_before_the_first_token_are_retried() {
        init_crypto();
        let mock = mock_upstream::start().await.unwrap();
        mock.enqueue(
            Provider::OpenAi,
            json(500, r#"{"error":{"message":"boom","type":"server_error"}}"#, &[]),
        );
        mock.enqueue(Provider::OpenAi, Reply::ResetAfterEvents { path: "openai/text.sse".into(), events: 1 });
        mock.enqueue(Provider::OpenAi, Reply::fixture("openai/text.sse"));
        let events = collect(client(5000).stream(&openai(&mock), &request(), &fast()).await.unwrap()).await;
        assert!(!text_of(&events).is_empty());
        assert!(!events.iter().any(|e| matches!(e, ProviderEvent::Error(_))));
        assert_eq!(mock.requests().len(), 3);
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn client_errors_are_not_retried_and_keys_are_redacted() {
        init_crypto();
        let mock = mock_upstream::start().await.unwrap();
        let echo = format!(
            r#"{{"error":{{"message":"Incorrect API key provided: {KEY}","type":"invalid_request_error","code":"invalid_api_key"}}}}"#
        );
        mock.enqueue(Provider::OpenAi, json(401, &echo, &[]));
        let Err(err) = client(5000).stream(&openai(&mock), &request(), &fast()).await else {
            panic!("a 401 is an error")
        };
        assert_eq!(err.status, 401);
        assert!(!err.retryable);
        assert!(!err.message.contains(KEY), "{}", err.message);
        assert_eq!(mock.requests().len(), 1);
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn errors_after_the_first_token_end_the_stream_without_a_retry() {
        init_crypto();
        let mock = mock_upstream::start().await.unwrap();
        mock.enqueue(Provider::OpenAi, Reply::fixture("openai/error_midstream.sse"));
        mock.enqueue(Provider::OpenAi, Reply::fixture("openai/text.sse"));
        let events = collect(client(5000).stream(&openai(&mock), &request(), &fast()).await.unwrap()).await;
        assert!(!text_of(&events).is_empty(), "the text before the error is kept");
        assert!(matches!(events.last(), Some(ProviderEvent::Error(_))), "{events:?}");
        assert_eq!(mock.requests().len(), 1, "never retried once text was produced");
        assert_eq!(mock.pending(Provider::OpenAi), 1);
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn giving_up_returns_the_last_error() {
        init_crypto();
        let mock = mock_upstream::start().await.unwrap();
        for _ in 0..3 {
            mock.enqueue(
                Provider::OpenAi,
                json(503, r#"{"error":{"message":"overloaded","type":"server_error"}}"#, &[]),
            );
        }
        let Err(err) = client(5000).stream(&openai(&mock), &request(), &fast()).await else {
            panic!("gives up")
        };
        assert_eq!(err.status, 503);
        assert_eq!(mock.requests().len(), 3);
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn a_stalled_stream_times_out_after_the_idle_timeout() {
        init_crypto();
        let mock = mock_upstream::start().await.unwrap();
        let first = "data: {\"id\":\"c1\",\"object\":\"chat.completion.chunk\",\"created\":1,\"model\":\"m\",\"choices\":[{\"index\":0,\"delta\":{\"content\":\"Hi\"},\"finish_reason\":null}]}\n\n";
        let second = "data: {\"id\":\"c1\",\"object\":\"chat.completion.chunk\",\"created\":1,\"model\":\"m\",\"choices\":[{\"index\":0,\"delta\":{},\"finish_reason\":\"stop\"}]}\n\ndata: [DONE]\n\n";
        mock.enqueue(
            Provider::OpenAi,
            Reply::Sse { events: vec![first.into(), second.into()], chunk_delay_ms: 1500 },
        );
        let events = collect(client(200).stream(&openai(&mock), &request(), &fast()).await.unwrap()).await;
        assert_eq!(text_of(&events), "Hi");
        assert!(matches!(events.last(), Some(ProviderEvent::Error(e)) if e.kind == "timeout"), "{events:?}");
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn a_provider_that_never_answers_times_out_and_is_retried() {
        init_crypto();
        let mock = mock_upstream::start().await.unwrap();
        for _ in 0..3 {
            mock.enqueue(Provider::OpenAi, Reply::Hang);
        }
        let Err(err) = client(200).stream(&openai(&mock), &request(), &fast()).await else {
            panic!("no status line within the idle timeout is an error")
        };
        assert_eq!(err.kind, "timeout", "{err:?}");
        assert!(err.retryable);
        assert_eq!(mock.requests().len(), 3, "each silent attempt was abandoned and retried");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn gemini_streams_function_calls_through_the_client_with_the_key_in_a_header() {
    use arbor::providers::client::{Endpoint, ProviderClient, RetryPolicy, WireFormat};
    init_crypto();
    let mock = mock_upstream::start().await.unwrap();
    mock.enqueue(Provider::Gemini, Reply::fixture("gemini/function_calls_parallel.sse"));
    let ep = Endpoint {
        format: WireFormat::Gemini,
        base_url: mock.url(Provider::Gemini),
        api_key: arbor::secret::Secret::new("AIza-test-key-0123"),
        reasoning_via_responses: false,
    };
    let client =
        ProviderClient::new(std::time::Duration::from_secs(5), std::time::Duration::from_secs(5)).unwrap();
    let events: Vec<ProviderEvent> =
        client.stream(&ep, &request(), &RetryPolicy::default()).await.unwrap().collect().await;
    let calls = events.iter().filter(|e| matches!(e, ProviderEvent::ToolCall { .. })).count();
    assert_eq!(calls, 2, "{events:?}");
    assert!(events.iter().any(|e| matches!(e, ProviderEvent::Finish(FinishReason::ToolCalls))));
    let sent = &mock.requests()[0];
    assert_eq!(sent.header("x-goog-api-key"), Some("AIza-test-key-0123"));
    assert!(!sent.path.contains("key="), "never in the URL: {}", sent.path);
    assert!(sent.path.contains(":streamGenerateContent?alt=sse"));
}

/// A provider cannot make Arbor hold an answer without bound: a whole answer past 96 MiB is
/// refused (by its Content-Length before reading, or as it streams in chunks without one), and
/// an error body is read only as far as its first 64 KiB.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn oversized_answers_from_a_provider_are_refused_without_being_held() {
    use arbor::providers::client::{Endpoint, ProviderClient, WireFormat};
    init_crypto();
    let mock = mock_upstream::start().await.unwrap();
    let ep = Endpoint {
        format: WireFormat::OpenAi,
        base_url: mock.url(Provider::OpenAi),
        api_key: arbor::secret::Secret::new("sk-test-0123"),
        reasoning_via_responses: false,
    };
    let client =
        ProviderClient::new(std::time::Duration::from_secs(5), std::time::Duration::from_secs(30)).unwrap();
    let huge = format!("{{\"data\": [], \"pad\": \"{}\"}}", "x".repeat(100 * 1024 * 1024));
    // With a Content-Length: refused before the body is read.
    mock.enqueue(Provider::OpenAi, Reply::json(200, huge.clone()));
    let e = client.list_models(&ep).await.expect_err("refused");
    assert_eq!(e.kind, "too_large", "{e:?}");
    // Chunked, without a length: refused once it passes the cap.
    let chunks: Vec<String> =
        huge.as_bytes().chunks(1024 * 1024).map(|c| String::from_utf8_lossy(c).into_owned()).collect();
    mock.enqueue(Provider::OpenAi, Reply::Sse { events: chunks, chunk_delay_ms: 0 });
    let e = client.list_models(&ep).await.expect_err("refused");
    assert_eq!(e.kind, "too_large", "{e:?}");
    // A 20 MiB error body: the error is still reported, from its start.
    let error = format!(
        "{{\"error\": {{\"message\": \"overloaded {}\", \"type\": \"server_error\"}}}}",
        "y".repeat(20 * 1024 * 1024)
    );
    mock.enqueue(Provider::OpenAi, Reply::json(503, error));
    let e = client.list_models(&ep).await.expect_err("an error");
    assert_eq!(e.status, 503, "{e:?}");
    assert!(e.message.len() < 70 * 1024, "the message is bounded: {} bytes", e.message.len());
}
