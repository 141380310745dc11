//! Embeddings as callers ask for them: OpenAI's `POST /v1/embeddings` (a string or a list of
//! strings; floats or base64 as the SDK asks) and Google's `:embedContent` and
//! `:batchEmbedContents`. Token arrays are refused: Arbor does not know each model's tokenizer.

use base64::Engine as _;
use serde_json::{Value, json};

use super::ApiError;

/// The most inputs one request may embed (OpenAI's own limit).
pub const MAX_INPUTS: usize = 2048;

/// What an embeddings request asks for.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Request {
    /// The model as sent.
    pub model: String,
    /// The texts, in order.
    pub inputs: Vec<String>,
    /// Whether to answer with base64 (little-endian `f32`s) rather than float arrays.
    pub base64: bool,
}

fn check_inputs(inputs: &[String], param: &str) -> Result<(), ApiError> {
    if inputs.is_empty() {
        return Err(ApiError::invalid("Give at least one input.", Some(param)));
    }
    if inputs.len() > MAX_INPUTS {
        return Err(ApiError::invalid(
            format!("At most {MAX_INPUTS} inputs may be embedded at once."),
            Some(param),
        ));
    }
    if inputs.iter().any(String::is_empty) {
        return Err(ApiError::invalid("An input is empty.", Some(param)));
    }
    Ok(())
}

/// Parses `POST /v1/embeddings`.
pub fn parse_openai(body: &Value) -> Result<Request, ApiError> {
    let obj = body.as_object().ok_or_else(|| ApiError::invalid("The body must be a JSON object.", None))?;
    let model = super::model_field(obj, "model is required.")?;
    let bad = || ApiError::invalid("input must be a string or an array of strings.", Some("input"));
    let inputs = match body.get("input") {
        Some(Value::String(s)) => vec![s.clone()],
        Some(Value::Array(items)) => {
            if items.len() > MAX_INPUTS {
                return Err(ApiError::invalid(
                    format!("At most {MAX_INPUTS} inputs may be embedded at once."),
                    Some("input"),
                ));
            }
            items
                .iter()
                .map(|i| i.as_str().map(str::to_string).ok_or_else(bad))
                .collect::<Result<Vec<_>, _>>()?
        }
        _ => return Err(bad()),
    };
    check_inputs(&inputs, "input")?;
    let base64 = match body.get("encoding_format").and_then(Value::as_str) {
        None | Some("float") => false,
        Some("base64") => true,
        Some(_) => {
            return Err(ApiError::invalid(
                "encoding_format must be float or base64.",
                Some("encoding_format"),
            ));
        }
    };
    Ok(Request { model, inputs, base64 })
}

/// The OpenAI `list` of embeddings.
pub fn openai_json(model: &str, vectors: &[Vec<f32>], base64: bool, input_tokens: u64) -> Value {
    let data: Vec<Value> = vectors
        .iter()
        .enumerate()
        .map(|(index, v)| {
            let embedding = if base64 {
                let bytes: Vec<u8> = v.iter().flat_map(|f| f.to_le_bytes()).collect();
                Value::String(base64::engine::general_purpose::STANDARD.encode(bytes))
            } else {
                json!(v)
            };
            json!({ "object": "embedding", "index": index, "embedding": embedding })
        })
        .collect();
    json!({
        "object": "list", "data": data, "model": model,
        "usage": { "prompt_tokens": input_tokens, "total_tokens": input_tokens },
    })
}

fn content_text(content: &Value, param: &str) -> Result<String, ApiError> {
    let parts = content
        .get("parts")
        .and_then(Value::as_array)
        .ok_or_else(|| ApiError::invalid("content.parts must be an array.", Some(param)))?;
    let text: Vec<&str> = parts.iter().filter_map(|p| p.get("text").and_then(Value::as_str)).collect();
    Ok(text.join("\n"))
}

/// Parses Google's `:embedContent` (one `content`) or `:batchEmbedContents` (`requests`).
pub fn parse_google(model: &str, body: &Value, batch: bool) -> Result<Request, ApiError> {
    let inputs = if batch {
        let requests = body
            .get("requests")
            .and_then(Value::as_array)
            .ok_or_else(|| ApiError::invalid("requests must be an array.", Some("requests")))?;
        if requests.len() > MAX_INPUTS {
            return Err(ApiError::invalid(
                format!("At most {MAX_INPUTS} inputs may be embedded at once."),
                Some("requests"),
            ));
        }
        requests
            .iter()
            .enumerate()
            .map(|(i, r)| {
                content_text(r.get("content").unwrap_or(&Value::Null), &format!("requests[{i}].content"))
            })
            .collect::<Result<Vec<_>, _>>()?
    } else {
        vec![content_text(body.get("content").unwrap_or(&Value::Null), "content")?]
    };
    check_inputs(&inputs, if batch { "requests" } else { "content" })?;
    Ok(Request { model: model.to_string(), inputs, base64: false })
}

/// Google's answer: `{"embedding": …}` for one, `{"embeddings": […]}` for a batch.
pub fn google_json(vectors: &[Vec<f32>], batch: bool) -> Value {
    if batch {
        json!({ "embeddings": vectors.iter().map(|v| json!({ "values": v })).collect::<Vec<_>>() })
    } else {
        json!({ "embedding": { "values": vectors.first().cloned().unwrap_or_default() } })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn requests_parse_and_answers_have_each_shape() {
        let r =
            parse_openai(&json!({ "model": "m", "input": ["a", "b"], "encoding_format": "base64" })).unwrap();
        assert_eq!((r.inputs.len(), r.base64), (2, true));
        let answer = openai_json("m", &[vec![1.0, -2.5]], true, 3);
        let raw = base64::engine::general_purpose::STANDARD
            .decode(answer["data"][0]["embedding"].as_str().unwrap())
            .unwrap();
        assert_eq!(raw, [1.0f32.to_le_bytes(), (-2.5f32).to_le_bytes()].concat());
        assert_eq!(openai_json("m", &[vec![0.5]], false, 3)["data"][0]["embedding"], json!([0.5]));
        let g =
            parse_google("m", &json!({ "requests": [{ "content": { "parts": [{ "text": "x" }] } }] }), true)
                .unwrap();
        assert_eq!(g.inputs, ["x"]);
        assert_eq!(google_json(&[vec![0.25]], false)["embedding"]["values"], json!([0.25]));
        for (body, param) in [
            (json!({ "input": "x" }), "model"),
            (json!({ "model": "m", "input": [1, 2, 3] }), "input"),
            (json!({ "model": "m", "input": [] }), "input"),
            (json!({ "model": "m", "input": [""] }), "input"),
            (json!({ "model": "m", "input": vec!["x"; MAX_INPUTS + 1] }), "input"),
            (json!({ "model": "m", "input": "x", "encoding_format": "hex" }), "encoding_format"),
        ] {
            assert_eq!(parse_openai(&body).unwrap_err().param.as_deref(), Some(param), "{body}");
        }
        assert_eq!(parse_google("m", &json!({}), true).unwrap_err().param.as_deref(), Some("requests"));
    }
}
