use super::super::sse::SseParser;
use super::*;
use serde_json::json;

const TEXT_SSE: &str = include_str!("../../../tests/fixtures/providers/gemini/text.sse");
const MANY_SSE: &str = include_str!("../../../tests/fixtures/providers/gemini/many_small_chunks.sse");
const THINKING_SSE: &str = include_str!("../../../tests/fixtures/providers/gemini/thinking.sse");
const CALLS_SSE: &str = include_str!("../../../tests/fixtures/providers/gemini/function_calls_parallel.sse");
const ERROR_SSE: &str = include_str!("../../../tests/fixtures/providers/gemini/error_midstream.sse");
const TRUNCATED_SSE: &str = include_str!("../../../tests/fixtures/providers/gemini/truncated.sse");
const NONSTREAM_JSON: &str = include_str!("../../../tests/fixtures/providers/gemini/nonstream.json");
const ERROR_400_JSON: &str = include_str!("../../../tests/fixtures/providers/gemini/error_400.json");
const ERROR_429_JSON: &str = include_str!("../../../tests/fixtures/providers/gemini/error_429.json");
const MODELS_JSON: &str = include_str!("../../../tests/fixtures/providers/gemini/models.json");
const COUNT_TOKENS_JSON: &str = include_str!("../../../tests/fixtures/providers/gemini/count_tokens.json");

/// The `thoughtSignature` of `thinking.sse`.
const SIG_THINKING: &str = "RCCCPP3m8cJrMPkOx90B5Ih1NKIPCw0Ew27YDnHg/XewdnDrlAvVM1+XParYYZuR/8kR9XzO1Fi7vyzgN1PJvfoP8BadyVdWdAZmds+wtOuJAsRCadoc9rpm0/i21LEAqeoOdVpcLoIQJCoI5wePf4k4XrCUI1VRglaLluik/vI6DJ/Fr9dghDeBa90KcwnLShJS5Npw5nIPyqTaHphAbBicJCeemFHVgUIE";
/// The `thoughtSignature` on the first `functionCall` of `function_calls_parallel.sse`.
const SIG_CALL: &str = "HC4ruFadgGwSUdzJvuOJEg667qPC2FRaeHYMWqZYRbhd5NS6tbnkUszsf/qO/7Xo7LPp+XGmVYn1npvQn2r6uyauBGE2HhmLdDZFiH1rHtgQHbm4WH8MKjoiDBQKv4JBUF4AxRZ+TRICsDmSrPoPneUXh81O8nMvoTQM5UHJ+adJroSG1glHHYERQ1JXMeh2EH534yWAKXS4g9iOAk0SxNFSOCx7NDMKXXY1bwzt6J7CbGve2Qoa1lww9bsJPLuUvp0J0zM1nGUI5x7S+O1qJQKRDL6cJ3D7Yju/yO1HsMo+gj4+Kas=";
/// The `thoughtSignature` of `nonstream.json`.
const SIG_NONSTREAM: &str = "eUK98iEG8IR3YvDzy012TccHIFEVmg+J8sbayuNEuzESRf1vhN+a18Wz0HasDo9TpzVsiJE/IPb3LbAi0k0KltrUPBYXwamOeBKeAyc3EGXQlYZPFa2guEbBwOvFNIrceZrfhJutBdShCsBEHqrutLSO+gsfCr2A6ZijWro=";

type Decoded = (Vec<ProviderEvent>, Result<Vec<ProviderEvent>, StreamParseError>);

fn text(s: &str) -> ProviderEvent {
    ProviderEvent::TextDelta(s.into())
}

fn thought(s: &str) -> ProviderEvent {
    ProviderEvent::ThoughtDelta(s.into())
}

fn usage(input: u64, output: u64, cached: u64) -> ProviderEvent {
    ProviderEvent::Usage(Usage { input_tokens: input, output_tokens: output, cached_input_tokens: cached })
}

fn finish(reason: FinishReason) -> Result<Vec<ProviderEvent>, StreamParseError> {
    Ok(vec![ProviderEvent::Finish(reason)])
}

/// Split points for `len` bytes from a xorshift generator: pieces of 1..=`max` bytes.
fn split_points(len: usize, seed: u64, max: usize) -> Vec<usize> {
    let mut state = seed.wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1;
    let mut points = Vec::new();
    let mut at = 0;
    loop {
        state ^= state << 13;
        state ^= state >> 7;
        state ^= state << 17;
        at += 1 + (state % max as u64) as usize;
        if at >= len {
            return points;
        }
        points.push(at);
    }
}

/// Feeds `body` cut at `points` through the SSE parser and a decoder.
fn decode_split(body: &[u8], points: &[usize]) -> Decoded {
    let mut parser = SseParser::new();
    let mut decoder = StreamDecoder::new();
    let mut events = Vec::new();
    let mut start = 0;
    for end in points.iter().copied().chain([body.len()]) {
        for ev in parser.push(&body[start..end]) {
            events.extend(decoder.on_event(&ev).unwrap());
        }
        start = end;
    }
    (events, decoder.finish())
}

/// Decodes `body` whole, byte by byte and at 30 pseudo-random cuts; all must agree.
fn decode_every_way(body: &str) -> Decoded {
    let bytes = body.as_bytes();
    let whole = decode_split(bytes, &[]);
    let every_byte: Vec<usize> = (1..bytes.len()).collect();
    assert_eq!(decode_split(bytes, &every_byte), whole, "byte by byte");
    for seed in 1..=30u64 {
        let max = [3, 17, 64, 200, 1000][(seed % 5) as usize];
        let points = split_points(bytes.len(), seed, max);
        assert_eq!(decode_split(bytes, &points), whole, "seed {seed}, pieces up to {max} bytes");
    }
    whole
}

/// Decodes single `data:` payloads (tests of the decoder alone).
fn decode_chunks(chunks: &[Value]) -> Decoded {
    let mut decoder = StreamDecoder::new();
    let mut events = Vec::new();
    for chunk in chunks {
        let ev = SseEvent { event: "message".into(), data: chunk.to_string(), id: None };
        events.extend(decoder.on_event(&ev).unwrap());
    }
    (events, decoder.finish())
}

fn candidate_chunk(parts: Value, finish_reason: Option<&str>) -> Value {
    let mut candidate = json!({"content": {"parts": parts, "role": "model"}, "index": 0});
    if let Some(reason) = finish_reason {
        candidate["finishReason"] = json!(reason);
    }
    json!({"candidates": [candidate]})
}

// ---- fixtures: framing ------------------------------------------------------------------

#[test]
fn sse_fixtures_use_crlf_framing_like_the_api() {
    for (name, body, events) in [
        ("text", TEXT_SSE, 4),
        ("many_small_chunks", MANY_SSE, 124),
        ("thinking", THINKING_SSE, 5),
        ("function_calls_parallel", CALLS_SSE, 2),
        ("error_midstream", ERROR_SSE, 3),
    ] {
        assert!(body.ends_with("}\r\n\r\n"), "{name}");
        assert!(!body.replace("\r\n", "").contains(['\n', '\r']), "{name}: a bare LF or CR");
        let pieces: Vec<&str> = body.split("\r\n\r\n").filter(|p| !p.is_empty()).collect();
        assert_eq!(pieces.len(), events, "{name}");
        assert!(pieces.iter().all(|p| p.starts_with("data: {")), "{name}");
    }
    assert!(MANY_SSE.matches("data: ").count() >= 100);
    assert!(!TRUNCATED_SSE.ends_with("\r\n\r\n"));
}

// ---- fixtures: streams ------------------------------------------------------------------

#[test]
fn text_stream() {
    let (events, end) = decode_every_way(TEXT_SSE);
    assert_eq!(
        events,
        vec![
            text("The sky looks blue because sunlight is scattered by the gases"),
            usage(9, 0, 0),
            text(" in the atmosphere. Shorter wavelengths (≈450 nm, blue) scatter"),
            text(" much more than longer ones (≈700 nm, red) — this is Rayleigh scattering,"),
            text(
                " whose strength goes as 1/λ⁴.\n\nAt sunset the light crosses more air, so the blue is \
                 scattered away before it reaches you."
            ),
            usage(9, 58, 0),
        ]
    );
    assert_eq!(end, finish(FinishReason::Stop));
}

#[test]
fn many_small_chunks_stream() {
    const PARA: &str = "Server-sent events deliver a response as a series of small pieces, and a client that \
        renders them as they arrive gives the reader something to look at long before the model has finished. \
        Each piece here is a single word, so the decoder sees well over one hundred separate events, and every \
        one of them must be turned into exactly one text delta, in order, with nothing lost and nothing \
        duplicated. The usage numbers repeat on every chunk until the last one, so only the first and the \
        final counts should be reported. When the final chunk carries its finish reason the stream is \
        complete, and the closing event must say that the model stopped of its own accord rather than \
        hitting a limit.";
    let words: Vec<&str> = PARA.split(' ').collect();
    assert!(words.len() >= 100);
    let mut expected = Vec::new();
    for (i, word) in words.iter().enumerate() {
        expected.push(text(&if i == 0 { (*word).to_string() } else { format!(" {word}") }));
        if i == 0 {
            expected.push(usage(12, 0, 0));
        }
    }
    expected.push(usage(12, 131, 0));
    let (events, end) = decode_every_way(MANY_SSE);
    assert_eq!(events, expected);
    assert_eq!(end, finish(FinishReason::Stop));
}

#[test]
fn thinking_stream() {
    let (events, end) = decode_every_way(THINKING_SSE);
    assert_eq!(
        events,
        vec![
            thought(
                "**Counting primes below 100**\n\nI'm listing the primes decade by decade: 2, 3, 5, 7 in the \
                 first, then 11, 13, 17, 19, and so on up to 97."
            ),
            usage(14, 187, 0),
            thought(
                "**Verifying the total**\n\nAdding the per-decade counts 4+4+2+2+3+2+2+3+1+2 gives 25, which \
                 matches the known value of π(100)."
            ),
            usage(14, 398, 0),
            text("There are **25** prime numbers less than 100."),
            text(" The largest of them is 97."),
            ProviderEvent::ThoughtSignature(SIG_THINKING.into()),
            usage(14, 415, 0),
        ]
    );
    assert_eq!(end, finish(FinishReason::Stop));
}

#[test]
fn parallel_function_calls_stream() {
    let (events, end) = decode_every_way(CALLS_SSE);
    assert_eq!(
        events,
        vec![
            ProviderEvent::ToolCall {
                id: "call_Xk9OaJ3vBbWUz7IPrN_5kAw_0".into(),
                name: "get_weather".into(),
                arguments: json!({"location": "Paris, France", "unit": "celsius"}),
                signature: Some(SIG_CALL.into()),
            },
            usage(96, 154, 0),
            ProviderEvent::ToolCall {
                id: "call_Xk9OaJ3vBbWUz7IPrN_5kAw_1".into(),
                name: "get_weather".into(),
                arguments: json!({"location": "London, UK", "unit": "celsius"}),
                signature: None,
            },
            usage(96, 192, 0),
        ]
    );
    // `finishReason: STOP` after function calls: the model waits for their results.
    assert_eq!(end, finish(FinishReason::ToolCalls));
}

#[test]
fn error_in_the_middle_of_a_stream() {
    let (events, end) = decode_every_way(ERROR_SSE);
    assert_eq!(
        events,
        vec![
            text("Here is a summary of the report:\n\n"),
            usage(1840, 287, 0),
            text("1. Revenue grew 12% year over year"),
            ProviderEvent::Error(ProviderError {
                status: 503,
                kind: "UNAVAILABLE".into(),
                message: "The model is overloaded. Please try again later.".into(),
                retryable: true,
                retry_after_secs: None,
            }),
        ]
    );
    // The error was the end of it: no Finish, and not a truncation either.
    assert_eq!(end, Ok(vec![]));
}

#[test]
fn truncated_stream_is_an_error() {
    let (events, end) = decode_every_way(TRUNCATED_SSE);
    assert_eq!(
        events,
        vec![
            text("Step one: preheat the oven to 200 °C."),
            usage(21, 0, 0),
            text("\nStep two: whisk the eggs with the sugar"),
            text(" until pale,"),
        ]
    );
    let err = end.unwrap_err();
    assert!(err.0.contains("truncated"), "{err}");
}

#[test]
fn non_streamed_response() {
    assert_eq!(
        parse_response(NONSTREAM_JSON.as_bytes()).unwrap(),
        vec![
            thought(
                "**Converting the distance**\n\nA marathon is 42.195 km; dividing by 1.609 gives roughly 26.2 \
                 miles."
            ),
            text("A marathon is 42.195 km, which is about 26.2 miles."),
            ProviderEvent::ThoughtSignature(SIG_NONSTREAM.into()),
            usage(2210, 91, 2048),
            ProviderEvent::Finish(FinishReason::Stop),
        ]
    );
}

#[test]
fn non_streamed_error_and_garbage() {
    let events =
        parse_response(br#"{"error": {"code": 500, "message": "boom", "status": "INTERNAL"}}"#).unwrap();
    assert_eq!(
        events,
        vec![ProviderEvent::Error(ProviderError {
            status: 500,
            kind: "INTERNAL".into(),
            message: "boom".into(),
            retryable: true,
            retry_after_secs: None,
        })]
    );
    assert!(parse_response(b"{}").is_err(), "no finishReason");
    assert!(parse_response(b"<html>").is_err());
    assert!(parse_response(b"42").is_err());
}

// ---- decoder details --------------------------------------------------------------------

#[test]
fn finish_reasons() {
    let cases = [
        ("STOP", false, FinishReason::Stop),
        ("STOP", true, FinishReason::ToolCalls),
        ("MAX_TOKENS", false, FinishReason::Length),
        ("MAX_TOKENS", true, FinishReason::Length),
        ("SAFETY", false, FinishReason::ContentFilter),
        ("RECITATION", false, FinishReason::ContentFilter),
        ("BLOCKLIST", false, FinishReason::ContentFilter),
        ("PROHIBITED_CONTENT", false, FinishReason::ContentFilter),
        ("SPII", false, FinishReason::ContentFilter),
        ("IMAGE_SAFETY", false, FinishReason::ContentFilter),
        ("MALFORMED_FUNCTION_CALL", false, FinishReason::Other("MALFORMED_FUNCTION_CALL".into())),
        ("LANGUAGE", false, FinishReason::Other("LANGUAGE".into())),
        ("OTHER", false, FinishReason::Other("OTHER".into())),
        ("FINISH_REASON_UNSPECIFIED", false, FinishReason::Other("FINISH_REASON_UNSPECIFIED".into())),
    ];
    for (reason, with_call, expected) in cases {
        let parts = if with_call {
            json!([{"functionCall": {"name": "f", "args": {}}}])
        } else {
            json!([{"text": "x"}])
        };
        let (_, end) = decode_chunks(&[candidate_chunk(parts, Some(reason))]);
        assert_eq!(end, finish(expected), "{reason} {with_call}");
    }
}

#[test]
fn safety_stop_without_content() {
    let chunk = json!({"candidates": [{"finishReason": "SAFETY", "index": 0, "safetyRatings": [
        {"category": "HARM_CATEGORY_DANGEROUS_CONTENT", "probability": "HIGH", "blocked": true}]}]});
    let (events, end) = decode_chunks(&[chunk]);
    assert_eq!(events, vec![]);
    assert_eq!(end, finish(FinishReason::ContentFilter));
}

#[test]
fn finish_reason_repeated_on_every_chunk_ends_once_at_the_end() {
    // Older models put `finishReason: STOP` on every chunk; the text after it still counts.
    let chunks = [
        candidate_chunk(json!([{"text": "a"}]), Some("STOP")),
        candidate_chunk(json!([{"text": "b"}]), Some("STOP")),
    ];
    let (events, end) = decode_chunks(&chunks);
    assert_eq!(events, vec![text("a"), text("b")]);
    assert_eq!(end, finish(FinishReason::Stop));
}

#[test]
fn an_error_after_a_finish_reason_still_ends_without_finish() {
    let chunks = [
        candidate_chunk(json!([{"text": "a"}]), Some("STOP")),
        json!({"error": {"code": 500, "message": "An internal error has occurred.", "status": "INTERNAL"}}),
    ];
    let (events, end) = decode_chunks(&chunks);
    assert_eq!(events.len(), 2);
    assert!(matches!(&events[1], ProviderEvent::Error(e) if e.status == 500 && e.retryable));
    assert_eq!(end, Ok(vec![]));
}

#[test]
fn blocked_prompt() {
    let chunk = json!({
        "promptFeedback": {"blockReason": "PROHIBITED_CONTENT", "blockReasonMessage": "Prompt was blocked."},
        "usageMetadata": {"promptTokenCount": 7, "totalTokenCount": 7},
        "modelVersion": "gemini-2.5-flash"
    });
    let (events, end) = decode_chunks(&[chunk]);
    assert_eq!(
        events,
        vec![
            usage(7, 0, 0),
            ProviderEvent::Error(ProviderError {
                status: 0,
                kind: "prompt_blocked".into(),
                message: "Gemini blocked the prompt (PROHIBITED_CONTENT): Prompt was blocked.".into(),
                retryable: false,
                retry_after_secs: None,
            }),
        ]
    );
    assert_eq!(end, finish(FinishReason::ContentFilter));
    // Safety ratings without a block reason are not a block.
    let fine = json!({"candidates": [{"content": {"parts": [{"text": "ok"}]}, "finishReason": "STOP"}],
        "promptFeedback": {"safetyRatings": []}});
    assert_eq!(decode_chunks(&[fine]), (vec![text("ok")], finish(FinishReason::Stop)));
}

#[test]
fn signatures_on_every_kind_of_part() {
    let parts = json!([
        {"text": "thinking...", "thought": true, "thoughtSignature": "sig/1+"},
        {"text": "", "thought": true, "thoughtSignature": "sig2=="},
        {"text": "answer", "thoughtSignature": "sig3"},
        {"inlineData": {"mimeType": "image/png", "data": "iVBORw0KGgo="}, "thoughtSignature": "sig4"},
        {"text": "", "thoughtSignature": ""},
        {"text": ""}
    ]);
    let (events, _) = decode_chunks(&[candidate_chunk(parts, Some("STOP"))]);
    assert_eq!(
        events,
        vec![
            thought("thinking..."),
            ProviderEvent::ThoughtSignature("sig/1+".into()),
            ProviderEvent::ThoughtSignature("sig2==".into()),
            text("answer"),
            ProviderEvent::ThoughtSignature("sig3".into()),
            ProviderEvent::ThoughtSignature("sig4".into()),
        ]
    );
}

#[test]
fn function_call_ids_args_and_errors() {
    let parts = json!([
        {"functionCall": {"id": "fc-7", "name": "search", "args": {"q": "rust"}}},
        {"functionCall": {"name": "now"}},
        {"functionCall": {"name": "ping", "args": null}, "thoughtSignature": "s"}
    ]);
    let (events, end) = decode_chunks(&[candidate_chunk(parts, Some("STOP"))]);
    let call = |id: &str, name: &str, arguments: Value, signature: Option<&str>| ProviderEvent::ToolCall {
        id: id.into(),
        name: name.into(),
        arguments,
        signature: signature.map(str::to_string),
    };
    // No `responseId` in these chunks: the made-up ids are `call_<n>`, counting every call.
    assert_eq!(
        events,
        vec![
            call("fc-7", "search", json!({"q": "rust"}), None),
            call("call_1", "now", json!({}), None),
            call("call_2", "ping", json!({}), Some("s")),
        ]
    );
    assert_eq!(end, finish(FinishReason::ToolCalls));

    let mut decoder = StreamDecoder::new();
    let nameless = candidate_chunk(json!([{"functionCall": {"args": {}}}]), None);
    let ev = SseEvent { event: "message".into(), data: nameless.to_string(), id: None };
    assert!(decoder.on_event(&ev).is_err());
}

#[test]
fn made_up_ids_are_stable_across_chunks_and_decodes() {
    let chunk = |n: &str| {
        json!({"candidates": [{"content": {"parts": [{"functionCall": {"name": n, "args": {}}}]}}],
            "responseId": "R1"})
    };
    let (events, _) = decode_chunks(&[chunk("a"), chunk("b")]);
    let ids: Vec<&str> = events
        .iter()
        .filter_map(|e| match e {
            ProviderEvent::ToolCall { id, .. } => Some(id.as_str()),
            _ => None,
        })
        .collect();
    assert_eq!(ids, ["call_R1_0", "call_R1_1"]);
    let (again, _) = decode_chunks(&[chunk("a"), chunk("b")]);
    assert_eq!(again, events);
}

#[test]
fn usage_counts() {
    let chunk = json!({"candidates": [{"content": {"parts": [{"text": "x"}]}, "finishReason": "STOP"}],
        "usageMetadata": {"promptTokenCount": 100, "cachedContentTokenCount": 60, "candidatesTokenCount": 5,
            "thoughtsTokenCount": 20, "toolUsePromptTokenCount": 3, "totalTokenCount": 128}});
    let (events, _) = decode_chunks(&[chunk]);
    assert_eq!(events, vec![text("x"), usage(103, 25, 60)]);
    // Repeated identical usage is reported once; a change is reported again.
    let u = |n: u64| json!({"usageMetadata": {"promptTokenCount": n}});
    let (events, _) = decode_chunks(&[u(1), u(1), u(2), u(2)]);
    assert_eq!(events, vec![usage(1, 0, 0), usage(2, 0, 0)]);
}

#[test]
fn malformed_chunks() {
    let mut decoder = StreamDecoder::new();
    let ev = |data: &str| SseEvent { event: "message".into(), data: data.into(), id: None };
    assert_eq!(decoder.on_event(&ev("")), Ok(vec![]));
    assert_eq!(decoder.on_event(&ev("  \n ")), Ok(vec![]));
    assert!(decoder.on_event(&ev("{\"candidates\": [")).is_err());
    assert!(decoder.on_event(&ev("[DONE]")).is_err());
    assert!(decoder.on_event(&ev("42")).is_err());
    assert!(decoder.on_event(&ev("\"text\"")).is_err());
    // Unknown fields and shapes are ignored, not fatal.
    let odd = json!({"candidates": [{"content": {"parts": [{"executableCode": {"code": "1+1"}}]}}],
        "unknownField": true});
    assert_eq!(decoder.on_event(&ev(&odd.to_string())), Ok(vec![]));
}

#[test]
fn json_array_framing_is_tolerated() {
    let body = json!([
        {"candidates": [{"content": {"parts": [{"text": "Hi"}]}}]},
        {"candidates": [{"content": {"parts": [{"text": "!"}]}, "finishReason": "STOP"}]}
    ]);
    assert_eq!(
        parse_response(body.to_string().as_bytes()).unwrap(),
        vec![text("Hi"), text("!"), ProviderEvent::Finish(FinishReason::Stop)]
    );
    let (events, end) = decode_chunks(&[body]);
    assert_eq!((events, end), (vec![text("Hi"), text("!")], finish(FinishReason::Stop)));
}

#[test]
fn finish_is_idempotent_and_empty_streams_are_truncated() {
    let mut decoder = StreamDecoder::new();
    assert!(decoder.finish().is_err());
    assert_eq!(decoder.finish(), Ok(vec![]));
    let (_, end) = decode_chunks(&[candidate_chunk(json!([{"text": "x"}]), Some("STOP"))]);
    assert_eq!(end, finish(FinishReason::Stop));
}

// ---- requests ---------------------------------------------------------------------------

fn msg(role: ChatRole, parts: Vec<Part>) -> ChatMessage {
    ChatMessage { role, parts }
}

fn text_part(s: &str) -> Part {
    Part::Text { text: s.into() }
}

fn request(messages: Vec<ChatMessage>) -> ChatRequest {
    ChatRequest {
        model: "gemini-2.5-flash".into(),
        system: None,
        messages,
        tools: Vec::new(),
        params: GenParams::default(),
        passthrough: None,
    }
}

fn weather_tool() -> ToolSpec {
    ToolSpec {
        name: "get_weather".into(),
        description: "Current weather for a place.".into(),
        parameters: json!({
            "$schema": "http://json-schema.org/draft-07/schema#",
            "type": "object",
            "properties": {
                "location": {"type": "string", "description": "City and country"},
                "unit": {"type": "string", "enum": ["celsius", "fahrenheit"]}
            },
            "required": ["location"],
            "additionalProperties": false
        }),
    }
}

#[test]
fn full_request_body() {
    let req = ChatRequest {
        model: "models/gemini-3-pro-preview".into(),
        system: Some("You are terse.".into()),
        messages: vec![
            msg(
                ChatRole::User,
                vec![
                    text_part("What's the weather in Paris and London? Here is my sky:"),
                    Part::Image { mime: "image/jpeg".into(), data_base64: "/9j/4AAQSkZJRg==".into() },
                ],
            ),
            msg(
                ChatRole::Assistant,
                vec![
                    Part::Thought {
                        text: "Two cities: two calls.".into(),
                        signature: Some("c2lnLXRob3VnaHQ=".into()),
                        redacted: None,
                    },
                    Part::ToolCall {
                        id: "call_R_0".into(),
                        name: "get_weather".into(),
                        arguments: json!({"location": "Paris"}),
                        signature: Some("c2lnLWNhbGw+/A==".into()),
                    },
                    Part::ToolCall {
                        id: "call_R_1".into(),
                        name: "get_weather".into(),
                        arguments: json!({"location": "London"}),
                        signature: None,
                    },
                ],
            ),
            msg(
                ChatRole::Tool,
                vec![
                    Part::ToolResult {
                        call_id: "call_R_0".into(),
                        name: "get_weather".into(),
                        content: "18 °C, sunny".into(),
                        is_error: false,
                    },
                    Part::ToolResult {
                        call_id: "call_R_1".into(),
                        name: "get_weather".into(),
                        content: "upstream timeout".into(),
                        is_error: true,
                    },
                ],
            ),
            msg(ChatRole::User, vec![text_part("Thanks. And Rome?")]),
        ],
        tools: vec![weather_tool()],
        params: GenParams {
            temperature: Some(0.7),
            max_output_tokens: Some(1024),
            reasoning_effort: None,
            thinking_budget: Some(2048),
            tool_choice: None,
        },
        passthrough: None,
    };
    let expected = json!({
        "contents": [
            {"role": "user", "parts": [
                {"text": "What's the weather in Paris and London? Here is my sky:"},
                {"inlineData": {"mimeType": "image/jpeg", "data": "/9j/4AAQSkZJRg=="}}
            ]},
            {"role": "model", "parts": [
                {"text": "Two cities: two calls.", "thought": true, "thoughtSignature": "c2lnLXRob3VnaHQ="},
                {"functionCall": {"name": "get_weather", "args": {"location": "Paris"}},
                 "thoughtSignature": "c2lnLWNhbGw+/A=="},
                {"functionCall": {"name": "get_weather", "args": {"location": "London"}}}
            ]},
            {"role": "user", "parts": [
                {"functionResponse": {"name": "get_weather", "response": {"output": "18 °C, sunny"}}},
                {"functionResponse": {"name": "get_weather", "response": {"error": "upstream timeout"}}},
                {"text": "Thanks. And Rome?"}
            ]}
        ],
        "systemInstruction": {"parts": [{"text": "You are terse."}]},
        "tools": [{"functionDeclarations": [{
            "name": "get_weather",
            "description": "Current weather for a place.",
            "parameters": {
                "type": "object",
                "properties": {
                    "location": {"type": "string", "description": "City and country"},
                    "unit": {"type": "string", "enum": ["celsius", "fahrenheit"]}
                },
                "required": ["location"]
            }
        }]}],
        "generationConfig": {
            "temperature": 0.7,
            "maxOutputTokens": 1024,
            "thinkingConfig": {"thinkingBudget": 2048, "includeThoughts": true}
        }
    });
    assert_eq!(build_request(&req), expected);
}

#[test]
fn minimal_request_has_no_optional_sections() {
    let req = request(vec![msg(ChatRole::User, vec![text_part("Hi")])]);
    assert_eq!(build_request(&req), json!({"contents": [{"role": "user", "parts": [{"text": "Hi"}]}]}));
    let blank_system = ChatRequest { system: Some("  ".into()), ..req };
    assert!(build_request(&blank_system).get("systemInstruction").is_none());
}

#[test]
fn adjacent_turns_of_one_role_merge() {
    let req = request(vec![
        msg(ChatRole::User, vec![text_part("one")]),
        msg(ChatRole::User, vec![text_part("two")]),
        msg(ChatRole::Assistant, vec![text_part("three")]),
        // Nothing Gemini can take: skipped, so it does not split the model turn.
        msg(ChatRole::User, vec![text_part("")]),
        msg(ChatRole::Assistant, vec![text_part("four")]),
        msg(
            ChatRole::Tool,
            vec![Part::ToolResult {
                call_id: "call_0".into(),
                name: "f".into(),
                content: "{\"ok\":true}".into(),
                is_error: false,
            }],
        ),
        msg(ChatRole::User, vec![text_part("five")]),
        msg(ChatRole::Assistant, vec![]),
    ]);
    assert_eq!(
        build_request(&req)["contents"],
        json!([
            {"role": "user", "parts": [{"text": "one"}, {"text": "two"}]},
            {"role": "model", "parts": [{"text": "three"}, {"text": "four"}]},
            {"role": "user", "parts": [
                {"functionResponse": {"name": "f", "response": {"output": "{\"ok\":true}"}}},
                {"text": "five"}
            ]}
        ])
    );
}

#[test]
fn provider_ids_are_echoed_and_made_up_ones_are_not() {
    let req = request(vec![
        msg(
            ChatRole::Assistant,
            vec![
                Part::ToolCall { id: "fc-7".into(), name: "f".into(), arguments: json!({}), signature: None },
                Part::ToolCall {
                    id: "call_3".into(),
                    name: "g".into(),
                    arguments: Value::Null,
                    signature: None,
                },
                Part::ToolCall { id: "".into(), name: "h".into(), arguments: json!([1, 2]), signature: None },
            ],
        ),
        msg(
            ChatRole::Tool,
            vec![
                Part::ToolResult {
                    call_id: "fc-7".into(),
                    name: "f".into(),
                    content: "a".into(),
                    is_error: false,
                },
                Part::ToolResult {
                    call_id: "call_3".into(),
                    name: "g".into(),
                    content: "b".into(),
                    is_error: false,
                },
            ],
        ),
    ]);
    assert_eq!(
        build_request(&req)["contents"],
        json!([
            {"role": "model", "parts": [
                {"functionCall": {"id": "fc-7", "name": "f", "args": {}}},
                {"functionCall": {"name": "g", "args": {}}},
                {"functionCall": {"name": "h", "args": {"value": [1, 2]}}}
            ]},
            {"role": "user", "parts": [
                {"functionResponse": {"id": "fc-7", "name": "f", "response": {"output": "a"}}},
                {"functionResponse": {"name": "g", "response": {"output": "b"}}}
            ]}
        ])
    );
}

#[test]
fn thoughts_are_replayed_only_in_model_turns() {
    let thought_part = |text: &str, signature: Option<&str>, redacted: Option<&str>| Part::Thought {
        text: text.into(),
        signature: signature.map(str::to_string),
        redacted: redacted.map(str::to_string),
    };
    let req = request(vec![
        msg(ChatRole::User, vec![thought_part("user-side thought", Some("x"), None), text_part("q")]),
        msg(
            ChatRole::Assistant,
            vec![
                thought_part("visible", None, None),
                thought_part("", Some("only+sig/=="), None),
                thought_part("", None, Some("anthropic-redacted-data")),
                thought_part("", Some(""), None),
                text_part("a"),
            ],
        ),
    ]);
    assert_eq!(
        build_request(&req)["contents"],
        json!([
            {"role": "user", "parts": [{"text": "q"}]},
            {"role": "model", "parts": [
                {"text": "visible", "thought": true},
                {"text": "", "thought": true, "thoughtSignature": "only+sig/=="},
                {"text": "a"}
            ]}
        ])
    );
}

/// What an assembler does with the events: deltas appended, a signature attached to the
/// current thought (or to a new, empty one), tool calls kept whole.
fn assemble(events: &[ProviderEvent]) -> Vec<Part> {
    let mut parts: Vec<Part> = Vec::new();
    for event in events {
        match event {
            ProviderEvent::TextDelta(t) => match parts.last_mut() {
                Some(Part::Text { text }) => text.push_str(t),
                _ => parts.push(Part::Text { text: t.clone() }),
            },
            ProviderEvent::ThoughtDelta(t) => match parts.last_mut() {
                Some(Part::Thought { text, signature: None, .. }) => text.push_str(t),
                _ => parts.push(Part::Thought { text: t.clone(), signature: None, redacted: None }),
            },
            ProviderEvent::ThoughtSignature(s) => {
                let open = parts.iter_mut().rev().find_map(|p| match p {
                    Part::Thought { signature: sig @ None, .. } => Some(sig),
                    _ => None,
                });
                match open {
                    Some(sig) => *sig = Some(s.clone()),
                    None => parts.push(Part::Thought {
                        text: String::new(),
                        signature: Some(s.clone()),
                        redacted: None,
                    }),
                }
            }
            ProviderEvent::ToolCall { id, name, arguments, signature } => parts.push(Part::ToolCall {
                id: id.clone(),
                name: name.clone(),
                arguments: arguments.clone(),
                signature: signature.clone(),
            }),
            _ => {}
        }
    }
    parts
}

#[test]
fn streamed_signatures_round_trip_verbatim() {
    // Thinking: the signature goes back with the thought.
    let (events, _) = decode_every_way(THINKING_SSE);
    let req = request(vec![
        msg(ChatRole::User, vec![text_part("How many primes are below 100?")]),
        msg(ChatRole::Assistant, assemble(&events)),
    ]);
    let model_parts = &build_request(&req)["contents"][1]["parts"];
    assert_eq!(model_parts[0]["thought"], json!(true));
    assert_eq!(model_parts[0]["thoughtSignature"], json!(SIG_THINKING));
    assert_eq!(
        model_parts[1],
        json!({"text": "There are **25** prime numbers less than 100. The largest of them is 97."})
    );

    // Parallel calls: the first call carries its signature back, the second carries none;
    // the made-up ids stay on our side.
    let (events, _) = decode_every_way(CALLS_SSE);
    let calls = assemble(&events);
    let results = calls
        .iter()
        .filter_map(|p| match p {
            Part::ToolCall { id, name, .. } => Some(Part::ToolResult {
                call_id: id.clone(),
                name: name.clone(),
                content: "15 °C".into(),
                is_error: false,
            }),
            _ => None,
        })
        .collect();
    let req = request(vec![
        msg(ChatRole::User, vec![text_part("Weather in Paris and London?")]),
        msg(ChatRole::Assistant, calls),
        msg(ChatRole::Tool, results),
    ]);
    assert_eq!(
        build_request(&req)["contents"],
        json!([
            {"role": "user", "parts": [{"text": "Weather in Paris and London?"}]},
            {"role": "model", "parts": [
                {"functionCall": {"name": "get_weather", "args": {"location": "Paris, France", "unit": "celsius"}},
                 "thoughtSignature": SIG_CALL},
                {"functionCall": {"name": "get_weather", "args": {"location": "London, UK", "unit": "celsius"}}}
            ]},
            {"role": "user", "parts": [
                {"functionResponse": {"name": "get_weather", "response": {"output": "15 °C"}}},
                {"functionResponse": {"name": "get_weather", "response": {"output": "15 °C"}}}
            ]}
        ])
    );
    // The fixture's signature, byte for byte, in the serialized body.
    let body = serde_json::to_string(&build_request(&req)).unwrap();
    assert!(body.contains(&format!("\"thoughtSignature\":\"{SIG_CALL}\"")));
}

#[test]
fn generation_config_variants() {
    let config = |params: GenParams| build_request(&ChatRequest { params, ..request(vec![]) });
    assert!(config(GenParams::default()).get("generationConfig").is_none());
    assert_eq!(
        config(GenParams { temperature: Some(0.7), ..Default::default() })["generationConfig"],
        json!({"temperature": 0.7})
    );
    assert_eq!(
        config(GenParams { temperature: Some(f32::NAN), ..Default::default() }).get("generationConfig"),
        None
    );
    assert_eq!(
        config(GenParams { thinking_budget: Some(0), ..Default::default() })["generationConfig"],
        json!({"thinkingConfig": {"thinkingBudget": 0, "includeThoughts": false}})
    );
    assert_eq!(
        config(GenParams { reasoning_effort: Some(ReasoningEffort::High), ..Default::default() })["generationConfig"],
        json!({"thinkingConfig": {"thinkingBudget": 24576, "includeThoughts": true}})
    );
    assert_eq!(
        config(GenParams {
            reasoning_effort: Some(ReasoningEffort::Low),
            thinking_budget: Some(512),
            max_output_tokens: Some(8),
            ..Default::default()
        })["generationConfig"],
        json!({"maxOutputTokens": 8, "thinkingConfig": {"thinkingBudget": 512, "includeThoughts": true}})
    );
}

// ---- schemas ----------------------------------------------------------------------------

#[test]
fn schema_stripping_and_conversion() {
    let schema = json!({
        "$schema": "https://json-schema.org/draft/2020-12/schema",
        "$id": "https://example.com/fetch.json",
        "title": "fetch",
        "type": "object",
        "additionalProperties": false,
        "properties": {
            "url": {"type": "string", "format": "uri", "description": "Page to fetch", "minLength": 1},
            "when": {"type": "string", "format": "date-time"},
            "mode": {"const": "fast"},
            "retries": {"type": ["integer", "null"], "minimum": 0, "exclusiveMaximum": 10, "default": 2},
            "level": {"type": "integer", "enum": [1, 2, 3], "description": "Detail."},
            "flag": {"type": "boolean", "enum": [true]},
            "choice": {"enum": ["a", null]},
            "tags": {"type": "array", "items": {"type": "string", "pattern": "^[a-z]+$"},
                     "uniqueItems": true, "minItems": 1, "examples": [["x"]]},
            "target": {"oneOf": [{"type": "string"}, {"type": "number", "multipleOf": 0.5}]},
            "either": {"type": ["string", "number"]},
            "opt": {"anyOf": [{"$ref": "#/$defs/Point"}, {"type": "null"}], "description": "optional point"},
            "meta": {"type": "object", "additionalProperties": {"type": "string"},
                     "patternProperties": {"^x-": {"type": "string"}}},
            "any": true,
            "cond": {"type": "string", "if": {"minLength": 2}, "then": {"pattern": "a"}, "not": {"const": "b"}}
        },
        "required": ["url", "missing"],
        "propertyOrdering": ["url", "nope", "when"],
        "$defs": {"Point": {"type": "object", "properties": {"x": {"type": "number"}, "y": {"type": "number"}},
                            "required": ["x", "y"], "additionalProperties": false}}
    });
    assert_eq!(
        sanitize_schema(&schema),
        json!({
            "title": "fetch",
            "type": "object",
            "properties": {
                "url": {"type": "string", "description": "Page to fetch", "minLength": 1},
                "when": {"type": "string", "format": "date-time"},
                "mode": {"type": "string", "enum": ["fast"]},
                "retries": {"type": "integer", "minimum": 0, "default": 2, "nullable": true},
                "level": {"type": "integer", "description": "Detail. One of: 1, 2, 3."},
                "flag": {"type": "boolean", "description": "One of: true."},
                "choice": {"type": "string", "enum": ["a"], "nullable": true},
                "tags": {"type": "array", "items": {"type": "string", "pattern": "^[a-z]+$"}, "minItems": 1},
                "target": {"anyOf": [{"type": "string"}, {"type": "number"}]},
                "either": {"anyOf": [{"type": "string"}, {"type": "number"}]},
                "opt": {"type": "object", "properties": {"x": {"type": "number"}, "y": {"type": "number"}},
                        "required": ["x", "y"], "description": "optional point", "nullable": true},
                "meta": {"type": "object"},
                "any": {},
                "cond": {"type": "string"}
            },
            "required": ["url"],
            "propertyOrdering": ["url", "when"]
        })
    );
}

#[test]
fn schema_refs_all_of_and_recursion() {
    let schema = json!({
        "type": "object",
        "properties": {
            "root": {"$ref": "#/definitions/Node"},
            "item": {"allOf": [{"$ref": "#/$defs/Base"}, {"properties": {"extra": {"type": "boolean"}},
                                                            "required": ["extra"]}],
                     "description": "merged"},
            "dangling": {"$ref": "#/$defs/Nope", "description": "kept"},
            "remote": {"$ref": "https://example.com/schema.json"}
        },
        "definitions": {"Node": {"type": "object", "properties": {
            "name": {"type": "string"},
            "children": {"type": "array", "items": {"$ref": "#/definitions/Node"}}}}},
        "$defs": {"Base": {"type": "object", "properties": {"id": {"type": "string"}}, "required": ["id"]}}
    });
    assert_eq!(
        sanitize_schema(&schema)["properties"],
        json!({
            "root": {"type": "object", "properties": {
                "name": {"type": "string"},
                "children": {"type": "array", "items": {"type": "object"}}}},
            "item": {"type": "object", "description": "merged",
                     "properties": {"id": {"type": "string"}, "extra": {"type": "boolean"}},
                     "required": ["id", "extra"]},
            "dangling": {"description": "kept"},
            "remote": {}
        })
    );
}

#[test]
fn schema_fan_out_is_bounded() {
    // 24 definitions, each referring to the next twice: 2^24 nodes if expanded naively.
    let mut defs = Map::new();
    for i in 0..24 {
        let next = json!({"$ref": format!("#/$defs/D{}", i + 1)});
        defs.insert(format!("D{i}"), json!({"type": "object", "properties": {"a": next, "b": next}}));
    }
    defs.insert("D24".into(), json!({"type": "string"}));
    let schema = json!({"type": "object", "properties": {"root": {"$ref": "#/$defs/D0"}}, "$defs": defs});
    let out = serde_json::to_string(&sanitize_schema(&schema)).unwrap();
    assert!(out.len() < 2_000_000, "{} bytes", out.len());
}

#[test]
fn tools_without_arguments_omit_parameters() {
    let tool = |parameters: Value| ToolSpec { name: "now".into(), description: "Time.".into(), parameters };
    for parameters in
        [Value::Null, json!({}), json!({"type": "object"}), json!({"type": "object", "properties": {}})]
    {
        let req = ChatRequest { tools: vec![tool(parameters.clone())], ..request(vec![]) };
        assert_eq!(
            build_request(&req)["tools"],
            json!([{"functionDeclarations": [{"name": "now", "description": "Time."}]}]),
            "{parameters}"
        );
    }
    assert!(build_request(&request(vec![])).get("tools").is_none());
}

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
