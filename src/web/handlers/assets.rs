//! Static files embedded in the binary, with ETags; versioned URLs are cached for a year.

use actix_web::http::header;
use actix_web::{HttpRequest, HttpResponse, web};

use crate::web::{WebError, assets};

/// `GET /static/{path}`: only exact names from the embedded table, so no path can escape it.
pub async fn serve(req: HttpRequest, path: web::Path<String>) -> Result<HttpResponse, WebError> {
    let path = path.into_inner();
    let (bytes, hash) = assets::static_file(&path).ok_or(WebError::NotFound)?;
    let etag = format!("\"{hash}\"");
    let cache =
        if req.query_string().starts_with("v=") { "public, max-age=31536000, immutable" } else { "no-cache" };
    let matches = req
        .headers()
        .get(header::IF_NONE_MATCH)
        .and_then(|v| v.to_str().ok())
        .is_some_and(|v| v.split(',').any(|t| t.trim() == etag));
    if matches {
        return Ok(HttpResponse::NotModified().insert_header((header::ETAG, etag)).finish());
    }
    Ok(HttpResponse::Ok()
        .insert_header((header::CONTENT_TYPE, assets::content_type(&path)))
        .insert_header((header::ETAG, etag))
        .insert_header((header::CACHE_CONTROL, cache))
        .body(bytes))
}
