//! PLACEHOLDER until the sanitizer lands (escaped text only).
/// Sanitized HTML.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
#[serde(transparent)]
pub struct SafeHtml(String);
/// Markdown to sanitized HTML.
pub fn render_markdown(text: &str) -> SafeHtml {
    SafeHtml(format!("<p>{}</p>", crate::web::sse::escape_text(text)))
}
