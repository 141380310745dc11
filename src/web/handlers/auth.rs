//! Sign-in pages: local sign-in and sign-up, sign-out, and the one-time admin setup link.

use std::time::Duration;

use actix_web::cookie::time::Duration as CookieDuration;
use actix_web::http::StatusCode;
use actix_web::{HttpRequest, HttpResponse, web};
use serde::Deserialize;
use tera::Context;

use crate::domain::DomainError;
use crate::domain::accounts::Role;
use crate::state::AppState;
use crate::web::client::{client_ip, safe_return_to, see_other};
use crate::web::extractors::{MaybeUser, session_cookie_name};
use crate::web::sign_in::{SETUP_COOKIE, cookie, finish_sign_in, open_setup_token, removal};
use crate::web::{WebError, render};

/// Query of the sign-in page.
#[derive(Deserialize)]
pub struct NextQuery {
    next: Option<String>,
}

struct LoginView<'a> {
    next: &'a str,
    email: &'a str,
    error: Option<&'a str>,
    setup: bool,
}

fn login_page(
    state: &AppState,
    req: &HttpRequest,
    v: LoginView<'_>,
    status: StatusCode,
) -> Result<HttpResponse, WebError> {
    let mut ctx = Context::new();
    ctx.insert("next", v.next);
    ctx.insert("email", v.email);
    ctx.insert("error", &v.error);
    ctx.insert("setup", &v.setup);
    ctx.insert("local_enabled", &state.config.local_accounts_enabled());
    ctx.insert("signup_allowed", &(state.config.auth.allow_signup || v.setup));
    ctx.insert("oidc_name", &state.oidc.as_ref().map(|o| o.display_name().to_string()));
    render::page_with_status(state, req, "pages/login.html", "partials/_login.html", ctx, status)
}

/// `GET /login`.
pub async fn login_form(
    state: web::Data<AppState>,
    req: HttpRequest,
    user: MaybeUser,
    q: web::Query<NextQuery>,
) -> Result<HttpResponse, WebError> {
    let next = safe_return_to(q.next.as_deref());
    if user.0.is_some() {
        return Ok(HttpResponse::SeeOther().insert_header(("Location", next)).finish());
    }
    let setup = open_setup_token(&state, &req).await?.is_some();
    login_page(&state, &req, LoginView { next: &next, email: "", error: None, setup }, StatusCode::OK)
}

/// The longest email address there is (RFC 3696: 64 + 1 + 255).
const MAX_EMAIL_BYTES: usize = 320;
/// Passwords are at most 1024 characters, so at most this many bytes.
const MAX_PASSWORD_BYTES: usize = 4 * 1024;

/// Form of the sign-in page.
#[derive(Deserialize)]
pub struct LoginForm {
    email: String,
    password: String,
    next: Option<String>,
}

/// `POST /login`: rate-limited per client address and per account.
pub async fn login(
    state: web::Data<AppState>,
    req: HttpRequest,
    form: web::Form<LoginForm>,
) -> Result<HttpResponse, WebError> {
    if !state.config.local_accounts_enabled() {
        return Err(WebError::NotFound);
    }
    let next = safe_return_to(form.next.as_deref());
    let setup = open_setup_token(&state, &req).await?.is_some();
    let cfg = &state.config.auth;
    // Refused before any work or allocation sized by it: no address is longer than 320 bytes
    // (RFC 3696), and no password Arbor accepts is longer than 1024 characters.
    if form.email.len() > MAX_EMAIL_BYTES || form.password.len() > MAX_PASSWORD_BYTES {
        let msg = "Enter a valid email address and password.";
        let view = LoginView { next: &next, email: "", error: Some(msg), setup };
        return login_page(&state, &req, view, StatusCode::BAD_REQUEST);
    }
    let ip = crate::web::client::client_bucket(&req, &cfg.trusted_proxies);
    let minute = Duration::from_secs(60);
    let account = form.email.trim().to_lowercase();
    let limited = match state
        .login_limiter
        .check(&format!("ip:{ip}"), cfg.login_attempts_per_ip_per_minute, minute)
        .await
    {
        Ok(()) => {
            let per_account = cfg.login_attempts_per_account_per_minute;
            state.login_limiter.check(&format!("account:{account}"), per_account, minute).await
        }
        refused => refused,
    };
    if let Err(retry) = limited {
        let secs = retry.0.as_secs().max(1);
        let msg = format!("Too many sign-in attempts. Try again in {secs} seconds.");
        let view = LoginView { next: &next, email: &form.email, error: Some(&msg), setup };
        let mut res = login_page(&state, &req, view, StatusCode::TOO_MANY_REQUESTS)?;
        if let Ok(v) = secs.to_string().parse() {
            res.headers_mut().insert(actix_web::http::header::RETRY_AFTER, v);
        }
        return Ok(res);
    }
    match state.accounts.sign_in_local(&form.email, &form.password).await {
        Ok(user) => {
            tracing::info!(user = %user.id, "signed in with a password");
            finish_sign_in(&state, &req, &user, &next).await
        }
        Err(DomainError::Invalid(msg)) => {
            tracing::info!("password sign-in refused");
            let ip = client_ip(&req, &state.config.auth.trusted_proxies).map(|ip| ip.to_string());
            state.accounts.record_refused_sign_in(ip, &form.email).await?;
            let view = LoginView { next: &next, email: &form.email, error: Some(&msg), setup };
            login_page(&state, &req, view, StatusCode::UNAUTHORIZED)
        }
        Err(DomainError::Forbidden) => {
            Err(WebError::Forbidden("Your account is disabled. Ask an administrator.".into()))
        }
        Err(e) => Err(e.into()),
    }
}

/// `POST /logout`: ends the session server-side and clears the cookie; people who signed in
/// through the provider are sent to its sign-out page when it offers one.
pub async fn logout(
    state: web::Data<AppState>,
    req: HttpRequest,
    user: MaybeUser,
) -> Result<HttpResponse, WebError> {
    let name = session_cookie_name(state.config.is_https());
    if let Some(c) = req.cookie(name) {
        state.accounts.browser.end(c.value()).await?;
    }
    let mut to = "/login".to_string();
    if let (Some(oidc), Some(auth)) = (&state.oidc, &user.0)
        && state.accounts.uses_provider(auth.user.id).await?
        && let Some(url) = oidc.end_session_url(&format!("{}/login", state.config.public_url())).await
    {
        to = url;
    }
    let mut res = see_other(&req, &to);
    let _ = res.add_cookie(&removal(&state, name));
    Ok(res)
}

fn signup_page(
    state: &AppState,
    req: &HttpRequest,
    form: Option<&SignupForm>,
    error: Option<&str>,
    setup: bool,
    status: StatusCode,
) -> Result<HttpResponse, WebError> {
    let mut ctx = Context::new();
    ctx.insert("email", form.map(|f| f.email.as_str()).unwrap_or(""));
    ctx.insert("display_name", form.map(|f| f.display_name.as_str()).unwrap_or(""));
    ctx.insert("error", &error);
    ctx.insert("setup", &setup);
    ctx.insert("min_password_length", &state.config.auth.min_password_length);
    render::page_with_status(state, req, "pages/signup.html", "partials/_signup.html", ctx, status)
}

/// Whether this browser may create a local account now.
async fn signup_open(state: &AppState, req: &HttpRequest) -> Result<(bool, bool), WebError> {
    if !state.config.local_accounts_enabled() {
        return Ok((false, false));
    }
    let setup = open_setup_token(state, req).await?.is_some();
    Ok((state.config.auth.allow_signup || setup, setup))
}

/// `GET /signup`.
pub async fn signup_form(
    state: web::Data<AppState>,
    req: HttpRequest,
    user: MaybeUser,
) -> Result<HttpResponse, WebError> {
    if user.0.is_some() {
        return Ok(HttpResponse::SeeOther().insert_header(("Location", "/")).finish());
    }
    let (open, setup) = signup_open(&state, &req).await?;
    if !open {
        return Err(WebError::NotFound);
    }
    signup_page(&state, &req, None, None, setup, StatusCode::OK)
}

/// Form of the sign-up page. Only these fields are read; a posted `role` is ignored.
#[derive(Deserialize)]
pub struct SignupForm {
    email: String,
    display_name: String,
    password: String,
}

/// `POST /signup`: a member account (the setup link alone can make an admin).
pub async fn signup(
    state: web::Data<AppState>,
    req: HttpRequest,
    form: web::Form<SignupForm>,
) -> Result<HttpResponse, WebError> {
    let (open, setup) = signup_open(&state, &req).await?;
    if !open {
        return Err(WebError::NotFound);
    }
    let cfg = &state.config.auth;
    let ip = crate::web::client::client_bucket(&req, &cfg.trusted_proxies);
    if state
        .login_limiter
        .check(&format!("signup:{ip}"), cfg.login_attempts_per_ip_per_minute, Duration::from_secs(60))
        .await
        .is_err()
    {
        return signup_page(
            &state,
            &req,
            Some(&form),
            Some("Too many attempts. Try again in a minute."),
            setup,
            StatusCode::TOO_MANY_REQUESTS,
        );
    }
    match state
        .accounts
        .create_local(&form.email, &form.display_name, &form.password, cfg.min_password_length, Role::Member)
        .await
    {
        Ok(user) => {
            tracing::info!(user = %user.id, "local account created");
            finish_sign_in(&state, &req, &user, "/").await
        }
        Err(DomainError::Invalid(msg)) | Err(DomainError::Conflict(msg)) => {
            signup_page(&state, &req, Some(&form), Some(&msg), setup, StatusCode::BAD_REQUEST)
        }
        Err(e) => Err(e.into()),
    }
}

/// `GET /setup/{token}`: remembers the token in this browser, then asks to sign in or sign up.
pub async fn setup(state: web::Data<AppState>, token: web::Path<String>) -> Result<HttpResponse, WebError> {
    let token = token.into_inner();
    if token.len() != 43 || !state.accounts.setup_is_open(&token).await? {
        return Err(WebError::NotFound);
    }
    let to = if state.config.local_accounts_enabled() { "/signup" } else { "/login" };
    let mut res = HttpResponse::SeeOther().insert_header(("Location", to)).finish();
    let _ = res.add_cookie(&cookie(&state, SETUP_COOKIE, token, CookieDuration::minutes(30)));
    Ok(res)
}
