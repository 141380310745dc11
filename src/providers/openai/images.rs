//! OpenAI's Images API: `POST /images/generations` (JSON) for a new image, `POST /images/edits`
//! (multipart/form-data, the input images as `image[]` file parts) to draw from given images.
//! Both answer `{created, data: [{b64_json}], usage}`; GPT image models always answer base64.

use serde_json::{Value, json};

use crate::providers::images::{ImageAnswer, ImageLimits, ImageRequest, ImageUsage, decode_image};
use crate::providers::types::StreamParseError;

/// The API root under a base URL (a base that names the chat endpoint is cut back).
fn root(base_url: &str) -> &str {
    let base = base_url.trim().trim_end_matches('/');
    base.strip_suffix("/chat/completions").unwrap_or(base)
}

/// `POST {base}/images/generations`.
pub fn images_generations_endpoint(base_url: &str) -> String {
    format!("{}/images/generations", root(base_url))
}

/// `POST {base}/images/edits`.
pub fn images_edits_endpoint(base_url: &str) -> String {
    format!("{}/images/edits", root(base_url))
}

/// DALL·E answers with a link unless asked for base64; GPT image models take no such field
/// (they always answer base64).
fn wants_format_field(model: &str) -> bool {
    model.to_ascii_lowercase().starts_with("dall-e")
}

/// The JSON body of a generation: one image.
pub fn build_image_generation(req: &ImageRequest) -> Value {
    let mut body = json!({ "model": req.model, "prompt": req.prompt, "n": 1 });
    if wants_format_field(&req.model) {
        body["response_format"] = json!("b64_json");
    }
    body
}

/// A name fit for a multipart header: no quotes, no line breaks, no path.
fn part_name(name: &str, i: usize) -> String {
    let cleaned: String =
        name.chars().filter(|c| !c.is_control() && !matches!(c, '"' | '\\' | '/')).take(100).collect();
    if cleaned.trim().is_empty() { format!("image-{}", i + 1) } else { cleaned }
}

/// The multipart body of an edit and its `Content-Type` (with `boundary`): `model`, `prompt`,
/// `n`, then each input image as an `image[]` file part.
pub fn build_image_edit(req: &ImageRequest, boundary: &str) -> (Vec<u8>, String) {
    let mut body = Vec::new();
    let mut field = |name: &str, value: &str| {
        body.extend_from_slice(
            format!("--{boundary}\r\nContent-Disposition: form-data; name=\"{name}\"\r\n\r\n{value}\r\n")
                .as_bytes(),
        );
    };
    field("model", &req.model);
    field("prompt", &req.prompt);
    field("n", "1");
    if wants_format_field(&req.model) {
        field("response_format", "b64_json");
    }
    for (i, image) in req.inputs.iter().enumerate() {
        body.extend_from_slice(
            format!(
                "--{boundary}\r\nContent-Disposition: form-data; name=\"image[]\"; filename=\"{}\"\r\nContent-Type: {}\r\n\r\n",
                part_name(&image.name, i),
                image.mime
            )
            .as_bytes(),
        );
        body.extend_from_slice(&image.bytes);
        body.extend_from_slice(b"\r\n");
    }
    body.extend_from_slice(format!("--{boundary}--\r\n").as_bytes());
    (body, format!("multipart/form-data; boundary={boundary}"))
}

/// An Images API answer: every `data[].b64_json` decoded and checked, and the usage.
pub fn parse_images(body: &[u8], limits: &ImageLimits) -> Result<ImageAnswer, StreamParseError> {
    parse_inner(body, limits).map_err(StreamParseError)
}

fn parse_inner(body: &[u8], limits: &ImageLimits) -> Result<ImageAnswer, String> {
    let v: Value = serde_json::from_slice(body).map_err(|_| "images: the answer is not JSON".to_string())?;
    let data = v.get("data").and_then(Value::as_array).map(Vec::as_slice).unwrap_or_default();
    if data.is_empty() {
        return Err("images: the answer holds no image".into());
    }
    if data.len() > limits.max_images {
        return Err(format!(
            "images: the answer holds {} images, more than the {} asked for",
            data.len(),
            limits.max_images
        ));
    }
    let mut images = Vec::with_capacity(data.len());
    for item in data {
        match item.get("b64_json").and_then(Value::as_str) {
            Some(b64) => images.push(decode_image(b64, limits).map_err(|e| format!("images: {e}"))?),
            None if item.get("url").is_some() => {
                return Err("images: the answer links to the image instead of holding it".into());
            }
            None => return Err("images: an item of the answer holds no image".into()),
        }
    }
    let usage = v.get("usage").filter(|u| u.is_object()).map(|u| {
        let n = |p: &str| u.pointer(p).and_then(Value::as_u64).unwrap_or(0);
        let input = n("/input_tokens");
        let image_input = n("/input_tokens_details/image_tokens").min(input);
        ImageUsage {
            text_input_tokens: input - image_input,
            image_input_tokens: image_input,
            output_tokens: n("/output_tokens"),
        }
    });
    Ok(ImageAnswer { images, text: String::new(), usage })
}
