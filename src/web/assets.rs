//! The templates and static files compiled into the binary by `build.rs`.
include!(concat!(env!("OUT_DIR"), "/assets.rs"));

/// The embedded static file at this path: (contents, content hash).
pub fn static_file(path: &str) -> Option<(&'static [u8], &'static str)> {
    STATIC_FILES.iter().find(|(p, _, _)| *p == path).map(|(_, bytes, hash)| (*bytes, *hash))
}

/// The content type for a static file, by extension.
pub fn content_type(path: &str) -> &'static str {
    match path.rsplit('.').next().unwrap_or("") {
        "css" => "text/css; charset=utf-8",
        "js" => "text/javascript; charset=utf-8",
        "svg" => "image/svg+xml",
        "png" => "image/png",
        "ico" => "image/x-icon",
        "woff2" => "font/woff2",
        "json" => "application/json",
        "txt" | "md" => "text/plain; charset=utf-8",
        _ => "application/octet-stream",
    }
}
