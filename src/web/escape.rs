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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn markup_quotes_and_forbidden_characters() {
        assert_eq!(escape_text("<a href=\"x\">&'</a>"), "&lt;a href=&quot;x&quot;&gt;&amp;&#39;&lt;/a&gt;");
        assert_eq!(escape_text("a\u{0}b\u{7}c\td\ne\u{FFFF}"), "abc\td\ne");
        assert_eq!(escape_text("żółw 🐢"), "żółw 🐢");
    }
}
