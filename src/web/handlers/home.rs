//! The home page.

use actix_web::{HttpRequest, HttpResponse, web};
use tera::Context;

use crate::state::AppState;
use crate::web::extractors::MaybeUser;
use crate::web::{WebError, render};

/// `GET /`: the start page, personalised when signed in.
pub async fn index(
    state: web::Data<AppState>,
    req: HttpRequest,
    user: MaybeUser,
) -> Result<HttpResponse, WebError> {
    let mut ctx = Context::new();
    if let Some(auth) = &user.0 {
        ctx.insert("user", &auth.user);
        ctx.insert("csrf_token", &auth.csrf_secret);
    }
    render::page(&state, &req, "pages/home.html", "partials/_home.html", ctx)
}
