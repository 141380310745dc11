//! Image generation: the neutral request and answer, the checks every generated image passes
//! (how many, how large once decoded, bytes that really are an image), and the one call per
//! wire format: OpenAI's Images API (`/images/generations`, and `/images/edits` when input
//! images come along) and Gemini's `generateContent` with the IMAGE response modality.
//!
//! An image call is never retried: each attempt is billed, and an answer may take a minute.

use base64::Engine as _;

use super::client::{Endpoint, ProviderClient, WireFormat};
use super::types::{ProviderError, StreamParseError};
use super::{gemini, openai};

/// Longest prompt sent, in characters (OpenAI's limit for its GPT image models).
pub const MAX_PROMPT_CHARS: usize = 32_000;
/// Most input images one call sends (OpenAI takes up to 16 in an edit).
pub const MAX_INPUT_IMAGES: usize = 16;

/// One image to make (or to make from `inputs`).
#[derive(Debug, Clone, PartialEq)]
pub struct ImageRequest {
    /// The provider's model id.
    pub model: String,
    /// What to draw, or how to change the input images.
    pub prompt: String,
    /// Images to edit or draw from (none: a new image).
    pub inputs: Vec<InputImage>,
}

/// An image sent with a request.
#[derive(Clone, PartialEq)]
pub struct InputImage {
    /// Its verified type (`image/png`, …).
    pub mime: String,
    /// Its bytes.
    pub bytes: Vec<u8>,
    /// A file name for the multipart part (no path, no quotes).
    pub name: String,
}

/// Sizes only: the bytes are user content.
impl std::fmt::Debug for InputImage {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("InputImage").field("mime", &self.mime).field("len", &self.bytes.len()).finish()
    }
}

/// An image the provider made, decoded and checked.
#[derive(Clone, PartialEq)]
pub struct GeneratedImage {
    /// The type its bytes are (sniffed, never the provider's word).
    pub mime: &'static str,
    /// Its bytes.
    pub bytes: Vec<u8>,
}

impl std::fmt::Debug for GeneratedImage {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("GeneratedImage").field("mime", &self.mime).field("len", &self.bytes.len()).finish()
    }
}

/// Token counts of an image call, as the provider reported them.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct ImageUsage {
    /// Text input tokens (all input tokens where the provider does not tell them apart).
    pub text_input_tokens: u64,
    /// Input tokens of the input images (OpenAI tells them apart; they cost more).
    pub image_input_tokens: u64,
    /// Output tokens (the images, and any text).
    pub output_tokens: u64,
}

/// What an image call produced: at least one image.
#[derive(Debug, Clone, PartialEq)]
pub struct ImageAnswer {
    /// The images, in the provider's order.
    pub images: Vec<GeneratedImage>,
    /// Text the model wrote beside them (Gemini), possibly empty.
    pub text: String,
    /// Its usage, when reported.
    pub usage: Option<ImageUsage>,
}

/// What an answer may hold, decided before anything is allocated for it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ImageLimits {
    /// Most images kept from one answer (more are refused).
    pub max_images: usize,
    /// Largest decoded image, in bytes.
    pub max_image_bytes: usize,
}

impl ImageLimits {
    /// The most bytes a whole answer may take: each image's base64 and room for the rest.
    pub fn answer_cap(&self) -> usize {
        let per_image = self.max_image_bytes.div_ceil(3).saturating_mul(4);
        per_image.saturating_mul(self.max_images.max(1)).saturating_add(256 * 1024)
    }
}

/// Decodes one base64 image: refused before decoding when its text is too long for the limit,
/// after it when the bytes are not a PNG, JPEG, GIF or WebP image.
pub fn decode_image(data: &str, limits: &ImageLimits) -> Result<GeneratedImage, String> {
    let data = data.trim();
    if data.len() / 4 * 3 > limits.max_image_bytes.saturating_add(3) {
        return Err(too_big(limits));
    }
    let bytes = base64::engine::general_purpose::STANDARD
        .decode(data)
        .map_err(|_| "an image in the answer is not valid base64".to_string())?;
    if bytes.len() > limits.max_image_bytes {
        return Err(too_big(limits));
    }
    let kind = crate::blobs::Kind::sniff(&bytes);
    if !kind.is_raster_image() {
        return Err("an image in the answer is not a PNG, JPEG, GIF or WebP image".into());
    }
    Ok(GeneratedImage { mime: kind.mime(), bytes })
}

fn too_big(limits: &ImageLimits) -> String {
    format!("an image in the answer is larger than {} bytes, the limit per file", limits.max_image_bytes)
}

/// Refuses a request before it is sent: an empty or overlong prompt, too many input images.
fn check_request(req: &ImageRequest) -> Result<(), ProviderError> {
    let refuse = |message: String| ProviderError {
        status: 0,
        kind: "invalid_request".into(),
        message,
        retryable: false,
        retry_after_secs: None,
    };
    if req.prompt.trim().is_empty() {
        return Err(refuse("an image needs a prompt: say what to draw".into()));
    }
    if req.prompt.chars().count() > MAX_PROMPT_CHARS {
        return Err(refuse(format!("the prompt is longer than {MAX_PROMPT_CHARS} characters")));
    }
    if req.inputs.len() > MAX_INPUT_IMAGES {
        return Err(refuse(format!("an image call takes at most {MAX_INPUT_IMAGES} input images")));
    }
    Ok(())
}

/// A multipart boundary that no image is likely to contain.
fn boundary() -> String {
    format!("arbor-image-{:016x}{:016x}", rand::random::<u64>(), rand::random::<u64>())
}

impl ProviderClient {
    /// Makes images with `req.model`: OpenAI's Images API or Gemini's IMAGE modality (Anthropic
    /// makes none). The answer is read up to [`ImageLimits::answer_cap`] and every image in it
    /// is checked; an answer without an image is an error naming what came instead.
    pub async fn generate_images(
        &self,
        ep: &Endpoint,
        req: &ImageRequest,
        limits: &ImageLimits,
    ) -> Result<ImageAnswer, ProviderError> {
        check_request(req)?;
        type Parse = fn(&[u8], &ImageLimits) -> Result<ImageAnswer, StreamParseError>;
        let (b, parse): (_, Parse) = match ep.format {
            WireFormat::OpenAi if req.inputs.is_empty() => (
                self.http()
                    .post(openai::images_generations_endpoint(&ep.base_url))
                    .json(&openai::build_image_generation(req)),
                openai::parse_images,
            ),
            WireFormat::OpenAi => {
                let (body, content_type) = openai::build_image_edit(req, &boundary());
                (
                    self.http()
                        .post(openai::images_edits_endpoint(&ep.base_url))
                        .header(reqwest::header::CONTENT_TYPE, content_type)
                        .body(body),
                    openai::parse_images,
                )
            }
            WireFormat::Gemini => (
                self.http()
                    .post(gemini::endpoint(&ep.base_url, &req.model, false))
                    .json(&gemini::build_image_request(req)),
                gemini::parse_images,
            ),
            WireFormat::Anthropic => {
                return Err(ProviderError {
                    status: 0,
                    kind: "unsupported".into(),
                    message: "Anthropic's models do not make images".into(),
                    retryable: false,
                    retry_after_secs: None,
                });
            }
        };
        let body = self.exchange_capped(ep, b, limits.answer_cap()).await?;
        parse(&body, limits).map_err(|e| super::client::parse_failure(&e))
    }
}

#[cfg(test)]
mod tests;
