//! Share links: making one from a message, the read-only page it opens, its files, "Continue in
//! my workspace", and the lists where creators and admins revoke them.

use actix_web::http::StatusCode;
use actix_web::{HttpRequest, HttpResponse, web};
use serde::Deserialize;

use crate::domain::DomainError;
use crate::domain::teams::links::{self, LinkForm};
use crate::state::AppState;
use crate::web::client::{origin, see_other};
use crate::web::extractors::{CurrentUser, MaybeUser};
use crate::web::form::{self, Flash};
use crate::web::render::{parse_id, render_to_string, signed_in};
use crate::web::{WebError, render, session_view};

/// The share form under a message.
#[derive(Deserialize)]
pub struct ShareForm {
    #[serde(default)]
    expires: String,
    #[serde(default)]
    public: Option<String>,
}

/// `POST /s/{session_id}/messages/{message_id}/share`: a link to the branch on screen, down to
/// this message; answers with the link to copy.
pub async fn create(
    state: web::Data<AppState>,
    req: HttpRequest,
    user: CurrentUser,
    path: web::Path<(String, String)>,
    form: web::Form<ShareForm>,
) -> Result<HttpResponse, WebError> {
    let (session_id, message_id) = (parse_id(&path.0)?, parse_id(&path.1)?);
    let error_target = format!("#share-error-{message_id}");
    let expires_in_days = match links::parse_expiry(&form.expires) {
        Ok(d) => d,
        Err(DomainError::Invalid(m)) => {
            return form::refused(&state, StatusCode::BAD_REQUEST, &m, &error_target);
        }
        Err(e) => return Err(e.into()),
    };
    let ask = LinkForm { expires_in_days, public: form.public.is_some() };
    let who = origin(&req, &state, &user.0);
    let allowed = state.config.sharing.public_links;
    match state.teams.links.create(&user.0.actor, &who, (session_id, message_id), &ask, allowed).await {
        Ok(created) => {
            let mut ctx = signed_in(&user);
            ctx.insert("url", &format!("{}/l/{}", state.config.public_url(), created.token));
            ctx.insert("link", &crate::web::link_view::row(&created.link));
            ctx.insert("message_id", &message_id);
            let html = render_to_string(&state, "partials/_share_link.html", &ctx)?;
            Ok(render::html_response(StatusCode::OK, html))
        }
        Err(DomainError::Invalid(m) | DomainError::Conflict(m)) => {
            form::refused(&state, StatusCode::BAD_REQUEST, &m, &error_target)
        }
        Err(e) => Err(e.into()),
    }
}

/// The headers every link page and file carries: never indexed, never cached by anyone else,
/// and the token in the address never sent on as a referrer.
fn private(mut res: HttpResponse) -> HttpResponse {
    let h = res.headers_mut();
    for (name, value) in [
        ("x-robots-tag", "noindex, nofollow"),
        ("referrer-policy", "no-referrer"),
        ("cache-control", "private, no-store"),
    ] {
        h.insert(
            actix_web::http::header::HeaderName::from_static(name),
            actix_web::http::header::HeaderValue::from_static(value),
        );
    }
    res
}

/// What a link that needs a signed-in viewer answers someone who is not: the sign-in page,
/// coming back here after.
fn sign_in_first(req: &HttpRequest, token: &str) -> HttpResponse {
    // Only a well-formed token gets here: URL-safe characters, nothing to encode but the slashes.
    see_other(req, &format!("/login?next=%2Fl%2F{token}"))
}

/// `GET /l/{token}`: the snapshot, read-only.
pub async fn show(
    state: web::Data<AppState>,
    req: HttpRequest,
    user: MaybeUser,
    token: web::Path<String>,
) -> Result<HttpResponse, WebError> {
    let viewer = user.0.as_ref().map(|a| &a.actor);
    let opened = match state.teams.links.open(&token, viewer, state.config.sharing.public_links).await {
        Ok(o) => o,
        Err(DomainError::Forbidden) => return Ok(sign_in_first(&req, &token)),
        Err(e) => return Err(e.into()),
    };
    let mut views = session_view::message_views(opened.messages).await?;
    let mut files = opened.files;
    for v in views.iter_mut() {
        if let Some(f) = files.remove(&v.id) {
            v.files = f;
        }
    }
    let mut ctx = tera::Context::new();
    if let Some(a) = &user.0 {
        ctx.insert("user", &a.user);
        ctx.insert("csrf_token", &a.csrf_secret);
    }
    ctx.insert("link", &crate::web::link_view::row(&opened.link));
    ctx.insert("token", token.as_str());
    ctx.insert("messages", &views);
    // What _message.html offers: nothing that changes anything.
    ctx.insert("snapshot", &true);
    ctx.insert("viewer", &true);
    ctx.insert("may_not_delete", &true);
    ctx.insert("session", &serde_json::json!({ "id": opened.link.session_id }));
    Ok(private(render::page(&state, &req, "pages/shared_link.html", "partials/_shared_link.html", ctx)?))
}

/// `GET /l/{token}/files/{hash}`: a file the snapshot shows.
pub async fn file(
    state: web::Data<AppState>,
    user: MaybeUser,
    path: web::Path<(String, String)>,
) -> Result<HttpResponse, WebError> {
    let (token, hash) = path.into_inner();
    let viewer = user.0.as_ref().map(|a| &a.actor);
    let allowed = state.config.sharing.public_links;
    match state.teams.links.file(&token, viewer, allowed, &hash).await {
        Ok(served) => Ok(private(render::served_file(served))),
        // A file is never a sign-in prompt: it is not there for this caller.
        Err(DomainError::Forbidden) => Err(WebError::NotFound),
        Err(e) => Err(e.into()),
    }
}

/// `POST /l/{token}/continue`: the snapshot becomes a new session of the viewer's.
pub async fn continue_here(
    state: web::Data<AppState>,
    req: HttpRequest,
    user: CurrentUser,
    token: web::Path<String>,
) -> Result<HttpResponse, WebError> {
    let session = state.teams.links.continue_in_workspace(&user.0.actor, &token).await?;
    Ok(see_other(&req, &format!("/s/{session}")))
}

async fn links_page(
    state: &AppState,
    req: &HttpRequest,
    user: &CurrentUser,
    flash: Flash,
) -> Result<HttpResponse, WebError> {
    let mut ctx = signed_in(user);
    ctx.insert("links", &crate::web::link_view::rows(&state.teams.links.mine(&user.0.actor).await?));
    render::settings_tab(state, req, ctx, "links", &flash, StatusCode::OK)
}

/// `GET /settings/links`: the member's links.
pub async fn mine(
    state: web::Data<AppState>,
    req: HttpRequest,
    user: CurrentUser,
) -> Result<HttpResponse, WebError> {
    links_page(&state, &req, &user, Flash::default()).await
}

/// `POST /settings/links/{id}/delete`: revokes one of the member's links.
pub async fn revoke_mine(
    state: web::Data<AppState>,
    req: HttpRequest,
    user: CurrentUser,
    id: web::Path<String>,
) -> Result<HttpResponse, WebError> {
    let who = origin(&req, &state, &user.0);
    state.teams.links.revoke_mine(&user.0.actor, &who, parse_id(&id)?).await?;
    links_page(&state, &req, &user, Flash::ok("Revoked: the link no longer opens.")).await
}
