//! Sign-in with the OpenID Connect provider: start (POST) and callback.

use actix_web::cookie::{Cookie, SameSite, time::Duration as CookieDuration};
use actix_web::{HttpRequest, HttpResponse, web};
use chrono::{Duration, Utc};
use serde::Deserialize;
use subtle::ConstantTimeEq;

use crate::auth::sessions::{hash_token, random_token};
use crate::domain::DomainError;
use crate::domain::accounts::oidc_accounts::LoginFlow;
use crate::state::AppState;
use crate::web::WebError;
use crate::web::client::{safe_return_to, see_other};

/// Cookie binding a pending sign-in to this browser.
const FLOW_COOKIE: &str = "arbor_oidc";
/// How long a started sign-in may take.
const FLOW_MINUTES: i64 = 10;

/// Form of the sign-in button.
#[derive(Deserialize)]
pub struct StartForm {
    next: Option<String>,
    invitation: Option<String>,
}

/// Refuses a client address past the sign-in attempts allowed per minute in `bucket`.
async fn limit_per_address(state: &AppState, req: &HttpRequest, bucket: &str) -> Result<(), WebError> {
    let cfg = &state.config.auth;
    let ip = crate::web::client::client_bucket(req, &cfg.trusted_proxies);
    if let Err(retry) = state
        .login_limiter
        .check(
            &format!("{bucket}:{ip}"),
            cfg.login_attempts_per_ip_per_minute,
            std::time::Duration::from_secs(60),
        )
        .await
    {
        let secs = retry.0.as_secs().max(1);
        return Err(WebError::TooManyRequests(
            format!("Too many sign-in attempts. Try again in {secs} seconds."),
            secs,
        ));
    }
    Ok(())
}

/// `POST /auth/oidc/start`: a fresh state, nonce and PKCE pair, remembered server-side for this
/// browser, then off to the provider.
pub async fn start(
    state: web::Data<AppState>,
    req: HttpRequest,
    form: web::Form<StartForm>,
) -> Result<HttpResponse, WebError> {
    let oidc = state.oidc.as_ref().ok_or(WebError::NotFound)?;
    limit_per_address(&state, &req, "oidc").await?;
    let invitation_id = match form.invitation.as_deref().filter(|t| !t.is_empty()) {
        Some(token) => Some(state.accounts.invitations.open(token).await?.id),
        None => None,
    };
    let setup_token = match req.cookie(crate::web::sign_in::SETUP_COOKIE) {
        Some(c) if state.accounts.setup_is_open(c.value()).await? => Some(c.value().to_string()),
        _ => None,
    };
    let auth = oidc.begin().await.map_err(|e| {
        tracing::error!(error = %e, "OIDC start failed");
        WebError::Unavailable(
            "The identity provider cannot be reached right now. Try again in a moment.".into(),
        )
    })?;
    let flow = LoginFlow {
        state: auth.state,
        nonce: auth.nonce,
        pkce_verifier: auth.pkce_verifier,
        return_to: safe_return_to(form.next.as_deref()),
        invitation_id,
        setup_token,
    };
    let browser_secret = random_token();
    state
        .accounts
        .remember_flow(&hash_token(&browser_secret), &flow, Utc::now() + Duration::minutes(FLOW_MINUTES))
        .await?;
    let cookie = Cookie::build(FLOW_COOKIE, browser_secret)
        .path("/auth/oidc")
        .http_only(true)
        .same_site(SameSite::Lax)
        .secure(state.config.is_https())
        .max_age(CookieDuration::minutes(FLOW_MINUTES))
        .finish();
    // htmx turns this into a plain navigation: CSP `form-action 'self'` forbids a form
    // submission from being redirected to the provider's origin.
    let mut res = see_other(&req, &auth.url);
    let _ = res.add_cookie(&cookie);
    Ok(res)
}

/// Query of the provider's redirect back to Arbor.
#[derive(Deserialize)]
pub struct CallbackQuery {
    code: Option<String>,
    state: Option<String>,
    iss: Option<String>,
    error: Option<String>,
}

fn refused(msg: &str) -> WebError {
    WebError::BadRequest(format!("Sign-in failed: {msg} Start again from the sign-in page."))
}

/// `GET /auth/oidc/callback`: only for the browser that started the sign-in, once, in time;
/// then every token check; then the account.
pub async fn callback(
    state: web::Data<AppState>,
    req: HttpRequest,
    q: web::Query<CallbackQuery>,
) -> Result<HttpResponse, WebError> {
    let oidc = state.oidc.as_ref().ok_or(WebError::NotFound)?;
    // Callbacks count in a bucket of their own, so a person's start and callback are not one
    // sign-in spent twice; each one costs a database lookup and, with a flow, a provider call.
    limit_per_address(&state, &req, "oidc-callback").await?;
    let Some(cookie) = req.cookie(FLOW_COOKIE) else {
        return Err(refused("this browser did not start a sign-in, or it took too long."));
    };
    // Taken (deleted) before anything else: a replayed callback finds nothing.
    let Some(flow) = state.accounts.take_flow(&hash_token(cookie.value())).await? else {
        return Err(refused("this sign-in was already used or has expired."));
    };
    if let Some(error) = &q.error {
        tracing::info!(error = %error, "the provider refused the sign-in");
        return Err(refused("the identity provider did not sign you in."));
    }
    let returned_state = q.state.as_deref().unwrap_or("");
    if !bool::from(returned_state.as_bytes().ct_eq(flow.state.as_bytes())) {
        return Err(refused("the answer does not belong to this sign-in."));
    }
    let code =
        q.code.as_deref().filter(|c| !c.is_empty()).ok_or_else(|| refused("the answer has no code."))?;
    let identity =
        oidc.finish(code, q.iss.as_deref(), &flow.nonce, &flow.pkce_verifier).await.map_err(|e| {
            tracing::warn!(error = %e, "OIDC callback refused");
            refused("the identity provider's answer did not pass the security checks.")
        })?;
    let user =
        match state.accounts.sign_in_with_provider(&state.config.oidc, &identity, flow.invitation_id).await {
            Ok(u) => u,
            Err(DomainError::Forbidden) => {
                return Err(WebError::Forbidden("Your account is disabled. Ask an administrator.".into()));
            }
            Err(DomainError::Invalid(m)) => return Err(WebError::Forbidden(m)),
            Err(DomainError::NotFound) => {
                return Err(refused("the invitation was already used or has expired."));
            }
            Err(e) => return Err(e.into()),
        };
    tracing::info!(user = %user.id, "signed in with the identity provider");
    let mut res = crate::web::sign_in::finish_sign_in_with_setup(
        &state,
        &req,
        &user,
        &flow.return_to,
        flow.setup_token,
    )
    .await?;
    let mut gone = Cookie::build(FLOW_COOKIE, "").path("/auth/oidc").finish();
    gone.make_removal();
    let _ = res.add_cookie(&gone);
    Ok(res)
}
