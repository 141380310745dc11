use super::super::sse::SseParser;
use chrono::{DateTime, Utc};

use super::*;

const TEXT: &str = include_str!("../../../tests/fixtures/providers/openai/text.sse");
const MANY_SMALL_CHUNKS: &str =
    include_str!("../../../tests/fixtures/providers/openai/many_small_chunks.sse");
const REASONING_DEEPSEEK: &str =
    include_str!("../../../tests/fixtures/providers/openai/reasoning_deepseek.sse");
const TOOL_CALLS_PARALLEL: &str =
    include_str!("../../../tests/fixtures/providers/openai/tool_calls_parallel.sse");
const ERROR_MIDSTREAM: &str = include_str!("../../../tests/fixtures/providers/openai/error_midstream.sse");
const TRUNCATED: &str = include_str!("../../../tests/fixtures/providers/openai/truncated.sse");
const NONSTREAM_TEXT: &str = include_str!("../../../tests/fixtures/providers/openai/nonstream_text.json");
const ERROR_400: &str = include_str!("../../../tests/fixtures/providers/openai/error_400.json");
const ERROR_429: &str = include_str!("../../../tests/fixtures/providers/openai/error_429.json");
const MODELS: &str = include_str!("../../../tests/fixtures/providers/openai/models.json");
const MODELS_OLLAMA: &str = include_str!("../../../tests/fixtures/providers/openai/models_ollama.json");

/// The text of `many_small_chunks.sse`, one chunk per word (the fixture was made from it).
const MANY_WORDS: &str = "Streaming sends a response in many small pieces so that a reader sees the \
    first words long before the model has finished writing the last ones. Each piece arrives as \
    its own server sent event with a tiny JSON object inside, and the client must glue the \
    pieces back together in order without losing a single character or adding one that was \
    never sent. Networks split and merge those events freely, so a careful parser keeps \
    whatever bytes it has not yet understood and waits patiently for the rest before it acts. \
    This paragraph has more than one hundred words, which makes it a fair test of that \
    patience and of the bookkeeping behind it, done right.";

/// A fixed pseudo-random sequence of chunk sizes from 0 to 23 bytes (xorshift64*).
struct Splitter(u64);

impl Splitter {
    fn next_len(&mut self) -> usize {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        (self.0.wrapping_mul(0x2545_F491_4F6C_DD1D) >> 59) as usize % 24
    }
}

/// Feeds `raw` through the SSE parser and the decoder in pseudo-random chunks.
fn decode_with_seed(raw: &str, seed: u64) -> Result<Vec<ProviderEvent>, StreamParseError> {
    let mut splitter = Splitter(seed.wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1);
    let mut parser = SseParser::new();
    let mut decoder = StreamDecoder::new();
    let mut out = Vec::new();
    let mut rest = raw.as_bytes();
    while !rest.is_empty() {
        let (chunk, tail) = rest.split_at(splitter.next_len().min(rest.len()));
        rest = tail;
        for event in parser.push(chunk) {
            out.extend(decoder.on_event(&event)?);
        }
    }
    for event in parser.finish() {
        out.extend(decoder.on_event(&event)?);
    }
    out.extend(decoder.finish()?);
    Ok(out)
}

/// Decodes `raw` whole and with 40 different split sequences; all must agree.
fn decode_fixture(raw: &str) -> Result<Vec<ProviderEvent>, StreamParseError> {
    let whole = decode_with_seed(raw, 0);
    for seed in 1..=40 {
        assert_eq!(decode_with_seed(raw, seed), whole, "split sequence {seed}");
    }
    whole
}

fn text(s: &str) -> ProviderEvent {
    ProviderEvent::TextDelta(s.to_owned())
}

fn thought(s: &str) -> ProviderEvent {
    ProviderEvent::ThoughtDelta(s.to_owned())
}

fn usage(input: u64, output: u64, cached: u64) -> ProviderEvent {
    ProviderEvent::Usage(Usage {
        input_tokens: input,
        output_tokens: output,
        cached_input_tokens: cached,
        cache_written_input_tokens: 0,
    })
}

fn message(data: &str) -> SseEvent {
    SseEvent { event: "message".into(), data: data.into(), id: None }
}

/// Runs JSON chunks (and `[DONE]`) through a fresh decoder.
fn decode_chunks(chunks: &[&str]) -> Result<Vec<ProviderEvent>, StreamParseError> {
    let mut decoder = StreamDecoder::new();
    let mut out = Vec::new();
    for chunk in chunks {
        out.extend(decoder.on_event(&message(chunk))?);
    }
    out.extend(decoder.finish()?);
    Ok(out)
}

// ---- fixtures through SseParser + StreamDecoder ----

#[test]
fn fixture_text() {
    assert_eq!(
        decode_fixture(TEXT),
        Ok(vec![
            text("Hello"),
            text("!"),
            text(" How"),
            text(" can"),
            text(" I"),
            text(" help"),
            text(" you"),
            text(" today"),
            text("?"),
            text(" \u{1F44B}"),
            ProviderEvent::Finish(FinishReason::Stop),
            usage(1290, 11, 1152),
        ])
    );
}

#[test]
fn fixture_many_small_chunks() {
    let words: Vec<&str> = MANY_WORDS.split_whitespace().collect();
    assert!(words.len() >= 100, "{} words", words.len());
    let mut expected: Vec<ProviderEvent> = words
        .iter()
        .enumerate()
        .map(|(i, word)| if i == 0 { text(word) } else { text(&format!(" {word}")) })
        .collect();
    expected.push(ProviderEvent::Finish(FinishReason::Stop));
    expected.push(usage(41, words.len() as u64, 0));
    let events = decode_fixture(MANY_SMALL_CHUNKS);
    assert_eq!(events, Ok(expected));
}

#[test]
fn fixture_reasoning_deepseek() {
    assert_eq!(
        decode_fixture(REASONING_DEEPSEEK),
        Ok(vec![
            thought("Okay"),
            thought(", the user"),
            thought(" asks which is greater: 9.11 or 9.8."),
            thought(" Compare the tenths: 1 < 8,"),
            thought(" so 9.8 is greater."),
            text("**9.8"),
            text("** is greater"),
            text(" than 9.11."),
            ProviderEvent::Finish(FinishReason::Stop),
            usage(76, 51, 64),
        ])
    );
}

#[test]
fn fixture_tool_calls_parallel() {
    assert_eq!(
        decode_fixture(TOOL_CALLS_PARALLEL),
        Ok(vec![
            ProviderEvent::ToolCall {
                id: "call_8HkQbX2mZr4TnVe1yJcW5sLd".into(),
                name: "get_weather".into(),
                arguments: json!({ "location": "Paris, France", "unit": "celsius" }),
                signature: None,
            },
            ProviderEvent::ToolCall {
                id: "call_Qm3vT9pLx7RcYa2NwEk6HjUf".into(),
                name: "get_local_time".into(),
                arguments: json!({ "timezone": "Asia/Tokyo" }),
                signature: None,
            },
            ProviderEvent::Finish(FinishReason::ToolCalls),
            usage(142, 58, 0),
        ])
    );
}

#[test]
fn fixture_error_midstream() {
    assert_eq!(
        decode_fixture(ERROR_MIDSTREAM),
        Ok(vec![
            text("The"),
            text(" answer"),
            text(" is"),
            ProviderEvent::Error(ProviderError {
                status: 0,
                kind: "server_error".into(),
                message: "The server had an error while processing your request. Sorry about that!".into(),
                retryable: true,
                retry_after_secs: None,
            }),
        ])
    );
}

#[test]
fn fixture_truncated_stream_is_an_error() {
    for seed in 0..=40 {
        let result = decode_with_seed(TRUNCATED, seed);
        let Err(StreamParseError(message)) = result else {
            panic!("seed {seed}: a truncated stream decoded as complete: {result:?}");
        };
        assert!(message.contains("truncated"), "{message}");
    }
    // Before the end, the text that did arrive came through.
    let mut parser = SseParser::new();
    let mut decoder = StreamDecoder::new();
    let mut events = Vec::new();
    for event in parser.push(TRUNCATED.as_bytes()) {
        events.extend(decoder.on_event(&event).unwrap());
    }
    assert_eq!(events, vec![text("Once"), text(" upon"), text(" a"), text(" time")]);
    assert!(decoder.finish().is_err());
}

#[test]
fn fixtures_use_documented_framing() {
    for raw in [TEXT, MANY_SMALL_CHUNKS, REASONING_DEEPSEEK, TOOL_CALLS_PARALLEL] {
        assert!(raw.ends_with("data: [DONE]\n\n"));
        assert!(raw.contains("\"choices\":[],\"usage\":{"));
    }
    for raw in [ERROR_MIDSTREAM, TRUNCATED] {
        assert!(!raw.contains("[DONE]"));
    }
    assert!(!TRUNCATED.contains("finish_reason\":\""));
}

// ---- StreamDecoder details ----

#[test]
fn reasoning_field_of_openrouter_and_ollama() {
    let events = decode_chunks(&[
        r#"{"id":"gen-1","choices":[{"index":0,"delta":{"role":"assistant","content":"","reasoning":"Let me"}}]}"#,
        r#"{"id":"gen-1","choices":[{"index":0,"delta":{"content":"","reasoning":" think."}}]}"#,
        r#"{"id":"gen-1","choices":[{"index":0,"delta":{"content":"Hi"},"finish_reason":"stop"}]}"#,
        "[DONE]",
    ]);
    assert_eq!(
        events,
        Ok(vec![
            thought("Let me"),
            thought(" think."),
            text("Hi"),
            ProviderEvent::Finish(FinishReason::Stop)
        ])
    );
}

#[test]
fn reasoning_sent_under_both_names_is_taken_once() {
    let events = decode_chunks(&[
        r#"{"choices":[{"index":0,"delta":{"reasoning_content":"a","reasoning":"a"}}]}"#,
        r#"{"choices":[{"index":0,"delta":{"reasoning_content":null,"reasoning":"b"}}]}"#,
        r#"{"choices":[{"index":0,"delta":{},"finish_reason":"stop"}]}"#,
    ]);
    assert_eq!(events, Ok(vec![thought("a"), thought("b"), ProviderEvent::Finish(FinishReason::Stop)]));
}

#[test]
fn finish_reasons() {
    for (raw, reason) in [
        ("stop", FinishReason::Stop),
        ("length", FinishReason::Length),
        ("tool_calls", FinishReason::ToolCalls),
        ("content_filter", FinishReason::ContentFilter),
        ("function_call", FinishReason::Other("function_call".into())),
        ("error", FinishReason::Other("error".into())),
    ] {
        let chunk = format!(r#"{{"choices":[{{"index":0,"delta":{{}},"finish_reason":"{raw}"}}]}}"#);
        assert_eq!(decode_chunks(&[&chunk]), Ok(vec![ProviderEvent::Finish(reason)]));
    }
}

#[test]
fn usage_in_the_finish_chunk_comes_after_finish() {
    let events = decode_chunks(&[
        r#"{"choices":[{"index":0,"delta":{"content":"x"},"finish_reason":"stop"}],"usage":{"prompt_tokens":3,"completion_tokens":1,"total_tokens":4}}"#,
        "[DONE]",
    ]);
    assert_eq!(events, Ok(vec![text("x"), ProviderEvent::Finish(FinishReason::Stop), usage(3, 1, 0)]));
}

#[test]
fn done_without_finish_reason_makes_one_up() {
    assert_eq!(
        decode_chunks(&[r#"{"choices":[{"index":0,"delta":{"content":"x"}}]}"#, "[DONE]"]),
        Ok(vec![text("x"), ProviderEvent::Finish(FinishReason::Stop)])
    );
    let events = decode_chunks(&[
        r#"{"id":"c1","choices":[{"index":0,"delta":{"tool_calls":[{"index":0,"function":{"name":"f","arguments":"{}"}}]}}]}"#,
        "[DONE]",
    ]);
    assert_eq!(
        events,
        Ok(vec![
            ProviderEvent::ToolCall {
                id: "call_c1_0".into(),
                name: "f".into(),
                arguments: json!({}),
                signature: None
            },
            ProviderEvent::Finish(FinishReason::ToolCalls),
        ])
    );
}

#[test]
fn finish_reason_without_done_is_complete() {
    assert_eq!(
        decode_chunks(&[r#"{"choices":[{"index":0,"delta":{"content":"x"},"finish_reason":"length"}]}"#]),
        Ok(vec![text("x"), ProviderEvent::Finish(FinishReason::Length)])
    );
}

#[test]
fn stream_without_end_is_an_error() {
    assert!(decode_chunks(&[r#"{"choices":[{"index":0,"delta":{"content":"x"}}]}"#]).is_err());
    assert!(StreamDecoder::new().finish().is_err());
}

#[test]
fn events_after_done_are_ignored() {
    assert_eq!(
        decode_chunks(&["[DONE]", r#"{"choices":[{"index":0,"delta":{"content":"late"}}]}"#, "not json"]),
        Ok(vec![ProviderEvent::Finish(FinishReason::Stop)])
    );
}

#[test]
fn tool_call_whole_in_one_fragment_and_missing_pieces() {
    // Ollama and others send each call whole; no index falls back on the position.
    let events = decode_chunks(&[
        r#"{"choices":[{"index":0,"delta":{"tool_calls":[{"id":"a","type":"function","function":{"name":"one","arguments":"{\"x\":1}"}},{"id":"b","type":"function","function":{"name":"two","arguments":""}}]},"finish_reason":"tool_calls"}]}"#,
    ]);
    assert_eq!(
        events,
        Ok(vec![
            ProviderEvent::ToolCall {
                id: "a".into(),
                name: "one".into(),
                arguments: json!({"x": 1}),
                signature: None
            },
            ProviderEvent::ToolCall {
                id: "b".into(),
                name: "two".into(),
                arguments: json!({}),
                signature: None
            },
            ProviderEvent::Finish(FinishReason::ToolCalls),
        ])
    );
}

#[test]
fn tool_call_ids_and_names_repeated_or_null_later() {
    let events = decode_chunks(&[
        r#"{"choices":[{"index":0,"delta":{"tool_calls":[{"index":0,"id":"call_1","type":"function","function":{"name":"search","arguments":""}}]}}]}"#,
        r#"{"choices":[{"index":0,"delta":{"tool_calls":[{"index":0,"id":null,"type":null,"function":{"name":null,"arguments":"{\"q\":"}}]}}]}"#,
        r#"{"choices":[{"index":0,"delta":{"tool_calls":[{"index":0,"id":"call_1","function":{"name":"search","arguments":"\"rust\"}"}}]}}]}"#,
        r#"{"choices":[{"index":0,"delta":{},"finish_reason":"tool_calls"}]}"#,
    ]);
    assert_eq!(
        events,
        Ok(vec![
            ProviderEvent::ToolCall {
                id: "call_1".into(),
                name: "search".into(),
                arguments: json!({"q": "rust"}),
                signature: None
            },
            ProviderEvent::Finish(FinishReason::ToolCalls),
        ])
    );
}

#[test]
fn malformed_tool_arguments_are_kept_as_a_string() {
    let events = decode_chunks(&[
        r#"{"choices":[{"index":0,"delta":{"tool_calls":[{"index":0,"id":"c","function":{"name":"f","arguments":"{\"a\": 1,"}}]}}]}"#,
        r#"{"choices":[{"index":0,"delta":{},"finish_reason":"length"}]}"#,
    ]);
    assert_eq!(
        events,
        Ok(vec![
            ProviderEvent::ToolCall {
                id: "c".into(),
                name: "f".into(),
                arguments: Value::String("{\"a\": 1,".into()),
                signature: None
            },
            ProviderEvent::Finish(FinishReason::Length),
        ])
    );
}

#[test]
fn text_and_tool_calls_in_one_answer() {
    let events = decode_chunks(&[
        r#"{"choices":[{"index":0,"delta":{"role":"assistant","content":"Checking."}}]}"#,
        r#"{"choices":[{"index":0,"delta":{"tool_calls":[{"index":0,"id":"c","type":"function","function":{"name":"f","arguments":"{}"}}]}}]}"#,
        r#"{"choices":[{"index":0,"delta":{},"finish_reason":"tool_calls"}],"usage":null}"#,
        r#"{"choices":[],"usage":{"prompt_tokens":9,"completion_tokens":4,"prompt_tokens_details":{"cached_tokens":0}}}"#,
        "[DONE]",
    ]);
    assert_eq!(
        events,
        Ok(vec![
            text("Checking."),
            ProviderEvent::ToolCall {
                id: "c".into(),
                name: "f".into(),
                arguments: json!({}),
                signature: None
            },
            ProviderEvent::Finish(FinishReason::ToolCalls),
            usage(9, 4, 0),
        ])
    );
}

#[test]
fn refusal_is_text() {
    assert_eq!(
        decode_chunks(&[
            r#"{"choices":[{"index":0,"delta":{"refusal":"I can't help with that."},"finish_reason":"stop"}]}"#
        ]),
        Ok(vec![text("I can't help with that."), ProviderEvent::Finish(FinishReason::Stop)])
    );
}

#[test]
fn choice_with_index_zero_is_used() {
    assert_eq!(
        decode_chunks(&[
            r#"{"choices":[{"index":1,"delta":{"content":"other"}},{"index":0,"delta":{"content":"mine"},"finish_reason":"stop"}]}"#
        ]),
        Ok(vec![text("mine"), ProviderEvent::Finish(FinishReason::Stop)])
    );
}

#[test]
fn in_stream_error_shapes() {
    // vLLM: numeric code is the HTTP status.
    let events = decode_chunks(&[
        r#"{"error":{"object":"error","message":"Request too large","type":"BadRequestError","param":null,"code":400}}"#,
    ]);
    assert_eq!(
        events,
        Ok(vec![ProviderEvent::Error(ProviderError {
            status: 400,
            kind: "BadRequestError".into(),
            message: "Request too large".into(),
            retryable: false,
            retry_after_secs: None,
        })])
    );
    // OpenRouter: error next to a `finish_reason: "error"` choice; the error wins, the stream is over.
    let events = decode_chunks(&[
        r#"{"id":"gen-1","object":"chat.completion.chunk","created":1,"model":"m","error":{"code":"server_error","message":"Provider disconnected unexpectedly"},"choices":[{"index":0,"delta":{"content":""},"finish_reason":"error"}]}"#,
        r#"{"choices":[{"index":0,"delta":{"content":"ignored"}}]}"#,
    ]);
    assert_eq!(
        events,
        Ok(vec![ProviderEvent::Error(ProviderError {
            status: 0,
            kind: "server_error".into(),
            message: "Provider disconnected unexpectedly".into(),
            retryable: true,
            retry_after_secs: None,
        })])
    );
    // A bare string error, and a rate limit with a hint.
    assert_eq!(
        decode_chunks(&[r#"{"error":"model not loaded"}"#]),
        Ok(vec![ProviderEvent::Error(ProviderError {
            status: 0,
            kind: "error".into(),
            message: "model not loaded".into(),
            retryable: false,
            retry_after_secs: None,
        })])
    );
    assert_eq!(
        decode_chunks(&[
            r#"{"error":{"message":"Rate limit reached. Please try again in 20ms.","type":"tokens","code":"rate_limit_exceeded"}}"#
        ]),
        Ok(vec![ProviderEvent::Error(ProviderError {
            status: 0,
            kind: "rate_limit_exceeded".into(),
            message: "Rate limit reached. Please try again in 20ms.".into(),
            retryable: true,
            retry_after_secs: Some(1),
        })])
    );
}

#[test]
fn error_after_partial_tool_call_drops_it() {
    let events = decode_chunks(&[
        r#"{"choices":[{"index":0,"delta":{"tool_calls":[{"index":0,"id":"c","function":{"name":"f","arguments":"{\"a"}}]}}]}"#,
        r#"{"error":{"message":"boom","type":"server_error"}}"#,
    ]);
    assert!(matches!(events.as_deref(), Ok([ProviderEvent::Error(_)])), "{events:?}");
}

#[test]
fn malformed_chunks_are_errors() {
    let mut decoder = StreamDecoder::new();
    assert!(decoder.on_event(&message("{not json")).is_err());
    assert!(decoder.on_event(&message("[1,2]")).is_err());
    assert!(decoder.on_event(&message(r#"{"choices":{}}"#)).is_err());
    assert!(decoder.on_event(&message(r#"{"choices":[{"delta":{"tool_calls":{}}}]}"#)).is_err());
    assert!(decoder.on_event(&message(r#"{"choices":[{"delta":{"tool_calls":[7]}}]}"#)).is_err());
    assert!(decoder.on_event(&message(r#"{"choices":[],"usage":7}"#)).is_err());
}

#[test]
fn empty_and_unknown_chunks_are_ignored() {
    let mut decoder = StreamDecoder::new();
    assert_eq!(decoder.on_event(&message("")), Ok(vec![]));
    assert_eq!(decoder.on_event(&message("  ")), Ok(vec![]));
    assert_eq!(decoder.on_event(&message(r#"{"object":"chat.completion.chunk"}"#)), Ok(vec![]));
    assert_eq!(
        decoder.on_event(&message(r#"{"choices":[{"index":0,"delta":{"content":null}}]}"#)),
        Ok(vec![])
    );
    assert_eq!(decoder.on_event(&message(r#"{"choices":[]}"#)), Ok(vec![]));
}

mod replies;
mod requests;
