//! Extractors: who is asking. `CurrentUser` requires a valid session; `MaybeUser` does not.

use std::future::Future;
use std::pin::Pin;

use actix_web::{FromRequest, HttpMessage, HttpRequest, dev::Payload, web};

use super::WebError;
use crate::auth::sessions::{self, Authenticated, Rejection};
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

async fn resolve(req: HttpRequest) -> Result<Option<Authenticated>, WebError> {
    if let Some(Resolved(found)) = req.extensions().get::<Resolved>() {
        return Ok(found.clone());
    }
    let state = req
        .app_data::<web::Data<AppState>>()
        .cloned()
        .ok_or_else(|| WebError::Internal("app state missing".into()))?;
    let name = session_cookie_name(state.config.is_https());
    let found = match req.cookie(name) {
        None => None,
        Some(cookie) => match sessions::resolve(&state.db, &state.config.auth, cookie.value()).await? {
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

/// A signed-in admin; members get 403, anonymous requests 401.
#[derive(Debug, Clone)]
pub struct AdminUser(pub Authenticated);

impl FromRequest for AdminUser {
    type Error = WebError;
    type Future = Pin<Box<dyn Future<Output = Result<Self, Self::Error>>>>;

    fn from_request(req: &HttpRequest, _: &mut Payload) -> Self::Future {
        let req = req.clone();
        Box::pin(async move {
            let auth = resolve(req).await?.ok_or(WebError::Unauthenticated)?;
            if auth.actor.is_admin() {
                Ok(AdminUser(auth))
            } else {
                Err(WebError::Forbidden("This page is for administrators.".into()))
            }
        })
    }
}
