//! Chat search: live results in the sidebar and a full results page.

use actix_web::http::StatusCode;
use actix_web::{HttpRequest, HttpResponse, web};
use serde::Deserialize;
use tera::Context;
use uuid::Uuid;

use crate::domain::pages::SearchAsk;
use crate::state::AppState;
use crate::web::extractors::CurrentUser;
use crate::web::render::render_to_string;
use crate::web::session_page::home_context;
use crate::web::{WebError, render};

/// Percent-encodes a query value.
fn encode(s: &str) -> String {
    s.bytes()
        .map(|b| match b {
            b'A'..=b'Z' | b'a'..=b'z' | b'0'..=b'9' | b'-' | b'_' | b'.' | b'~' => (b as char).to_string(),
            _ => format!("%{b:02X}"),
        })
        .collect()
}

/// Hits per page of the results page.
const PER_PAGE: usize = 20;
/// Hits in the sidebar's live list.
const LIVE: usize = 8;

/// The search form.
#[derive(Deserialize)]
pub struct SearchForm {
    #[serde(default)]
    q: String,
    /// A workspace to search in (blank: all).
    #[serde(default)]
    w: String,
    #[serde(default)]
    page: Option<usize>,
    /// `1` for the sidebar's live list.
    #[serde(default)]
    live: Option<String>,
}

/// `GET /search?q=…[&w=…][&page=N][&live=1]`: the user's own messages matching the query.
pub async fn search(
    state: web::Data<AppState>,
    req: HttpRequest,
    user: CurrentUser,
    form: web::Query<SearchForm>,
) -> Result<HttpResponse, WebError> {
    let live = form.live.is_some();
    let workspace = match form.w.trim() {
        "" => None,
        raw => Some(
            Uuid::parse_str(raw)
                .map_err(|_| WebError::BadRequest("Choose a workspace from the list.".into()))?,
        ),
    };
    let q = form.q.trim();
    let per_page = if live { LIVE } else { PER_PAGE };
    let page = form.page.unwrap_or(1);
    let ask = SearchAsk { text: q, workspace, page, per_page };
    if live {
        let (found, error) = state.pages.search_results(&user.0.actor, &ask).await?;
        let mut ctx = Context::new();
        ctx.insert("results", &found.as_ref().map(results_view));
        ctx.insert("error", &error);
        ctx.insert("q", q);
        ctx.insert("all_url", &format!("/search?q={}", encode(q)));
        let html = render_to_string(&state, "partials/_search_live.html", &ctx)?;
        return Ok(render::html_response(StatusCode::OK, html));
    }
    let found = state.pages.search(&user.0.actor, ask).await?;
    let mut ctx = home_context(&user, &found.home);
    let link = |page: usize| {
        let w = workspace.map(|w| w.to_string()).unwrap_or_default();
        format!("/search?q={}&w={w}&page={page}", encode(q))
    };
    if let Some(r) = &found.found {
        ctx.insert("prev_url", &(r.page > 1).then(|| link(r.page - 1)));
        ctx.insert("next_url", &r.more.then(|| link(r.page + 1)));
    }
    ctx.insert("results", &found.found.as_ref().map(results_view));
    ctx.insert("error", &found.error);
    ctx.insert("q", q);
    ctx.insert("w", &workspace);
    ctx.insert("workspaces", &found.workspaces);
    render::page(&state, &req, "pages/search.html", "partials/_search.html", ctx)
}

/// A results page as the templates show it: each hit's snippet rendered as HTML, escaped with
/// the matched words marked.
fn results_view(r: &crate::domain::search::ResultsPage) -> serde_json::Value {
    let mut view = serde_json::to_value(r).unwrap_or_default();
    if let Some(hits) = view.get_mut("hits").and_then(|h| h.as_array_mut()) {
        for (shown, hit) in hits.iter_mut().zip(&r.hits) {
            shown["snippet_html"] = crate::web::escape::highlight(&hit.snippet).into();
        }
    }
    view
}
