//! Embeddings with `POST /embeddings` (OpenAI, Ollama, vLLM and every compatible server).

use serde_json::{Value, json};

use crate::providers::types::{Embeddings, StreamParseError};

/// The embeddings URL (`POST /embeddings`) under an API base URL.
pub fn embeddings_endpoint(base_url: &str) -> String {
    let base = base_url.trim().trim_end_matches('/');
    let base = base.strip_suffix("/chat/completions").unwrap_or(base);
    format!("{base}/embeddings")
}

/// The body of an embeddings request (floats, so every compatible server understands it).
pub fn build_embeddings(model: &str, inputs: &[String]) -> Value {
    json!({ "model": model, "input": inputs, "encoding_format": "float" })
}

/// An embeddings answer: `data[].embedding` put in `index` order, `usage.prompt_tokens`.
pub fn parse_embeddings(body: &[u8]) -> Result<Embeddings, StreamParseError> {
    parse_embeddings_inner(body).map_err(StreamParseError)
}

fn parse_embeddings_inner(body: &[u8]) -> Result<Embeddings, String> {
    let v: Value = serde_json::from_slice(body).map_err(|e| format!("embeddings: {e}"))?;
    let data = v.get("data").and_then(Value::as_array).ok_or_else(|| "embeddings: no data".to_string())?;
    let mut indexed: Vec<(u64, Vec<f32>)> = Vec::with_capacity(data.len());
    for (i, d) in data.iter().enumerate() {
        let vector = d
            .get("embedding")
            .and_then(Value::as_array)
            .ok_or_else(|| "embeddings: an item has no embedding array".to_string())?
            .iter()
            .map(|x| {
                x.as_f64().map(|f| f as f32).ok_or_else(|| "embeddings: a value is not a number".to_string())
            })
            .collect::<Result<Vec<f32>, _>>()?;
        indexed.push((d.get("index").and_then(Value::as_u64).unwrap_or(i as u64), vector));
    }
    indexed.sort_by_key(|(i, _)| *i);
    Ok(Embeddings {
        vectors: indexed.into_iter().map(|(_, v)| v).collect(),
        input_tokens: v.pointer("/usage/prompt_tokens").and_then(Value::as_u64),
    })
}
