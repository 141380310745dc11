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
    ProviderEvent::Usage(Usage {
        input_tokens: input,
        output_tokens: output,
        cached_input_tokens: cached,
        cache_written_input_tokens: 0,
    })
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

mod replies;
mod requests;
