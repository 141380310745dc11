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
