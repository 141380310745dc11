//! The signed-in user's own account pages: active sessions and password.

use actix_web::http::StatusCode;
use actix_web::{HttpRequest, HttpResponse, web};
use serde::{Deserialize, Serialize};

use crate::domain::DomainError;
use crate::domain::accounts;
use crate::state::AppState;
use crate::web::client::see_other;
use crate::web::extractors::CurrentUser;
use crate::web::{WebError, render};

#[derive(Serialize)]
struct SessionRow {
    id: String,
    current: bool,
    device: String,
    ip: String,
    created: String,
    last_seen: String,
}

/// A short description of a browser from its User-Agent.
fn device(ua: Option<&str>) -> String {
    let Some(ua) = ua else {
        return "Unknown device".into();
    };
    let browser =
        ["Firefox", "Edg", "Chrome", "Safari"].iter().find(|b| ua.contains(*b)).copied().unwrap_or("Browser");
    let browser = if browser == "Edg" { "Edge" } else { browser };
    let os =
        ["Android", "iPhone", "iPad", "Windows", "Mac OS", "Linux"].iter().find(|o| ua.contains(*o)).copied();
    match os {
        Some(os) => format!("{browser} on {}", if os == "Mac OS" { "macOS" } else { os }),
        None if ua.chars().count() > 60 => ua.chars().take(60).collect::<String>() + "…",
        None => ua.to_string(),
    }
}

/// `GET /account/sessions`.
pub async fn sessions(
    state: web::Data<AppState>,
    req: HttpRequest,
    user: CurrentUser,
) -> Result<HttpResponse, WebError> {
    let rows: Vec<SessionRow> = state
        .accounts
        .list_sessions(&user.0.actor)
        .await?
        .into_iter()
        .map(|s| SessionRow {
            current: s.id == user.0.session_id,
            device: device(s.user_agent.as_deref()),
            ip: s.ip.unwrap_or_else(|| "unknown".into()),
            created: s.created_at.format("%Y-%m-%d %H:%M UTC").to_string(),
            last_seen: s.last_seen_at.format("%Y-%m-%d %H:%M UTC").to_string(),
            id: s.id,
        })
        .collect();
    let mut ctx = crate::web::render::signed_in(&user);
    ctx.insert("sessions", &rows);
    render::page(&state, &req, "pages/account_sessions.html", "partials/_sessions.html", ctx)
}

/// `POST /account/sessions/{id}/revoke`: ends one of the user's own sessions.
pub async fn revoke(
    state: web::Data<AppState>,
    req: HttpRequest,
    user: CurrentUser,
    id: web::Path<String>,
) -> Result<HttpResponse, WebError> {
    let id = id.into_inner();
    if id.len() != 64 || !id.bytes().all(|b| b.is_ascii_hexdigit()) {
        return Err(WebError::NotFound);
    }
    state.accounts.revoke_session(&user.0.actor, &id).await?;
    let to = if id == user.0.session_id { "/login" } else { "/account/sessions" };
    Ok(see_other(&req, to))
}

fn password_page(
    state: &AppState,
    req: &HttpRequest,
    user: &CurrentUser,
    error: Option<&str>,
    done: Option<accounts::PasswordChanged>,
    status: StatusCode,
) -> Result<HttpResponse, WebError> {
    let mut ctx = crate::web::render::signed_in(user);
    ctx.insert("error", &error);
    ctx.insert("done", &done);
    ctx.insert("min_password_length", &state.config.auth.min_password_length);
    render::page_with_status(
        state,
        req,
        "pages/account_password.html",
        "partials/_password.html",
        ctx,
        status,
    )
}

/// `GET /account/password`.
pub async fn password_form(
    state: web::Data<AppState>,
    req: HttpRequest,
    user: CurrentUser,
) -> Result<HttpResponse, WebError> {
    password_page(&state, &req, &user, None, None, StatusCode::OK)
}

/// Form of the password page.
#[derive(Deserialize)]
pub struct PasswordForm {
    current: String,
    new: String,
}

/// `POST /account/password`.
pub async fn change_password(
    state: web::Data<AppState>,
    req: HttpRequest,
    user: CurrentUser,
    form: web::Form<PasswordForm>,
) -> Result<HttpResponse, WebError> {
    let min = state.config.auth.min_password_length;
    // The current-password check is a password guess like a sign-in: limited the same way.
    let limit = state.config.auth.login_attempts_per_account_per_minute;
    let key = format!("password:{}", user.0.actor.user_id());
    if let Err(retry) = state.login_limiter.check(&key, limit, std::time::Duration::from_secs(60)).await {
        let secs = retry.0.as_secs().max(1);
        let msg = format!("Too many attempts. Try again in {secs} seconds.");
        let mut res = password_page(&state, &req, &user, Some(&msg), None, StatusCode::TOO_MANY_REQUESTS)?;
        if let Ok(v) = secs.to_string().parse() {
            res.headers_mut().insert(actix_web::http::header::RETRY_AFTER, v);
        }
        return Ok(res);
    }
    let session = user.0.session_id.clone();
    match state.accounts.change_password(&user.0.actor, &session, &form.current, &form.new, min).await {
        Ok(done) => password_page(&state, &req, &user, None, Some(done), StatusCode::OK),
        Err(DomainError::Invalid(msg)) => {
            password_page(&state, &req, &user, Some(&msg), None, StatusCode::BAD_REQUEST)
        }
        Err(e) => Err(e.into()),
    }
}
