//! The home page.

use actix_web::{HttpRequest, HttpResponse, web};
use tera::Context;

use crate::state::AppState;
use crate::web::extractors::{CurrentUser, MaybeUser};
use crate::web::{WebError, render};

/// Query of the home page: the workspace a new session starts in.
#[derive(serde::Deserialize)]
pub struct HomeQuery {
    w: Option<String>,
}

/// `GET /`: the start page, personalised when signed in.
pub async fn index(
    state: web::Data<AppState>,
    req: HttpRequest,
    user: MaybeUser,
    query: web::Query<HomeQuery>,
) -> Result<HttpResponse, WebError> {
    // A malformed workspace id is ignored: the default workspace is used.
    let workspace = query.w.as_deref().and_then(|w| uuid::Uuid::parse_str(w).ok());
    let ctx = match &user.0 {
        Some(auth) => {
            let home = state.pages.home(&auth.actor, workspace).await?;
            crate::web::session_page::home_context(&CurrentUser(auth.clone()), &home)
        }
        None => Context::new(),
    };
    render::page(&state, &req, "pages/home.html", "partials/_home.html", ctx)
}
