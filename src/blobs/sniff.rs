//! What a blob is, decided by its bytes alone (SECURITY 11): the file name and the type the client
//! claimed are never trusted, so a `.png` that is really HTML is not an image.

/// How much of the start of a file the text check reads.
pub(crate) const SNIFF_LEN: usize = 64 * 1024;

/// Markup that a browser could run or render if it ever sniffed the file: such text is `Other`
/// (served as an opaque download), never `Text`.
const MARKUP: &[&[u8]] =
    &[b"<html", b"<head", b"<body", b"<script", b"<iframe", b"<svg", b"<?xml", b"<!doctype"];

/// What the bytes are, by their magic bytes (never by the file name or a claimed type).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Kind {
    /// PNG (`\x89PNG\r\n\x1a\n`).
    Png,
    /// JPEG (`FF D8 FF`).
    Jpeg,
    /// GIF87a or GIF89a.
    Gif,
    /// WebP (`RIFF....WEBP`).
    Webp,
    /// PDF (`%PDF-`). Never inline: PDFs can carry scripts.
    Pdf,
    /// Valid UTF-8 without NUL (or other binary control characters) in the first 64 KiB and without
    /// HTML/SVG/XML markers.
    Text,
    /// Anything else, including HTML, SVG and XML.
    Other,
}

impl Kind {
    /// Classifies bytes by their content.
    pub fn sniff(bytes: &[u8]) -> Kind {
        if bytes.starts_with(b"\x89PNG\r\n\x1a\n") {
            Kind::Png
        } else if bytes.starts_with(&[0xff, 0xd8, 0xff]) {
            Kind::Jpeg
        } else if bytes.starts_with(b"GIF87a") || bytes.starts_with(b"GIF89a") {
            Kind::Gif
        } else if bytes.starts_with(b"RIFF") && bytes.get(8..12) == Some(b"WEBP") {
            Kind::Webp
        } else if bytes.starts_with(b"%PDF-") {
            Kind::Pdf
        } else if is_plain_text(bytes) {
            Kind::Text
        } else {
            Kind::Other
        }
    }

    /// The `Content-Type` to serve it with.
    pub fn mime(self) -> &'static str {
        match self {
            Kind::Png => "image/png",
            Kind::Jpeg => "image/jpeg",
            Kind::Gif => "image/gif",
            Kind::Webp => "image/webp",
            Kind::Pdf => "application/pdf",
            Kind::Text => "text/plain; charset=utf-8",
            Kind::Other => "application/octet-stream",
        }
    }

    /// PNG, JPEG, GIF or WebP: the only kinds that may be shown inline.
    pub fn is_raster_image(self) -> bool {
        matches!(self, Kind::Png | Kind::Jpeg | Kind::Gif | Kind::Webp)
    }
}

fn is_plain_text(bytes: &[u8]) -> bool {
    let head = &bytes[..bytes.len().min(SNIFF_LEN)];
    let utf8 = match std::str::from_utf8(head) {
        Ok(_) => true,
        // The window may cut a character in two; that is only an error at the real end.
        Err(e) => e.error_len().is_none() && bytes.len() > head.len(),
    };
    utf8 && !head.iter().any(|&b| is_binary_control(b))
        && !MARKUP.iter().any(|m| contains_ignore_case(head, m))
}

/// NUL, and the C0 controls that text files do not use: binary formats (zip, ELF, …) are full of
/// them, while tab, newlines, form feed and escape (coloured logs) are ordinary in text.
fn is_binary_control(b: u8) -> bool {
    b < 0x20 && !matches!(b, b'\t' | b'\n' | b'\r' | 0x0c | 0x1b)
}

fn contains_ignore_case(haystack: &[u8], needle: &[u8]) -> bool {
    haystack.windows(needle.len()).any(|w| w.eq_ignore_ascii_case(needle))
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used)]

    use super::*;

    fn encoded(format: image::ImageFormat) -> Vec<u8> {
        let img = image::DynamicImage::ImageRgb8(image::RgbImage::from_pixel(2, 2, image::Rgb([9, 99, 199])));
        let mut out = std::io::Cursor::new(Vec::new());
        img.write_to(&mut out, format).unwrap();
        out.into_inner()
    }

    #[test]
    fn real_images_by_magic_bytes() {
        assert_eq!(Kind::sniff(&encoded(image::ImageFormat::Png)), Kind::Png);
        assert_eq!(Kind::sniff(&encoded(image::ImageFormat::Jpeg)), Kind::Jpeg);
        assert_eq!(Kind::sniff(&encoded(image::ImageFormat::Gif)), Kind::Gif);
        assert_eq!(Kind::sniff(&encoded(image::ImageFormat::WebP)), Kind::Webp);
        assert_eq!(Kind::sniff(b"GIF87a\x01\x00\x01\x00\x00\x00\x00;"), Kind::Gif);
        for kind in [Kind::Png, Kind::Jpeg, Kind::Gif, Kind::Webp] {
            assert!(kind.is_raster_image());
            assert!(kind.mime().starts_with("image/"));
        }
    }

    #[test]
    fn pdf_even_with_javascript_is_pdf_not_image() {
        let pdf =
            b"%PDF-1.7\n1 0 obj << /Type /Catalog /OpenAction << /S /JavaScript /JS (app.alert(1)) >> >>";
        assert_eq!(Kind::sniff(pdf), Kind::Pdf);
        assert!(!Kind::Pdf.is_raster_image());
        assert_eq!(Kind::Pdf.mime(), "application/pdf");
    }

    #[test]
    fn markup_is_never_text_or_image() {
        let cases: &[&[u8]] = &[
            b"<!DOCTYPE html><html><body>hi</body></html>",
            b"<html><script>alert(1)</script></html>",
            b"  \n<HTML>",
            b"<svg xmlns=\"http://www.w3.org/2000/svg\"><script>alert(document.domain)</script></svg>",
            b"<?xml version=\"1.0\"?><root/>",
            b"<?xml version=\"1.0\"?><svg onload=\"alert(1)\"/>",
            b"\xef\xbb\xbf<!doctype html>",
            b"some notes\n<ScRiPt>alert(1)</sCrIpT>",
            b"<iframe src=//evil>",
        ];
        for bytes in cases {
            let kind = Kind::sniff(bytes);
            assert_eq!(kind, Kind::Other, "{}", String::from_utf8_lossy(bytes));
            assert_eq!(kind.mime(), "application/octet-stream");
            assert!(!kind.is_raster_image());
        }
    }

    #[test]
    fn only_bytes_matter_not_names() {
        // What an upload of `cat.png` containing HTML looks like to the store: just its bytes.
        let fake_png = b"<html><img src=x onerror=alert(1)></html>";
        assert_eq!(Kind::sniff(fake_png), Kind::Other);
        // The PNG magic with HTML behind it is a (broken) PNG: served as image/png with nosniff,
        // and the decoder refuses it, so it never renders.
        let mut polyglot = b"\x89PNG\r\n\x1a\n".to_vec();
        polyglot.extend_from_slice(fake_png);
        assert_eq!(Kind::sniff(&polyglot), Kind::Png);
        // Almost-magic is not magic.
        assert_eq!(Kind::sniff(b"\x89PNG\r\n"), Kind::Other);
        assert_eq!(Kind::sniff(b"RIFF\0\0\0\0WAVEfmt "), Kind::Other);
        assert_eq!(Kind::sniff(b"RIFF"), Kind::Text);
        assert_eq!(Kind::sniff(b"GIF88a"), Kind::Text);
    }

    #[test]
    fn text_and_binary() {
        assert_eq!(Kind::sniff(b"plain notes\nline two\n"), Kind::Text);
        assert_eq!(Kind::sniff("Grüße, 日本語, emoji 🎉".as_bytes()), Kind::Text);
        assert_eq!(Kind::sniff(b"x < y and a<b"), Kind::Text);
        assert_eq!(Kind::sniff(b""), Kind::Text);
        assert_eq!(Kind::Text.mime(), "text/plain; charset=utf-8");
        assert_eq!(Kind::sniff(b"text with a \0 NUL"), Kind::Other);
        assert_eq!(Kind::sniff(b"\xff\xfe\x00h\x00i"), Kind::Other);
        assert_eq!(Kind::sniff(b"latin-1 caf\xe9"), Kind::Other);
        assert_eq!(Kind::sniff(&[0x7f, b'E', b'L', b'F', 2, 1, 1, 0]), Kind::Other);
        assert_eq!(Kind::sniff(b"PK\x03\x04zip"), Kind::Other);
        assert_eq!(Kind::sniff(b"col\tcol\r\n\x1b[31mred\x1b[0m\x0c"), Kind::Text);
        assert_eq!(Kind::sniff(b"almost text \x01"), Kind::Other);
        assert_eq!(Kind::Other.mime(), "application/octet-stream");
    }

    #[test]
    fn text_window_is_64_kib() {
        // A NUL or markup after the window is not looked at.
        let mut late = "a".repeat(SNIFF_LEN).into_bytes();
        late.extend_from_slice(b"\0<html>");
        assert_eq!(Kind::sniff(&late), Kind::Text);
        // A character cut by the window is fine; a truncated one at the real end is not.
        let mut cut = "a".repeat(SNIFF_LEN - 1).into_bytes();
        cut.extend_from_slice("é and more".as_bytes());
        assert_eq!(Kind::sniff(&cut), Kind::Text);
        let mut truncated = b"abc".to_vec();
        truncated.push(0xc3);
        assert_eq!(Kind::sniff(&truncated), Kind::Other);
    }
}
