//! The home page.

use actix_web::{HttpRequest, HttpResponse, web};
use tera::Context;

use crate::state::AppState;
use crate::web::extractors::{CurrentUser, MaybeUser};
use crate::web::{WebError, render};

/// `GET /`: the start page, personalised when signed in.
pub async fn index(
    state: web::Data<AppState>,
    req: HttpRequest,
    user: MaybeUser,
) -> Result<HttpResponse, WebError> {
    let ctx = match &user.0 {
        Some(auth) => super::chat::home_context(&state, &CurrentUser(auth.clone())).await,
        None => Context::new(),
    };
    render::page(&state, &req, "pages/home.html", "partials/_home.html", ctx)
}
