//! OpenAI's Responses API as an upstream, for OpenAI's own reasoning models (o-series, GPT-5):
//! only there does OpenAI stream reasoning summaries. The request asks for them
//! (`reasoning.summary: "auto"`) and keeps nothing at OpenAI (`store: false`); the stream's
//! `response.*` events become the neutral [`ProviderEvent`]s.

use serde_json::{Map, Value, json};

use crate::providers::types::*;

/// Whether `model` is one of OpenAI's reasoning models, which answer with summaries only
/// through the Responses API.
pub fn is_reasoning_model(model: &str) -> bool {
    let m = model.to_ascii_lowercase();
    ["o1", "o3", "o4"].iter().any(|p| m == *p || m.starts_with(&format!("{p}-")))
        || (m.starts_with("gpt-5") && !m.contains("chat"))
}

/// The `POST /responses` URL under an API base URL such as `https://api.openai.com/v1`.
pub fn endpoint(base_url: &str) -> String {
    let base = base_url.trim().trim_end_matches('/');
    let base = base.strip_suffix("/chat/completions").unwrap_or(base);
    format!("{base}/responses")
}

fn content(parts: &[Part], assistant: bool) -> Vec<Value> {
    parts
        .iter()
        .filter_map(|p| match p {
            Part::Text { text } if assistant => Some(json!({ "type": "output_text", "text": text })),
            Part::Text { text } => Some(json!({ "type": "input_text", "text": text })),
            Part::Image { mime, data_base64 } if !assistant => {
                Some(json!({ "type": "input_image", "image_url": format!("data:{mime};base64,{data_base64}") }))
            }
            Part::Document { mime, data_base64, name } if !assistant => Some(json!({
                "type": "input_file", "filename": name, "file_data": format!("data:{mime};base64,{data_base64}")
            })),
            _ => None,
        })
        .collect()
}

/// The input items for the conversation: messages, function calls and their outputs.
fn input(messages: &[ChatMessage]) -> Vec<Value> {
    let mut items = Vec::new();
    for m in messages {
        match m.role {
            ChatRole::User => {
                let parts = content(&m.parts, false);
                if !parts.is_empty() {
                    items.push(json!({ "type": "message", "role": "user", "content": parts }));
                }
            }
            ChatRole::Assistant => {
                let parts = content(&m.parts, true);
                if !parts.is_empty() {
                    items.push(json!({ "type": "message", "role": "assistant", "content": parts }));
                }
                for p in &m.parts {
                    if let Part::ToolCall { id, name, arguments, .. } = p {
                        items.push(json!({ "type": "function_call", "call_id": id, "name": name, "arguments": arguments.to_string() }));
                    }
                }
            }
            ChatRole::Tool => {
                for p in &m.parts {
                    if let Part::ToolResult { call_id, content, .. } = p {
                        items.push(
                            json!({ "type": "function_call_output", "call_id": call_id, "output": content }),
                        );
                    }
                }
            }
        }
    }
    items
}

/// The request body: the system prompt as `instructions`, reasoning summaries asked for.
pub fn build_request(req: &ChatRequest) -> Value {
    let mut body = Map::new();
    body.insert("model".into(), Value::String(req.model.clone()));
    if let Some(system) = req.system.as_deref().filter(|s| !s.trim().is_empty()) {
        body.insert("instructions".into(), Value::String(system.to_string()));
    }
    body.insert("input".into(), Value::Array(input(&req.messages)));
    if !req.tools.is_empty() {
        let tools: Vec<Value> = req
            .tools
            .iter()
            .map(|t| json!({ "type": "function", "name": t.name, "description": t.description, "parameters": t.parameters }))
            .collect();
        body.insert("tools".into(), Value::Array(tools));
        if let Some(choice) = &req.params.tool_choice {
            let choice = match choice {
                ToolChoice::Auto => json!("auto"),
                ToolChoice::None => json!("none"),
                ToolChoice::Required => json!("required"),
                ToolChoice::Tool(name) => json!({ "type": "function", "name": name }),
            };
            body.insert("tool_choice".into(), choice);
        }
    }
    let effort = match req.params.reasoning_effort {
        Some(ReasoningEffort::Low) => "low",
        Some(ReasoningEffort::High) => "high",
        _ => "medium",
    };
    body.insert("reasoning".into(), json!({ "effort": effort, "summary": "auto" }));
    if let Some(max) = req.params.max_output_tokens {
        body.insert("max_output_tokens".into(), Value::from(max));
    }
    body.insert("store".into(), Value::Bool(false));
    body.insert("stream".into(), Value::Bool(true));
    Value::Object(body)
}

/// Turns the `response.*` events of one streamed response into [`ProviderEvent`]s.
#[derive(Debug, Default)]
pub struct StreamDecoder {
    calls: usize,
    finished: bool,
}

impl StreamDecoder {
    /// A decoder for one stream.
    pub fn new() -> StreamDecoder {
        StreamDecoder::default()
    }

    /// One SSE event's data.
    pub fn on_event(
        &mut self,
        ev: &crate::providers::sse::SseEvent,
    ) -> Result<Vec<ProviderEvent>, StreamParseError> {
        if ev.data.trim().is_empty() {
            return Ok(Vec::new());
        }
        let v: Value = serde_json::from_str(&ev.data)
            .map_err(|e| StreamParseError(format!("a Responses event is not JSON: {e}")))?;
        let text = |key: &str| v.get(key).and_then(Value::as_str).unwrap_or_default().to_string();
        Ok(match v.get("type").and_then(Value::as_str).unwrap_or_default() {
            "response.output_text.delta" => vec![ProviderEvent::TextDelta(text("delta"))],
            "response.reasoning_summary_text.delta" => vec![ProviderEvent::ThoughtDelta(text("delta"))],
            "response.reasoning_summary_part.done" => vec![ProviderEvent::ThoughtDelta("\n\n".into())],
            "response.output_item.done"
                if v.pointer("/item/type").and_then(Value::as_str) == Some("function_call") =>
            {
                let item = &v["item"];
                let raw = item.get("arguments").and_then(Value::as_str).unwrap_or("{}");
                self.calls += 1;
                vec![ProviderEvent::ToolCall {
                    id: item.get("call_id").and_then(Value::as_str).unwrap_or_default().to_string(),
                    name: item.get("name").and_then(Value::as_str).unwrap_or_default().to_string(),
                    arguments: serde_json::from_str(raw).unwrap_or_else(|_| Value::String(raw.to_string())),
                    signature: None,
                }]
            }
            kind @ ("response.completed" | "response.incomplete") => {
                self.finished = true;
                let u = &v["response"]["usage"];
                let usage = Usage {
                    input_tokens: u.get("input_tokens").and_then(Value::as_u64).unwrap_or(0),
                    output_tokens: u.get("output_tokens").and_then(Value::as_u64).unwrap_or(0),
                    cached_input_tokens: u
                        .pointer("/input_tokens_details/cached_tokens")
                        .and_then(Value::as_u64)
                        .unwrap_or(0),
                    cache_written_input_tokens: 0,
                };
                let finish = match (kind, self.calls) {
                    ("response.incomplete", _) => FinishReason::Length,
                    (_, 0) => FinishReason::Stop,
                    _ => FinishReason::ToolCalls,
                };
                vec![ProviderEvent::Usage(usage), ProviderEvent::Finish(finish)]
            }
            "response.failed" | "error" => {
                self.finished = true;
                let message = v
                    .pointer("/response/error/message")
                    .or_else(|| v.get("message"))
                    .and_then(Value::as_str)
                    .unwrap_or("the response failed")
                    .to_string();
                vec![ProviderEvent::Error(ProviderError {
                    status: 0,
                    kind: "upstream".into(),
                    message,
                    retryable: false,
                    retry_after_secs: None,
                })]
            }
            _ => Vec::new(),
        })
    }

    /// The stream ended: without `response.completed` it was cut.
    pub fn finish(&mut self) -> Result<Vec<ProviderEvent>, StreamParseError> {
        if self.finished {
            Ok(Vec::new())
        } else {
            Err(StreamParseError("the Responses stream ended before response.completed".into()))
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::providers::sse::SseParser;

    const REASONING: &str = include_str!("../../../tests/fixtures/providers/openai/responses_reasoning.sse");
    const CALL: &str = include_str!("../../../tests/fixtures/providers/openai/responses_function_call.sse");

    fn decode(body: &str) -> Result<Vec<ProviderEvent>, StreamParseError> {
        let mut d = StreamDecoder::new();
        let mut out = Vec::new();
        for ev in SseParser::new().push(body.as_bytes()) {
            out.extend(d.on_event(&ev)?);
        }
        out.extend(d.finish()?);
        Ok(out)
    }

    #[test]
    fn reasoning_summaries_and_text_are_decoded_in_order() {
        let events = decode(REASONING).unwrap();
        let thought: String = events
            .iter()
            .filter_map(|e| if let ProviderEvent::ThoughtDelta(t) = e { Some(t.as_str()) } else { None })
            .collect();
        let text: String = events
            .iter()
            .filter_map(|e| if let ProviderEvent::TextDelta(t) = e { Some(t.as_str()) } else { None })
            .collect();
        assert!(
            thought.starts_with("**Thinking about sky colour**") && thought.contains("Rayleigh"),
            "{thought}"
        );
        assert_eq!(text, "The sky is blue because air scatters blue light most.");
        assert!(events.contains(&ProviderEvent::Usage(Usage {
            input_tokens: 31,
            output_tokens: 212,
            cached_input_tokens: 0,
            cache_written_input_tokens: 0
        })));
        assert_eq!(events.last(), Some(&ProviderEvent::Finish(FinishReason::Stop)));
    }

    #[test]
    fn a_function_call_is_one_complete_call() {
        let events = decode(CALL).unwrap();
        let calls: Vec<&ProviderEvent> =
            events.iter().filter(|e| matches!(e, ProviderEvent::ToolCall { .. })).collect();
        assert_eq!(calls.len(), 1);
        assert!(matches!(calls[0], ProviderEvent::ToolCall { id, name, arguments, .. }
            if id == "call_X7pQk2LmN9vR4sT1" && name == "get_weather" && arguments["city"] == "Paris"));
        assert_eq!(events.last(), Some(&ProviderEvent::Finish(FinishReason::ToolCalls)));
        // Cut before response.completed: an error, not a silent end.
        let cut = &REASONING[..REASONING.find("event: response.completed").unwrap()];
        assert!(decode(cut).is_err());
    }

    #[test]
    fn the_request_asks_for_summaries_and_carries_the_conversation() {
        let req = ChatRequest {
            model: "o4-mini".into(),
            system: Some("Be brief.".into()),
            messages: vec![
                ChatMessage { role: ChatRole::User, parts: vec![Part::Text { text: "Weather?".into() }] },
                ChatMessage {
                    role: ChatRole::Assistant,
                    parts: vec![Part::ToolCall {
                        id: "call_1".into(),
                        name: "get_weather".into(),
                        arguments: json!({ "city": "Paris" }),
                        signature: None,
                    }],
                },
                ChatMessage {
                    role: ChatRole::Tool,
                    parts: vec![Part::ToolResult {
                        call_id: "call_1".into(),
                        name: "get_weather".into(),
                        content: "rain".into(),
                        is_error: false,
                    }],
                },
            ],
            tools: vec![ToolSpec {
                name: "get_weather".into(),
                description: "Weather.".into(),
                parameters: json!({ "type": "object" }).into(),
            }],
            params: GenParams {
                reasoning_effort: Some(ReasoningEffort::High),
                max_output_tokens: Some(500),
                ..GenParams::default()
            },
            passthrough: None,
        };
        let body = build_request(&req);
        assert_eq!(body["instructions"], "Be brief.");
        assert_eq!(body["reasoning"], json!({ "effort": "high", "summary": "auto" }));
        assert_eq!((body["store"].clone(), body["stream"].clone()), (json!(false), json!(true)));
        let kinds: Vec<&str> =
            body["input"].as_array().unwrap().iter().map(|i| i["type"].as_str().unwrap()).collect();
        assert_eq!(kinds, ["message", "function_call", "function_call_output"]);
        assert_eq!(body["input"][1]["arguments"], "{\"city\":\"Paris\"}");
        assert_eq!(body["tools"][0]["name"], "get_weather");
        for (model, yes) in [
            ("o4-mini", true),
            ("o3", true),
            ("gpt-5", true),
            ("gpt-5-mini", true),
            ("gpt-5-chat-latest", false),
            ("gpt-4o-mini", false),
            ("omni", false),
        ] {
            assert_eq!(is_reasoning_model(model), yes, "{model}");
        }
        assert_eq!(endpoint("https://api.openai.com/v1/"), "https://api.openai.com/v1/responses");
    }
}
