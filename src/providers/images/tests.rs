use base64::Engine as _;
use serde_json::{Value, json};

use super::*;
use crate::providers::{gemini, openai};

const OPENAI_IMAGES: &str = include_str!("../../../tests/fixtures/providers/openai/images.json");
const GEMINI_IMAGE: &str = include_str!("../../../tests/fixtures/providers/gemini/image.json");

const LIMITS: ImageLimits = ImageLimits { max_images: 4, max_image_bytes: 1024 * 1024 };

fn b64(bytes: &[u8]) -> String {
    base64::engine::general_purpose::STANDARD.encode(bytes)
}

/// The PNG the OpenAI fixture holds.
fn fixture_png() -> Vec<u8> {
    let v: Value = serde_json::from_str(OPENAI_IMAGES).unwrap();
    base64::engine::general_purpose::STANDARD.decode(v["data"][0]["b64_json"].as_str().unwrap()).unwrap()
}

fn request(inputs: Vec<InputImage>) -> ImageRequest {
    ImageRequest { model: "gpt-image-1".into(), prompt: "A lighthouse at dusk".into(), inputs }
}

fn message(e: StreamParseError) -> String {
    e.0
}

#[test]
fn openai_endpoints_sit_under_the_api_root() {
    for base in ["https://api.openai.com/v1", "https://api.openai.com/v1/", "https://x/v1/chat/completions"] {
        assert!(openai::images_generations_endpoint(base).ends_with("/v1/images/generations"), "{base}");
        assert!(openai::images_edits_endpoint(base).ends_with("/v1/images/edits"), "{base}");
    }
}

#[test]
fn openai_generation_body_is_the_documented_json() {
    let body = openai::build_image_generation(&request(Vec::new()));
    assert_eq!(body, json!({"model": "gpt-image-1", "prompt": "A lighthouse at dusk", "n": 1}));
    // DALL·E answers with links unless asked for base64.
    let dalle = ImageRequest { model: "dall-e-3".into(), ..request(Vec::new()) };
    assert_eq!(openai::build_image_generation(&dalle)["response_format"], "b64_json");
}

#[test]
fn openai_edit_is_multipart_with_image_file_parts() {
    let png = fixture_png();
    let inputs = vec![
        InputImage { mime: "image/png".into(), bytes: png.clone(), name: "cat \"1\".png".into() },
        InputImage { mime: "image/jpeg".into(), bytes: vec![0xff, 0xd8, 0xff, 0xe0], name: String::new() },
    ];
    let (body, content_type) = openai::build_image_edit(&request(inputs), "BOUNDARY42");
    assert_eq!(content_type, "multipart/form-data; boundary=BOUNDARY42");
    let text = String::from_utf8_lossy(&body);
    assert!(text.starts_with(
        "--BOUNDARY42\r\nContent-Disposition: form-data; name=\"model\"\r\n\r\ngpt-image-1\r\n"
    ));
    assert!(text.contains("name=\"prompt\"\r\n\r\nA lighthouse at dusk\r\n"));
    assert!(text.contains("name=\"n\"\r\n\r\n1\r\n"));
    // The quote in the name cannot end the header early; a nameless image gets one.
    assert!(text.contains("name=\"image[]\"; filename=\"cat 1.png\"\r\nContent-Type: image/png\r\n\r\n"));
    assert!(text.contains("name=\"image[]\"; filename=\"image-2\"\r\nContent-Type: image/jpeg\r\n\r\n"));
    assert!(body.windows(png.len()).any(|w| w == png.as_slice()), "the image bytes travel unchanged");
    assert!(text.ends_with("--BOUNDARY42--\r\n"));
    assert_eq!(text.matches("--BOUNDARY42\r\n").count(), 5);
}

#[test]
fn openai_answer_is_decoded_checked_and_its_usage_split() {
    let answer = openai::parse_images(OPENAI_IMAGES.as_bytes(), &LIMITS).unwrap();
    assert_eq!(answer.images.len(), 1);
    assert_eq!(answer.images[0].mime, "image/png");
    assert_eq!(answer.images[0].bytes, fixture_png());
    assert_eq!(
        answer.usage,
        Some(ImageUsage { text_input_tokens: 10, image_input_tokens: 40, output_tokens: 1056 })
    );
    assert!(answer.text.is_empty());
}

#[test]
fn openai_bad_answers_are_refused_clearly() {
    let png = b64(&fixture_png());
    let cases = [
        ("<html>502</html>".to_string(), "not JSON"),
        (json!({"created": 1, "data": []}).to_string(), "no image"),
        (json!({"created": 1}).to_string(), "no image"),
        (json!({"data": [{"url": "https://example.com/a.png"}]}).to_string(), "links to the image"),
        (json!({"data": [{"b64_json": "***not base64***"}]}).to_string(), "not valid base64"),
        (json!({"data": [{"b64_json": b64(b"<svg onload=alert(1)>")}]}).to_string(), "not a PNG"),
        (json!({"data": [{"b64_json": b64(&vec![0x89; 2 * 1024 * 1024])}]}).to_string(), "larger than"),
        (json!({"data": vec![json!({"b64_json": png}); 5]}).to_string(), "5 images"),
    ];
    for (body, expected) in cases {
        let err = message(openai::parse_images(body.as_bytes(), &LIMITS).unwrap_err());
        assert!(err.contains(expected), "{body:.80}: {err}");
    }
}

#[test]
fn a_base64_text_too_long_for_the_limit_is_refused_before_decoding() {
    let tiny = ImageLimits { max_images: 1, max_image_bytes: 300 };
    // 1,000 characters would decode to 750 bytes: refused by length alone.
    let err = decode_image(&"A".repeat(1000), &tiny).unwrap_err();
    assert!(err.contains("larger than 300 bytes"), "{err}");
    assert!(tiny.answer_cap() >= 400 && tiny.answer_cap() < 400 + 300 * 1024);
}

#[test]
fn gemini_request_asks_for_text_and_image_with_the_inputs_inline() {
    let png = fixture_png();
    let req = ImageRequest {
        model: "gemini-2.5-flash-image".into(),
        prompt: "Make it night".into(),
        inputs: vec![InputImage { mime: "image/png".into(), bytes: png.clone(), name: "a.png".into() }],
    };
    assert_eq!(
        gemini::build_image_request(&req),
        json!({
            "contents": [{"role": "user", "parts": [
                {"text": "Make it night"},
                {"inlineData": {"mimeType": "image/png", "data": b64(&png)}}
            ]}],
            "generationConfig": {"responseModalities": ["TEXT", "IMAGE"]}
        })
    );
    assert!(
        gemini::endpoint("https://generativelanguage.googleapis.com/v1beta", &req.model, false)
            .ends_with("/v1beta/models/gemini-2.5-flash-image:generateContent")
    );
}

#[test]
fn gemini_answer_gives_images_text_and_usage() {
    let answer = gemini::parse_images(GEMINI_IMAGE.as_bytes(), &LIMITS).unwrap();
    assert_eq!(answer.images.len(), 1);
    assert_eq!(answer.images[0].mime, "image/png");
    assert_eq!(answer.text, "Here is a lighthouse at dusk.");
    assert_eq!(
        answer.usage,
        Some(ImageUsage { text_input_tokens: 12, image_input_tokens: 0, output_tokens: 1298 })
    );
}

#[test]
fn gemini_bad_answers_are_refused_clearly() {
    let png = b64(&fixture_png());
    let image = |data: &str| json!({"inlineData": {"mimeType": "image/png", "data": data}});
    let answer = |parts: Vec<Value>, finish: &str| {
        json!({"candidates": [{"content": {"role": "model", "parts": parts}, "finishReason": finish}]})
            .to_string()
    };
    let cases = [
        ("not json".to_string(), "not JSON"),
        (json!({"promptFeedback": {"blockReason": "SAFETY"}}).to_string(), "refused the prompt (SAFETY)"),
        (
            answer(vec![json!({"text": "I can only describe it."})], "STOP"),
            "without an image: I can only describe it.",
        ),
        (answer(vec![], "IMAGE_SAFETY"), "no image (IMAGE_SAFETY)"),
        (json!({"candidates": []}).to_string(), "no image"),
        (answer(vec![image("%%%")], "STOP"), "not valid base64"),
        (answer(vec![image(&b64(b"GIF8 but not really"))], "STOP"), "not a PNG"),
        (answer(vec![json!({"inlineData": {"mimeType": "image/png"}})], "STOP"), "holds no data"),
        (answer(vec![image(&png); 5], "STOP"), "more than 4 images"),
    ];
    for (body, expected) in cases {
        let err = message(gemini::parse_images(body.as_bytes(), &LIMITS).unwrap_err());
        assert!(err.contains(expected), "{body:.80}: {err}");
    }
    // A draft image the model thought with is not the answer.
    let thought = json!({"thought": true, "inlineData": {"mimeType": "image/png", "data": png}});
    let body = answer(vec![thought, image(&png)], "STOP");
    assert_eq!(gemini::parse_images(body.as_bytes(), &LIMITS).unwrap().images.len(), 1);
}

#[test]
fn requests_are_checked_before_they_are_sent() {
    assert!(check_request(&request(Vec::new())).is_ok());
    let empty = ImageRequest { prompt: "  ".into(), ..request(Vec::new()) };
    assert!(check_request(&empty).unwrap_err().message.contains("prompt"));
    let long = ImageRequest { prompt: "x".repeat(MAX_PROMPT_CHARS + 1), ..request(Vec::new()) };
    assert!(check_request(&long).unwrap_err().message.contains("longer"));
    let one = InputImage { mime: "image/png".into(), bytes: fixture_png(), name: "a.png".into() };
    let many = request(vec![one; MAX_INPUT_IMAGES + 1]);
    assert!(check_request(&many).unwrap_err().message.contains("at most 16"));
    assert!(format!("{:?}", many.inputs[0]).contains("len"), "Debug shows sizes, not bytes");
}
