//! The one HTML escaper: every piece of user or model text that the server writes into HTML
//! outside Tera's autoescaping (streamed deltas, SVG charts, search highlights) goes through it.

/// Appends `s` escaped for HTML and XML text and attribute values. Characters XML 1.0 forbids
/// (C0 controls other than tab and newlines, U+FFFE, U+FFFF) are dropped, so the same output is
/// valid inside an SVG document.
pub fn escape_into(out: &mut String, s: &str) {
    for c in s.chars() {
        match c {
            '&' => out.push_str("&amp;"),
            '<' => out.push_str("&lt;"),
            '>' => out.push_str("&gt;"),
            '"' => out.push_str("&quot;"),
            '\'' => out.push_str("&#39;"),
            '\t' | '\n' | '\r' => out.push(c),
            c if c < ' ' || c == '\u{FFFE}' || c == '\u{FFFF}' => {}
            c => out.push(c),
        }
    }
}

/// `s` escaped for HTML (see [`escape_into`]).
pub fn escape_text(s: &str) -> String {
    let mut out = String::with_capacity(s.len() + 8);
    escape_into(&mut out, s);
    out
}

/// A search snippet as HTML: its text escaped, its marks wrapped in `<mark>`.
pub fn highlight(snippet: &crate::model::search::Snippet) -> String {
    let text = snippet.text.as_str();
    let mut html = String::with_capacity(text.len() + 32);
    let mut at = 0;
    for m in &snippet.marks {
        let (Some(before), Some(inner)) = (text.get(at..m.start), text.get(m.clone())) else { continue };
        escape_into(&mut html, before);
        html.push_str("<mark>");
        escape_into(&mut html, inner);
        html.push_str("</mark>");
        at = m.end;
    }
    escape_into(&mut html, text.get(at..).unwrap_or_default());
    html
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn markup_quotes_and_forbidden_characters() {
        assert_eq!(escape_text("<a href=\"x\">&'</a>"), "&lt;a href=&quot;x&quot;&gt;&amp;&#39;&lt;/a&gt;");
        assert_eq!(escape_text("a\u{0}b\u{7}c\td\ne\u{FFFF}"), "abc\td\ne");
        assert_eq!(escape_text("żółw 🐢"), "żółw 🐢");
    }

    #[test]
    fn snippets_are_escaped_and_only_their_marks_are_markup() {
        use crate::model::search::Snippet;
        let s = Snippet { text: "…a <b>bold</b> & \"x\"…".into(), marks: vec![8..12, 20..21] };
        assert_eq!(
            highlight(&s),
            "…a &lt;b&gt;<mark>bold</mark>&lt;/b&gt; &amp; &quot;<mark>x</mark>&quot;…"
        );
        // Ranges that do not fall on the text are ignored, never a panic.
        let odd = Snippet { text: "żółw".into(), marks: vec![1..2, 3..99] };
        assert_eq!(highlight(&odd), "żółw");
    }
}
