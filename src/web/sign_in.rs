//! Finishing a sign-in in the browser, whichever way it was made (password, identity provider,
//! invitation): the new session's cookie, the setup link's cookie, and where the browser goes.
//! The sign-in pages' handlers share it.

use actix_web::cookie::{Cookie, SameSite, time::Duration as CookieDuration};
use actix_web::{HttpRequest, HttpResponse};

use crate::domain::accounts::User;
use crate::domain::accounts::browser::SignIn;
use crate::state::AppState;
use crate::web::WebError;
use crate::web::client::{client_ip, see_other};
use crate::web::extractors::session_cookie_name;

/// Cookie holding a setup token between opening the setup link and signing in.
pub(crate) const SETUP_COOKIE: &str = "arbor_setup";

pub(crate) fn cookie<'a>(
    state: &AppState,
    name: &'a str,
    value: String,
    max_age: CookieDuration,
) -> Cookie<'a> {
    Cookie::build(name, value)
        .path("/")
        .http_only(true)
        .same_site(SameSite::Lax)
        .secure(state.config.is_https())
        .max_age(max_age)
        .finish()
}

pub(crate) fn removal(state: &AppState, name: &'static str) -> Cookie<'static> {
    let mut c = cookie(state, name, String::new(), CookieDuration::ZERO);
    c.make_removal();
    c
}

/// The setup token the browser carries, if it is still usable.
pub(crate) async fn open_setup_token(
    state: &AppState,
    req: &HttpRequest,
) -> Result<Option<String>, WebError> {
    let Some(c) = req.cookie(SETUP_COOKIE) else {
        return Ok(None);
    };
    let token = c.value().to_string();
    Ok(state.accounts.setup_is_open(&token).await?.then_some(token))
}

/// Starts a fresh browser session for `user` (ending the one the request came with), redeems a
/// pending setup token, and redirects.
pub(crate) async fn finish_sign_in(
    state: &AppState,
    req: &HttpRequest,
    user: &User,
    next: &str,
) -> Result<HttpResponse, WebError> {
    let setup = open_setup_token(state, req).await?;
    finish_sign_in_with_setup(state, req, user, next, setup).await
}

/// As [`finish_sign_in`], with the setup token the sign-in carried.
pub(crate) async fn finish_sign_in_with_setup(
    state: &AppState,
    req: &HttpRequest,
    user: &User,
    next: &str,
    setup_token: Option<String>,
) -> Result<HttpResponse, WebError> {
    let name = session_cookie_name(state.config.is_https());
    let previous = req.cookie(name);
    let sign_in = SignIn {
        previous: previous.as_ref().map(|c| c.value()),
        setup_token,
        ip: client_ip(req, &state.config.auth.trusted_proxies).map(|ip| ip.to_string()),
        user_agent: req.headers().get("User-Agent").and_then(|v| v.to_str().ok()),
    };
    let signed_in = state.accounts.open_browser_session(user, sign_in).await?;
    let went_to = if signed_in.became_admin { "/" } else { next };
    let issued = signed_in.session;
    let max_age = CookieDuration::hours(state.config.auth.session_max_hours);
    let mut res = see_other(req, went_to);
    let _ = res.add_cookie(&cookie(state, name, issued.token.clone(), max_age));
    let _ = res.add_cookie(&removal(state, SETUP_COOKIE));
    Ok(res)
}
