//! Embeddings with `batchEmbedContents`: one request per input, `embeddings[].values` back.

use serde_json::{Value, json};

use crate::providers::types::{Embeddings, StreamParseError};

/// URL of `batchEmbedContents` for `model`.
pub fn embeddings_endpoint(base_url: &str, model: &str) -> String {
    format!("{}/{}:batchEmbedContents", super::api_root(base_url), super::model_path(model))
}

/// The body of a `batchEmbedContents` call: one request per input.
pub fn build_embeddings(model: &str, inputs: &[String]) -> Value {
    let name = format!("models/{}", super::bare_model(model));
    let requests: Vec<Value> = inputs
        .iter()
        .map(|text| json!({ "model": name, "content": { "parts": [{ "text": text }] } }))
        .collect();
    json!({ "requests": requests })
}

/// A `batchEmbedContents` answer: `embeddings[].values` (Gemini reports no token count).
pub fn parse_embeddings(body: &[u8]) -> Result<Embeddings, StreamParseError> {
    parse_embeddings_inner(body).map_err(StreamParseError)
}

fn parse_embeddings_inner(body: &[u8]) -> Result<Embeddings, String> {
    let v: Value = serde_json::from_slice(body).map_err(|e| format!("embeddings: {e}"))?;
    let list = v
        .get("embeddings")
        .and_then(Value::as_array)
        .ok_or_else(|| "embeddings: no embeddings".to_string())?;
    let vectors = list
        .iter()
        .map(|e| {
            e.get("values")
                .and_then(Value::as_array)
                .ok_or_else(|| "embeddings: an item has no values".to_string())?
                .iter()
                .map(|x| {
                    x.as_f64()
                        .map(|f| f as f32)
                        .ok_or_else(|| "embeddings: a value is not a number".to_string())
                })
                .collect::<Result<Vec<f32>, _>>()
        })
        .collect::<Result<Vec<_>, _>>()?;
    Ok(Embeddings { vectors, input_tokens: None })
}
