//! Template loading and rendering: full pages and HTMX fragments from the same partials.

use std::sync::OnceLock;

use actix_web::http::StatusCode;
use actix_web::http::header::{self, HeaderName, HeaderValue};
use actix_web::{HttpRequest, HttpResponse};
use tera::{Context, Tera};

use super::WebError;
use super::assets;
use crate::state::AppState;

/// Tells htmx to put this response into `target` (a CSS selector) with `swap`.
pub fn retarget(res: &mut HttpResponse, target: &str, swap: &'static str) {
    if let Ok(value) = HeaderValue::from_str(target) {
        res.headers_mut().insert(HeaderName::from_static("hx-retarget"), value);
        res.headers_mut().insert(HeaderName::from_static("hx-reswap"), HeaderValue::from_static(swap));
    }
}

/// The compiled templates, compiled at the first page or mail rendered, not at start: an idle
/// server, or one that only serves the API, never holds them (their heap and the pages of Tera's
/// parser; BENCHMARKS.md, step 26). They are embedded at build time, so a template that does not
/// compile is a build's defect, which `tests::every_embedded_template_compiles` catches.
#[derive(Default)]
pub struct Templates(OnceLock<Result<Tera, String>>);

impl Templates {
    /// Renders `name`; the first call compiles every template (a few milliseconds, once).
    pub fn render(&self, name: &str, ctx: &Context) -> Result<String, String> {
        let tera = self.0.get_or_init(build_templates).as_ref().map_err(Clone::clone)?;
        tera.render(name, ctx).map_err(|e| e.to_string())
    }

    /// Whether any template has been compiled yet.
    pub fn compiled(&self) -> bool {
        self.0.get().is_some()
    }
}

/// Builds the Tera instance from the embedded templates; every name ends in `.html`, so all of
/// them are autoescaped.
fn build_templates() -> Result<Tera, String> {
    let mut tera = Tera::new();
    let mut sources = Vec::new();
    for (name, bytes, _) in assets::TEMPLATES {
        if !name.ends_with(".html") {
            return Err(format!("template {name} must end in .html so it is autoescaped"));
        }
        let text = std::str::from_utf8(bytes).map_err(|e| format!("template {name}: {e}"))?;
        sources.push((*name, text));
    }
    tera.add_raw_templates(sources).map_err(|e| format!("templates: {e}"))?;
    let mut urls = std::collections::BTreeMap::new();
    for (path, _, hash) in assets::STATIC_FILES {
        urls.insert(path.to_string(), format!("/static/{path}?v={hash}"));
    }
    tera.global_context().insert("assets", &urls);
    tera.global_context().insert("app_version", env!("CARGO_PKG_VERSION"));
    Ok(tera)
}

/// Whether the request comes from htmx and wants a fragment (boosted navigations want pages).
pub fn is_htmx(req: &HttpRequest) -> bool {
    let h = |n: &str| req.headers().get(n).and_then(|v| v.to_str().ok()) == Some("true");
    h("HX-Request") && !h("HX-Boosted")
}

/// Renders the page, or only its partial for HTMX, with `Vary: HX-Request`.
pub fn page(
    state: &AppState,
    req: &HttpRequest,
    page: &str,
    partial: &str,
    ctx: Context,
) -> Result<HttpResponse, WebError> {
    let name = if is_htmx(req) { partial } else { page };
    let html =
        state.templates.render(name, &ctx).map_err(|e| WebError::Internal(format!("render {name}: {e}")))?;
    Ok(html_response(StatusCode::OK, html))
}

/// As [`page`], with another status (a form shown again with its error, say).
pub fn page_with_status(
    state: &AppState,
    req: &HttpRequest,
    page_name: &str,
    partial: &str,
    ctx: Context,
    status: StatusCode,
) -> Result<HttpResponse, WebError> {
    let mut res = page(state, req, page_name, partial, ctx)?;
    *res.status_mut() = status;
    Ok(res)
}

/// An HTML response that varies on `HX-Request` and is never cached by shared caches.
pub fn html_response(status: StatusCode, html: String) -> HttpResponse {
    HttpResponse::build(status)
        .insert_header((header::CONTENT_TYPE, HeaderValue::from_static("text/html; charset=utf-8")))
        .insert_header((header::VARY, HeaderValue::from_static("HX-Request")))
        .insert_header((header::CACHE_CONTROL, HeaderValue::from_static("no-store")))
        .body(html)
}

/// The friendly error page (or fragment); falls back to plain markup if rendering fails.
pub fn error_html(
    state: &AppState,
    _req: &HttpRequest,
    status: StatusCode,
    message: &str,
    fragment: bool,
) -> String {
    let mut ctx = Context::new();
    ctx.insert("status", &status.as_u16());
    ctx.insert("reason", status.canonical_reason().unwrap_or("Error"));
    ctx.insert("message", message);
    let name = if fragment { "partials/_error.html" } else { "pages/error.html" };
    match state.templates.render(name, &ctx) {
        Ok(html) => html,
        Err(e) => {
            tracing::error!(error = %e, "error page failed to render");
            format!("<!doctype html><title>Error</title><p>{}</p>", super::sse::escape_text(message))
        }
    }
}

/// As [`page_with_status`] for a form section: a refused form (4xx) is shown in place of the
/// section `target` (a CSS selector) through `HX-Retarget`.
pub fn section(
    state: &AppState,
    req: &HttpRequest,
    page_name: &str,
    partial: &str,
    ctx: Context,
    status: StatusCode,
    target: &str,
) -> Result<HttpResponse, WebError> {
    let mut res = page_with_status(state, req, page_name, partial, ctx, status)?;
    if status.is_client_error() && is_htmx(req) {
        retarget(&mut res, target, "outerHTML");
    }
    Ok(res)
}

/// A settings tab (`pages/settings_<tab>.html`, its form `#settings-<tab>`) with its flash.
pub fn settings_tab(
    state: &AppState,
    req: &HttpRequest,
    mut ctx: Context,
    tab: &str,
    flash: &impl serde::Serialize,
    status: StatusCode,
) -> Result<HttpResponse, WebError> {
    ctx.insert("flash", flash);
    ctx.insert("tab", tab);
    section(
        state,
        req,
        &format!("pages/settings_{tab}.html"),
        &format!("partials/_settings_{tab}.html"),
        ctx,
        status,
        &format!("#settings-{tab}"),
    )
}

/// A stored file as its download: images inline, anything else as an attachment, never
/// interpreted by the browser (sandboxed, no sniffing).
pub fn served_file(served: crate::domain::files::Served) -> HttpResponse {
    let inline = served.kind.is_raster_image();
    let mut res = HttpResponse::Ok();
    res.insert_header((
        header::CONTENT_TYPE,
        if inline { served.kind.mime() } else { "application/octet-stream" },
    ));
    if let Ok(v) = HeaderValue::from_str(&crate::blobs::content_disposition(&served.name, inline)) {
        res.insert_header((header::CONTENT_DISPOSITION, v));
    }
    res.insert_header(("X-Content-Type-Options", "nosniff"));
    res.insert_header(("Content-Security-Policy", "sandbox; default-src 'none'"));
    // Content-addressed: the bytes behind a hash never change.
    res.insert_header((header::CACHE_CONTROL, "private, max-age=31536000, immutable"));
    res.body(served.bytes)
}

/// A path segment that must be an id; anything else is a 404 like an id that is not yours.
pub fn parse_id(raw: &str) -> Result<uuid::Uuid, WebError> {
    uuid::Uuid::parse_str(raw).map_err(|_| WebError::NotFound)
}

/// Renders a template to a string.
pub fn render_to_string(state: &AppState, name: &str, ctx: &Context) -> Result<String, WebError> {
    state.templates.render(name, ctx).map_err(|e| WebError::Internal(format!("render {name}: {e}")))
}

/// The signed-in user, as every page needs them.
pub fn signed_in(user: &super::extractors::CurrentUser) -> Context {
    let mut ctx = Context::new();
    ctx.insert("user", &user.0.user);
    ctx.insert("csrf_token", &user.0.csrf_secret);
    ctx
}

/// A JSON Lines body (`application/x-ndjson`), as a download named `download` when given.
pub fn json_lines(body: String, download: Option<&str>) -> HttpResponse {
    let mut res = HttpResponse::Ok();
    res.content_type("application/x-ndjson; charset=utf-8");
    if let Some(name) = download {
        res.insert_header((
            actix_web::http::header::CONTENT_DISPOSITION,
            format!("attachment; filename=\"{name}\""),
        ));
    }
    res.body(body)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_embedded_template_compiles() {
        let tera = build_templates().unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(tera.get_template_names().count(), assets::TEMPLATES.len());
    }

    #[test]
    fn templates_are_compiled_at_the_first_render_and_errors_name_the_template() {
        let templates = Templates::default();
        assert!(!templates.compiled());
        let mut ctx = Context::new();
        ctx.insert("status", &404);
        ctx.insert("reason", "Not Found");
        ctx.insert("message", "gone");
        let html = templates.render("partials/_error.html", &ctx).unwrap();
        assert!(html.contains("gone"));
        assert!(templates.compiled());
        let missing = templates.render("pages/no-such-page.html", &ctx).unwrap_err();
        assert!(missing.contains("no-such-page"), "{missing}");
    }
}
