//! The common streamed chunk, read without building a JSON tree: `choices[0].delta` with text
//! and nothing else that needs deciding (no tool call, reasoning, finish reason, usage or
//! error). Nearly every chunk of an answer is one of these; reading it into borrowed fields
//! instead of a `serde_json::Value` map saves most of the decoder's per-chunk allocations.
//! Anything else, or anything this reader cannot take, goes to the full reader, so both give
//! the same events for every chunk (a unit test compares them).

use std::borrow::Cow;

use serde::Deserialize;
use serde::de::{self, Deserializer, IgnoredAny, MapAccess, Visitor};

/// A chunk's fields as the fast path reads them. Fields the full reader acts on but this one
/// does not are kept as "present or not": present and not `null` sends the chunk to the full
/// reader. Each level is read from a JSON object only (a derived reader would also take an
/// array, field by field, which the full reader does not).
#[derive(Default)]
struct Chunk<'a> {
    id: Option<Cow<'a, str>>,
    choices: Option<Vec<Choice<'a>>>,
    other: bool,
}

#[derive(Default)]
struct Choice<'a> {
    index: Option<u64>,
    delta: Option<Delta<'a>>,
    other: bool,
}

#[derive(Default)]
struct Delta<'a> {
    content: Option<Cow<'a, str>>,
    refusal: Option<Cow<'a, str>>,
    other: bool,
}

/// Reads an object's fields with the block given (which calls [`once`] for each field it knows).
macro_rules! object_reader {
    ($ty:ident, $expecting:literal, |$map:ident, $out:ident, $key:ident, $seen:ident| $field:block) => {
        impl<'de: 'a, 'a> Deserialize<'de> for $ty<'a> {
            fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
                struct ObjectVisitor<'a>(std::marker::PhantomData<&'a ()>);
                impl<'de: 'a, 'a> Visitor<'de> for ObjectVisitor<'a> {
                    type Value = $ty<'a>;
                    fn expecting(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
                        f.write_str($expecting)
                    }
                    fn visit_map<M: MapAccess<'de>>(self, mut $map: M) -> Result<$ty<'a>, M::Error> {
                        let mut $out = $ty::default();
                        let mut seen = 0u8;
                        while let Some($key) = $map.next_key::<Cow<'de, str>>()? {
                            let $seen = &mut seen;
                            $field
                        }
                        Ok($out)
                    }
                }
                d.deserialize_map(ObjectVisitor(std::marker::PhantomData))
            }
        }
    };
}

/// Marks field `bit` as read, refusing an object that names a field twice (the full reader
/// keeps the last value; this one leaves such a chunk to it).
fn once<E: de::Error>(seen: &mut u8, bit: u8) -> Result<(), E> {
    if *seen & bit != 0 {
        return Err(E::custom("a field named twice"));
    }
    *seen |= bit;
    Ok(())
}

/// Whether a field the fast path does not act on is present and not `null`.
fn present<'de, M: MapAccess<'de>>(map: &mut M) -> Result<bool, M::Error> {
    Ok(map.next_value::<Option<IgnoredAny>>()?.is_some())
}

object_reader!(Chunk, "a chunk object", |map, out, key, seen| {
    match &*key {
        "id" => {
            once(seen, 1)?;
            out.id = map.next_value()?;
        }
        "choices" => {
            once(seen, 2)?;
            out.choices = map.next_value()?;
        }
        "usage" | "error" => out.other |= present(&mut map)?,
        _ => {
            map.next_value::<IgnoredAny>()?;
        }
    }
});

object_reader!(Choice, "a choice object", |map, out, key, seen| {
    match &*key {
        "index" => {
            once(seen, 1)?;
            // Only a whole number counts, as for the full reader; a number builds no tree.
            out.index = map.next_value::<serde_json::Value>()?.as_u64();
        }
        "delta" => {
            once(seen, 2)?;
            out.delta = map.next_value()?;
        }
        "finish_reason" => out.other |= present(&mut map)?,
        _ => {
            map.next_value::<IgnoredAny>()?;
        }
    }
});

object_reader!(Delta, "a delta object", |map, out, key, seen| {
    match &*key {
        "content" => {
            once(seen, 1)?;
            out.content = map.next_value()?;
        }
        "refusal" => {
            once(seen, 2)?;
            out.refusal = map.next_value()?;
        }
        "reasoning_content" | "reasoning" | "tool_calls" => out.other |= present(&mut map)?,
        _ => {
            map.next_value::<IgnoredAny>()?;
        }
    }
});

/// What a plain chunk says: the completion id it carries and its text, in the order the full
/// reader emits them (`content`, then `refusal`; empty strings left out).
#[derive(Debug, PartialEq, Eq)]
pub(super) struct Plain<'a> {
    pub id: Option<Cow<'a, str>>,
    pub texts: [Option<Cow<'a, str>>; 2],
}

/// Reads `data` when it is a plain chunk; `None` sends it to the full reader (anything else,
/// malformed input included, whose error the full reader words).
pub(super) fn read(data: &str) -> Option<Plain<'_>> {
    let chunk: Chunk<'_> = serde_json::from_str(data).ok()?;
    if chunk.other {
        return None;
    }
    let mut texts = [None, None];
    if let Some(choices) = chunk.choices {
        // `choices[0]`: the one with `index` 0, else the first (as the full reader picks).
        let position = choices.iter().position(|c| c.index == Some(0)).unwrap_or(0);
        if let Some(choice) = choices.into_iter().nth(position) {
            if choice.other {
                return None;
            }
            if let Some(delta) = choice.delta {
                if delta.other {
                    return None;
                }
                texts = [delta.content.filter(|t| !t.is_empty()), delta.refusal.filter(|t| !t.is_empty())];
            }
        }
    }
    Some(Plain { id: chunk.id, texts })
}

#[cfg(test)]
mod tests {
    use super::super::StreamDecoder;
    use crate::providers::sse::SseEvent;

    fn event(data: &str) -> SseEvent {
        SseEvent { event: "message".into(), data: data.into(), id: None }
    }

    /// Every chunk gives the same events (or the same error) with and without the fast path,
    /// and the same id is kept for tool calls that come later.
    #[test]
    fn the_fast_path_and_the_full_reader_agree_on_every_chunk() {
        let chunks = [
            r#"{"id":"c1","object":"chat.completion.chunk","created":1,"model":"m","choices":[{"index":0,"delta":{"content":"Hi"},"logprobs":null,"finish_reason":null}]}"#,
            r#"{"id":"c1","choices":[{"index":0,"delta":{"role":"assistant","content":""}}]}"#,
            r#"{"id":"c1","choices":[{"index":0,"delta":{"content":"a \"quoted\" \u00e9\n line"}}]}"#,
            r#"{"id":"c1","choices":[{"index":0,"delta":{"content":null,"refusal":"no"}}]}"#,
            r#"{"id":"c1","choices":[{"index":0,"delta":{"content":"x","refusal":"y"}}]}"#,
            r#"{"id":"c1","choices":[{"index":1,"delta":{"content":"second"}},{"index":0,"delta":{"content":"first"}}]}"#,
            r#"{"id":"c1","choices":[{"index":"0","delta":{"content":"str index"}},{"index":0,"delta":{"content":"num"}}]}"#,
            r#"{"id":"c1","choices":[{"index":3,"delta":{"content":"only"}}]}"#,
            r#"{"id":"c1","choices":[]}"#,
            r#"{"id":"c1","choices":null}"#,
            r#"{"id":"c1"}"#,
            r#"{"id":7,"choices":[{"index":0,"delta":{"content":"numeric id"}}]}"#,
            r#"{"id":"c1","choices":[{"index":0,"delta":{"content":"a","content":"b"}}]}"#,
            r#"{"id":"c1","choices":[{"index":0,"delta":{"content":["array"]}}]}"#,
            r#"{"id":"c1","choices":[{"index":0,"delta":"not an object"}]}"#,
            r#"{"id":"c1","choices":[{"index":0,"delta":null}]}"#,
            r#"{"id":"c1","choices":[[0,{"content":"an array as a choice"}]]}"#,
            r#"{"id":"c1","choices":[{"index":0,"delta":["a delta as an array"]}]}"#,
            r#"["a chunk as an array"]"#,
            r#"{"id":"c1","choices":{"index":0}}"#,
            r#"{"id":"c1","choices":[{"index":0,"delta":{"content":"t"},"finish_reason":"stop"}]}"#,
            r#"{"id":"c1","choices":[{"index":0,"delta":{"content":"t"},"finish_reason":null}],"usage":null}"#,
            r#"{"id":"c1","choices":[],"usage":{"prompt_tokens":3,"completion_tokens":4}}"#,
            r#"{"id":"c1","usage":null,"usage":{"prompt_tokens":3,"completion_tokens":4}}"#,
            r#"{"error":{"message":"boom","type":"server_error"}}"#,
            r#"{"error":null,"choices":[{"index":0,"delta":{"content":"fine"}}]}"#,
            r#"{"id":"c1","choices":[{"index":0,"delta":{"reasoning_content":"think"}}]}"#,
            r#"{"id":"c1","choices":[{"index":0,"delta":{"reasoning":"","content":"x"}}]}"#,
            r#"{"id":"c1","choices":[{"index":0,"delta":{"reasoning_content":null,"content":"x"}}]}"#,
            r#"{"id":"c1","choices":[{"index":0,"delta":{"tool_calls":[{"index":0,"id":"call_1","function":{"name":"f","arguments":"{}"}}]}}]}"#,
            r#"{"id":"c1","choices":[{"index":0,"delta":{"tool_calls":null,"content":"x"}}]}"#,
            r#"{"id":"c1","choices":[{"index":0,"delta":{"content":"x"}}],"extra":{"nested":[1,2,{"a":"b"}]}}"#,
            r#"{"\u0069d":"escaped key","choices":[{"index":0,"delta":{"cont\u0065nt":"escaped"}}]}"#,
            r#"{"id":"c1","choices":[{"index":0,"delta":{"content":"x"}}]"#,
            r#"not json"#,
            r#"{"id":"c1","choices":[{"index":18446744073709551616,"delta":{"content":"big"}}]}"#,
        ];
        for data in chunks {
            let mut fast = StreamDecoder::new();
            let mut full = StreamDecoder::new();
            let a = fast.decode(&event(data), true).map_err(|e| e.0);
            let b = full.decode(&event(data), false).map_err(|e| e.0);
            assert_eq!(a, b, "events differ for {data}");
            assert_eq!(fast.completion_id, full.completion_id, "ids differ for {data}");
            assert_eq!(fast.failed, full.failed, "failure differs for {data}");
            assert_eq!(fast.finished, full.finished, "finish differs for {data}");
            // Later chunks (a tool call with no id uses the completion id) agree as well.
            let later = r#"{"choices":[{"index":0,"delta":{"tool_calls":[{"index":0,"function":{"name":"f","arguments":"{}"}}]},"finish_reason":"tool_calls"}]}"#;
            let a = fast.decode(&event(later), true).map_err(|e| e.0);
            let b = full.decode(&event(later), false).map_err(|e| e.0);
            assert_eq!(a, b, "later events differ after {data}");
        }
    }

    /// Only plain chunks take the fast path (the others are the full reader's to word).
    #[test]
    fn only_plain_chunks_are_read_by_the_fast_path() {
        assert!(super::read(r#"{"id":"c","choices":[{"index":0,"delta":{"content":"Hi"}}]}"#).is_some());
        assert!(
            super::read(r#"{"id":"c","choices":[{"index":0,"delta":{},"finish_reason":"stop"}]}"#).is_none()
        );
        assert!(super::read(r#"["c"]"#).is_none());
        assert!(super::read(r#"{"choices":[[0,{"content":"x"}]]}"#).is_none());
        assert!(super::read(r#"{"usage":{}}"#).is_none());
    }
}
