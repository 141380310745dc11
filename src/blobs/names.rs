//! Uploaded file names: kept as metadata only (blobs are stored under their hash), cleaned for
//! display, and encoded for download headers (SECURITY 15, RFC 6266 and RFC 8187).

/// File names longer than this (in bytes) are cut: it is the usual file-system limit.
const MAX_NAME_BYTES: usize = 255;

/// Extensions up to this length survive truncation, so a long name still opens with the right
/// program.
const MAX_EXTENSION_BYTES: usize = 16;

/// A file name kept as metadata only: control characters, path separators (`/` and `\`), bidi
/// controls (U+202A–U+202E, U+2066–U+2069, and the LRM/RLM/ALM marks) and leading dots removed,
/// trimmed, at most 255 bytes (cut at a char boundary, keeping a short extension), `file` when
/// nothing is left. Never used to build a path.
pub fn clean_file_name(name: &str) -> String {
    let kept: String = name.chars().filter(|&c| !is_dropped(c)).collect();
    let trimmed = kept.trim().trim_start_matches(|c: char| c == '.' || c.is_whitespace());
    let short = truncate(trimmed, MAX_NAME_BYTES);
    let short = short.trim_end();
    if short.is_empty() { "file".to_owned() } else { short.to_owned() }
}

fn is_dropped(c: char) -> bool {
    c.is_control()
        || matches!(c, '/' | '\\')
        // Bidi embeddings, overrides and isolates, and the invisible direction marks: they make
        // `evil\u{202E}gpj.exe` display as `evilexe.jpg`.
        || matches!(c, '\u{202A}'..='\u{202E}' | '\u{2066}'..='\u{2069}' | '\u{200E}' | '\u{200F}' | '\u{061C}')
}

fn truncate(name: &str, max: usize) -> String {
    if name.len() <= max {
        return name.to_owned();
    }
    let extension = name
        .rfind('.')
        .map(|dot| &name[dot..])
        .filter(|ext| ext.len() > 1 && ext.len() <= MAX_EXTENSION_BYTES)
        .unwrap_or("");
    let stem = &name[..name.len() - extension.len()];
    format!("{}{extension}", cut_at_char_boundary(stem, max - extension.len()))
}

fn cut_at_char_boundary(s: &str, max: usize) -> &str {
    let mut end = max.min(s.len());
    while !s.is_char_boundary(end) {
        end -= 1;
    }
    &s[..end]
}

/// A download header value: `attachment; filename="<ASCII fallback, quotes/backslashes/control
/// chars replaced>"; filename*=UTF-8''<RFC 5987 percent-encoding>` (RFC 6266). `inline` variant for
/// verified raster images. The name is cleaned with [`clean_file_name`] first, and the result is
/// printable ASCII only, so it is always a valid header value.
pub fn content_disposition(file_name: &str, inline: bool) -> String {
    let name = clean_file_name(file_name);
    let fallback: String = name
        .chars()
        .map(|c| match c {
            // `%` too: some browsers percent-decode the plain `filename` parameter.
            '"' | '\\' | '%' => '_',
            ' ' => ' ',
            c if c.is_ascii_graphic() => c,
            _ => '_',
        })
        .collect();
    let mut encoded = String::with_capacity(name.len() * 3);
    for b in name.bytes() {
        if is_attr_char(b) {
            encoded.push(char::from(b));
        } else {
            const HEX: &[u8; 16] = b"0123456789ABCDEF";
            encoded.push('%');
            encoded.push(char::from(HEX[usize::from(b >> 4)]));
            encoded.push(char::from(HEX[usize::from(b & 0x0f)]));
        }
    }
    let disposition = if inline { "inline" } else { "attachment" };
    format!("{disposition}; filename=\"{fallback}\"; filename*=UTF-8''{encoded}")
}

/// RFC 8187 `attr-char`: what may appear unencoded in an extended parameter value.
fn is_attr_char(b: u8) -> bool {
    b.is_ascii_alphanumeric()
        || matches!(b, b'!' | b'#' | b'$' | b'&' | b'+' | b'-' | b'.' | b'^' | b'_' | b'`' | b'|' | b'~')
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used)]

    use super::*;

    /// The two parameters of a header value, the extended one percent-decoded.
    fn parse(header: &str) -> (String, String, String) {
        let (disposition, rest) = header.split_once("; filename=\"").unwrap();
        let (fallback, rest) = rest.split_once("\"; filename*=UTF-8''").unwrap();
        let mut bytes = Vec::new();
        let mut it = rest.bytes();
        while let Some(b) = it.next() {
            if b == b'%' {
                let hex: String =
                    [it.next().unwrap(), it.next().unwrap()].iter().map(|&b| char::from(b)).collect();
                bytes.push(u8::from_str_radix(&hex, 16).unwrap());
            } else {
                assert!(is_attr_char(b), "unencoded {:?}", char::from(b));
                bytes.push(b);
            }
        }
        (disposition.to_owned(), fallback.to_owned(), String::from_utf8(bytes).unwrap())
    }

    fn assert_safe_header(header: &str) {
        assert!(header.bytes().all(|b| (0x20..0x7f).contains(&b)), "not printable ASCII: {header:?}");
        let (_, fallback, decoded) = parse(header);
        assert!(!fallback.contains(['"', '\\', '/', '%']), "{fallback:?}");
        assert!(!decoded.contains(['/', '\\']), "{decoded:?}");
        assert!(!decoded.starts_with('.'), "{decoded:?}");
        assert!(!decoded.chars().any(char::is_control), "{decoded:?}");
    }

    #[test]
    fn path_traversal_names_are_flattened() {
        let header = content_disposition("../../../app/static/x.js", false);
        assert_safe_header(&header);
        assert_eq!(header, "attachment; filename=\"appstaticx.js\"; filename*=UTF-8''appstaticx.js");
        assert_eq!(clean_file_name("/etc/passwd"), "etcpasswd");
        assert_eq!(clean_file_name("C:\\Windows\\system32\\x.dll"), "C:Windowssystem32x.dll");
        assert_eq!(clean_file_name("..\\..\\boot.ini"), "boot.ini");
    }

    #[test]
    fn reserved_device_names_are_just_metadata() {
        // `CON` is only dangerous as a Windows path; it is never one here, and browsers rename
        // reserved names themselves when saving.
        let header = content_disposition("CON", false);
        assert_safe_header(&header);
        assert_eq!(header, "attachment; filename=\"CON\"; filename*=UTF-8''CON");
    }

    #[test]
    fn quotes_and_backslashes_cannot_break_out() {
        let header = content_disposition("a\"; filename=\"evil.html", false);
        assert_safe_header(&header);
        let (_, fallback, decoded) = parse(&header);
        assert_eq!(fallback, "a_; filename=_evil.html");
        assert_eq!(decoded, "a\"; filename=\"evil.html");
        let header = content_disposition("50% off \"sale\".pdf", true);
        assert_safe_header(&header);
        assert!(header.starts_with(
            "inline; filename=\"50_ off _sale_.pdf\"; filename*=UTF-8''50%25%20off%20%22sale%22.pdf"
        ));
    }

    #[test]
    fn control_characters_are_removed() {
        let header = content_disposition("a\r\nSet-Cookie: x=y\0\t\u{7f}\u{85}.txt", false);
        assert_safe_header(&header);
        assert_eq!(parse(&header).2, "aSet-Cookie: x=y.txt");
    }

    #[test]
    fn rtl_override_is_removed() {
        assert_eq!(clean_file_name("invoice\u{202E}fdp.exe"), "invoicefdp.exe");
        assert_eq!(
            clean_file_name("\u{2066}a\u{2067}b\u{2068}c\u{2069}\u{202A}\u{202B}\u{202C}\u{202D}\u{200F}d"),
            "abcd"
        );
        let header = content_disposition("invoice\u{202E}fdp.exe", false);
        assert_safe_header(&header);
        assert!(!header.contains("%E2%80%AE"));
    }

    #[test]
    fn unicode_names_use_the_extended_parameter() {
        let header = content_disposition("résumé 🎉.pdf", false);
        assert_safe_header(&header);
        let (disposition, fallback, decoded) = parse(&header);
        assert_eq!(disposition, "attachment");
        assert_eq!(fallback, "r_sum_ _.pdf");
        assert_eq!(decoded, "résumé 🎉.pdf");
        assert!(header.ends_with("filename*=UTF-8''r%C3%A9sum%C3%A9%20%F0%9F%8E%89.pdf"));
    }

    #[test]
    fn long_names_are_cut_at_a_char_boundary() {
        let header = content_disposition(&"x".repeat(1000), false);
        assert_safe_header(&header);
        assert_eq!(parse(&header).2.len(), 255);
        let long = format!("{}.jpeg", "日".repeat(1000));
        let cleaned = clean_file_name(&long);
        assert!(cleaned.len() <= 255, "{}", cleaned.len());
        assert!(cleaned.ends_with("日.jpeg"), "the extension survives");
        let emoji = "🎉".repeat(300);
        let cleaned = clean_file_name(&emoji);
        assert_eq!(cleaned.len(), 252, "63 whole four-byte characters");
        // A "long extension" is just part of the name.
        let cleaned = clean_file_name(&format!("a.{}", "b".repeat(400)));
        assert_eq!(cleaned.len(), 255);
        assert!(cleaned.starts_with("a.bbb"));
    }

    #[test]
    fn clean_file_name_cases() {
        assert_eq!(clean_file_name("report.pdf"), "report.pdf");
        assert_eq!(clean_file_name("  spaced name.txt  "), "spaced name.txt");
        assert_eq!(clean_file_name(".bashrc"), "bashrc");
        assert_eq!(clean_file_name("...hidden"), "hidden");
        assert_eq!(clean_file_name(". . .x"), "x");
        assert_eq!(clean_file_name("a/.b"), "a.b");
        assert_eq!(clean_file_name("archive.tar.gz"), "archive.tar.gz");
        assert_eq!(clean_file_name(""), "file");
        assert_eq!(clean_file_name("."), "file");
        assert_eq!(clean_file_name(".."), "file");
        assert_eq!(clean_file_name("../"), "file");
        assert_eq!(clean_file_name("/"), "file");
        assert_eq!(clean_file_name("\0\r\n"), "file");
        assert_eq!(clean_file_name("\u{202E}"), "file");
        assert_eq!(clean_file_name("   "), "file");
        assert_eq!(clean_file_name("CON"), "CON");
        assert_eq!(clean_file_name("日本語.txt"), "日本語.txt");
        // Cleaning twice changes nothing.
        for name in ["../x", " .a ", &"é".repeat(300), "a\u{202E}b"] {
            let once = clean_file_name(name);
            assert_eq!(clean_file_name(&once), once);
        }
        assert_eq!(content_disposition("", false), "attachment; filename=\"file\"; filename*=UTF-8''file");
    }
}
