//! Refused forms and flashes, written once: the message a page shows after an action, and the
//! fragment (placed by [`retarget`]) that puts a refusal where the form shows errors.

use actix_web::HttpResponse;
use actix_web::http::StatusCode;
use serde::Serialize;
use tera::Context;

use super::WebError;
use super::render::{html_response, render_to_string, retarget};
use crate::state::AppState;

/// What a page says after an action: a success or an error line.
#[derive(Serialize, Default, Debug, Clone)]
pub struct Flash {
    /// The success line.
    pub ok: Option<String>,
    /// The error line.
    pub error: Option<String>,
}

/// How a domain refusal reads as a page's flash line: a bad form 400, a clash 409; anything
/// else is the error page's.
pub fn refusal(e: crate::domain::DomainError) -> Result<(Flash, StatusCode), WebError> {
    use crate::domain::DomainError;
    match e {
        DomainError::Invalid(m) => Ok((Flash::error(m), StatusCode::BAD_REQUEST)),
        DomainError::Conflict(m) => Ok((Flash::error(m), StatusCode::CONFLICT)),
        other => Err(other.into()),
    }
}

/// How an action's result reads as a page's flash line: the success line `ok` makes of the
/// value (200), or the refusal ([`refusal`]).
pub fn outcome<T>(
    result: crate::domain::DomainResult<T>,
    ok: impl FnOnce(T) -> String,
) -> Result<(Flash, StatusCode), WebError> {
    match result {
        Ok(v) => Ok((Flash::ok(ok(v)), StatusCode::OK)),
        Err(e) => refusal(e),
    }
}

impl Flash {
    /// A success line.
    pub fn ok(m: impl Into<String>) -> Flash {
        Flash { ok: Some(m.into()), error: None }
    }

    /// An error line.
    pub fn error(m: impl Into<String>) -> Flash {
        Flash { ok: None, error: Some(m.into()) }
    }
}

/// A refused form: the message in the element `target` (an id selector) of the page, with the
/// status that says what happened.
pub fn refused(
    state: &AppState,
    status: StatusCode,
    message: &str,
    target: &str,
) -> Result<HttpResponse, WebError> {
    let mut ctx = Context::new();
    ctx.insert("message", message);
    let html = render_to_string(state, "partials/_flash_error.html", &ctx)?;
    let mut res = html_response(status, html);
    retarget(&mut res, target, "innerHTML");
    Ok(res)
}
