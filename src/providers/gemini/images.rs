//! Gemini image models: `generateContent` with `generationConfig.responseModalities` of TEXT and
//! IMAGE; the prompt and any input images go as one user turn (`text` and `inlineData` parts),
//! the images come back as `inlineData` parts of the first candidate, beside optional text.

use base64::Engine as _;
use serde_json::{Value, json};

use crate::providers::images::{ImageAnswer, ImageLimits, ImageRequest, ImageUsage, decode_image};
use crate::providers::types::StreamParseError;

/// The body of an image call: the prompt, then the input images.
pub fn build_image_request(req: &ImageRequest) -> Value {
    let mut parts = vec![json!({ "text": req.prompt })];
    for image in &req.inputs {
        parts.push(json!({
            "inlineData": {
                "mimeType": image.mime,
                "data": base64::engine::general_purpose::STANDARD.encode(&image.bytes),
            }
        }));
    }
    json!({
        "contents": [{ "role": "user", "parts": parts }],
        "generationConfig": { "responseModalities": ["TEXT", "IMAGE"] },
    })
}

/// A `generateContent` answer: the first candidate's images decoded and checked, its text,
/// and the usage. An answer without an image says why (a block, a finish reason, the text).
pub fn parse_images(body: &[u8], limits: &ImageLimits) -> Result<ImageAnswer, StreamParseError> {
    parse_inner(body, limits).map_err(StreamParseError)
}

/// At most this much of the model's text is quoted when it answered without an image.
const QUOTED_CHARS: usize = 300;

fn parse_inner(body: &[u8], limits: &ImageLimits) -> Result<ImageAnswer, String> {
    let v: Value = serde_json::from_slice(body).map_err(|_| "images: the answer is not JSON".to_string())?;
    if let Some(reason) = v.pointer("/promptFeedback/blockReason").and_then(Value::as_str) {
        return Err(format!("images: Gemini refused the prompt ({reason})"));
    }
    let candidate = v.pointer("/candidates/0");
    let parts = candidate
        .and_then(|c| c.pointer("/content/parts"))
        .and_then(Value::as_array)
        .map(Vec::as_slice)
        .unwrap_or_default();
    let (mut images, mut text) = (Vec::new(), String::new());
    // Thoughts (and the draft images some models think with) are not the answer.
    for part in parts.iter().filter(|p| p.get("thought").and_then(Value::as_bool) != Some(true)) {
        if let Some(t) = part.get("text").and_then(Value::as_str) {
            text.push_str(t);
        }
        let Some(data) = part.get("inlineData").or_else(|| part.get("inline_data")) else { continue };
        if images.len() == limits.max_images {
            return Err(format!("images: the answer holds more than {} images", limits.max_images));
        }
        let b64 = data.get("data").and_then(Value::as_str).ok_or("images: an inline image holds no data")?;
        images.push(decode_image(b64, limits).map_err(|e| format!("images: {e}"))?);
    }
    if images.is_empty() {
        let finish = candidate.and_then(|c| c.get("finishReason")).and_then(Value::as_str);
        let text = text.trim();
        let mut quoted: String = text.chars().take(QUOTED_CHARS).collect();
        if quoted.len() < text.len() {
            quoted.push('…');
        }
        return Err(match (finish, quoted.is_empty()) {
            (_, false) => format!("images: the model answered without an image: {quoted}"),
            (Some(reason), true) if reason != "STOP" => format!("images: the model made no image ({reason})"),
            _ => "images: the answer holds no image".into(),
        });
    }
    let usage = v.get("usageMetadata").filter(|u| u.is_object()).map(|u| {
        let n = |k: &str| u.get(k).and_then(Value::as_u64).unwrap_or(0);
        ImageUsage {
            text_input_tokens: n("promptTokenCount"),
            image_input_tokens: 0,
            output_tokens: n("candidatesTokenCount") + n("thoughtsTokenCount"),
        }
    });
    Ok(ImageAnswer { images, text: text.trim().to_string(), usage })
}
