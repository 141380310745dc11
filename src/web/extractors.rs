//! Extractors: who is asking. `CurrentUser` requires a valid session; `MaybeUser` does not.

use std::future::Future;
use std::pin::Pin;

use actix_web::{FromRequest, HttpMessage, HttpRequest, dev::Payload, web};

use super::WebError;
use crate::auth::sessions::{Authenticated, Rejection};
use crate::state::AppState;

/// Cookie name of the browser session: `__Host-` prefixed (and `Secure`) over HTTPS.
pub fn session_cookie_name(https: bool) -> &'static str {
    if https { "__Host-arbor_session" } else { "arbor_session" }
}

/// The signed-in, active user; anonymous requests fail with 401, disabled users with 403.
#[derive(Debug, Clone)]
pub struct CurrentUser(pub Authenticated);

/// The signed-in user if there is one; a disabled user still gets 403.
#[derive(Debug, Clone)]
pub struct MaybeUser(pub Option<Authenticated>);

/// Resolution cached per request so several extractors cost one lookup.
#[derive(Clone)]
struct Resolved(Option<Authenticated>);

/// Who sent the request (a browser session, or a `full` API token), looked up once per request.
pub(crate) async fn resolve(req: HttpRequest) -> Result<Option<Authenticated>, WebError> {
    if let Some(Resolved(found)) = req.extensions().get::<Resolved>() {
        return Ok(found.clone());
    }
    let state = req
        .app_data::<web::Data<AppState>>()
        .cloned()
        .ok_or_else(|| WebError::Internal("app state missing".into()))?;
    let name = session_cookie_name(state.config.is_https());
    let found = match req.cookie(name) {
        // No browser session: a `full` API token may act for its user on account routes.
        None => match bearer_token(&req) {
            Some(token) => match account_token(&state, token).await {
                Ok(auth) => Some(auth),
                // An unknown token is an anonymous caller (401 where sign-in is needed).
                Err(WebError::Unauthenticated) => None,
                Err(e) => return Err(e),
            },
            None => None,
        },
        Some(cookie) => match state.accounts.browser.resolve(cookie.value()).await? {
            Ok(auth) => Some(auth),
            Err(Rejection::Anonymous) => None,
            Err(Rejection::Disabled) => {
                return Err(WebError::Forbidden("Your account is disabled. Ask an administrator.".into()));
            }
        },
    };
    req.extensions_mut().insert(Resolved(found.clone()));
    Ok(found)
}

/// The token an API client sends: `Authorization: Bearer …`, else `x-api-key`.
pub fn bearer_token(req: &HttpRequest) -> Option<&str> {
    let header = |name: &str| req.headers().get(name).and_then(|v| v.to_str().ok());
    header("authorization")
        .and_then(|v| v.strip_prefix("Bearer ").or_else(|| v.strip_prefix("bearer ")))
        .or_else(|| header("x-api-key"))
        .map(str::trim)
        .filter(|t| !t.is_empty())
}

/// A token on an account route: only `full` tokens of active users pass.
async fn account_token(state: &AppState, token: &str) -> Result<Authenticated, WebError> {
    use crate::domain::accounts::api_tokens::{Refusal, Scope};
    match state.accounts.tokens.authenticate(token).await? {
        Ok(caller) if caller.scope == Scope::Full => Ok(Authenticated {
            user: caller.user,
            actor: caller.actor,
            session_id: String::new(),
            csrf_secret: String::new(),
        }),
        Ok(_) => Err(WebError::Forbidden("This token may only be used for the API under /v1.".into())),
        Err(Refusal::Disabled) => {
            Err(WebError::Forbidden("Your account is disabled. Ask an administrator.".into()))
        }
        Err(Refusal::Invalid) => Err(WebError::Unauthenticated),
    }
}

impl FromRequest for CurrentUser {
    type Error = WebError;
    type Future = Pin<Box<dyn Future<Output = Result<Self, Self::Error>>>>;

    fn from_request(req: &HttpRequest, _: &mut Payload) -> Self::Future {
        let req = req.clone();
        Box::pin(async move { resolve(req).await?.map(CurrentUser).ok_or(WebError::Unauthenticated) })
    }
}

impl FromRequest for MaybeUser {
    type Error = WebError;
    type Future = Pin<Box<dyn Future<Output = Result<Self, Self::Error>>>>;

    fn from_request(req: &HttpRequest, _: &mut Payload) -> Self::Future {
        let req = req.clone();
        Box::pin(async move { resolve(req).await.map(MaybeUser) })
    }
}

/// A signed-in admin, with the proof admin services ask for; members get 403, anonymous
/// requests 401.
#[derive(Debug, Clone)]
pub struct AdminUser(pub Authenticated, pub crate::domain::authz::Admin);

impl FromRequest for AdminUser {
    type Error = WebError;
    type Future = Pin<Box<dyn Future<Output = Result<Self, Self::Error>>>>;

    fn from_request(req: &HttpRequest, _: &mut Payload) -> Self::Future {
        let req = req.clone();
        Box::pin(async move {
            let auth = resolve(req).await?.ok_or(WebError::Unauthenticated)?;
            match auth.actor.admin() {
                Ok(proof) => Ok(AdminUser(auth, proof)),
                Err(_) => Err(WebError::Forbidden("This page is for administrators.".into())),
            }
        })
    }
}

/// Marks the app served on the separate metrics address (`metrics.bind`), where no token is asked.
#[derive(Debug, Clone, Copy)]
pub struct MetricsListener;

/// A scraper allowed to read `/metrics`: on the separate metrics address, or on the main one with
/// the metrics token. With metrics off (or moved to their own address) the route is a 404.
#[derive(Debug, Clone, Copy)]
pub struct MetricsScraper;

impl FromRequest for MetricsScraper {
    type Error = WebError;
    type Future = std::future::Ready<Result<Self, Self::Error>>;

    fn from_request(req: &HttpRequest, _: &mut Payload) -> Self::Future {
        use subtle::ConstantTimeEq;
        let verdict = (|| {
            if req.app_data::<MetricsListener>().is_some() {
                return Ok(MetricsScraper);
            }
            let state = req.app_data::<web::Data<AppState>>().ok_or(WebError::NotFound)?;
            let config = &state.config.metrics;
            if !config.enabled || config.separate_bind().is_some() {
                return Err(WebError::NotFound);
            }
            let expected = config.token.trim().as_bytes();
            match bearer_token(req) {
                Some(sent) if !expected.is_empty() && bool::from(sent.as_bytes().ct_eq(expected)) => {
                    Ok(MetricsScraper)
                }
                _ => Err(WebError::Unauthenticated),
            }
        })();
        std::future::ready(verdict)
    }
}
