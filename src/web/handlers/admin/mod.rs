//! The admin console: users, providers with shared keys, quotas, usage and the audit log.
//! Every handler takes an [`AdminUser`], so members get 403 and anonymous callers 401.

use actix_web::http::StatusCode;
use actix_web::http::header::{self, HeaderValue};
use actix_web::{HttpRequest, HttpResponse, web};
use serde::{Deserialize, Serialize};
use tera::Context;
use uuid::Uuid;

use crate::domain::accounts::Role;
use crate::domain::admin::quotas::Quota;
use crate::domain::admin::{self, ProviderForm};
use crate::domain::mcp::servers::ServerForm;
use crate::domain::{DomainError, DomainResult};
use crate::secret::Secret;
use crate::state::AppState;
use crate::web::charts::{self, Bar};
use crate::web::client::{origin, see_other};
use crate::web::extractors::AdminUser;
use crate::web::form::{Flash, outcome, refusal};
use crate::web::{WebError, render};

/// A same-site link with an encoded query.
fn link(path: &str, pairs: &[(&str, &str)]) -> String {
    let Ok(mut url) = reqwest::Url::parse(&format!("http://arbor.invalid{path}")) else {
        return path.to_string();
    };
    url.query_pairs_mut().extend_pairs(pairs.iter().filter(|(_, v)| !v.is_empty()));
    match url.query() {
        Some(q) if !q.is_empty() => format!("{}?{q}", url.path()),
        _ => url.path().to_string(),
    }
}

fn base_context(admin: &AdminUser, section: &str, flash: &Flash) -> Context {
    let mut ctx = Context::new();
    ctx.insert("user", &admin.0.user);
    ctx.insert("csrf_token", &admin.0.csrf_secret);
    ctx.insert("section", section);
    ctx.insert("flash", flash);
    ctx
}

/// A console page (`pages/admin_<name>.html`, whose form section is `#admin-<name>` with
/// hyphens), with the status its flash says.
fn console_page(
    state: &AppState,
    req: &HttpRequest,
    name: &str,
    ctx: Context,
    status: StatusCode,
) -> Result<HttpResponse, WebError> {
    render::section(
        state,
        req,
        &format!("pages/admin_{name}.html"),
        &format!("partials/_admin_{name}.html"),
        ctx,
        status,
        &format!("#admin-{}", name.replace('_', "-")),
    )
}

/// `GET /admin`: the console opens on the users page.
pub async fn index(req: HttpRequest, _admin: AdminUser) -> HttpResponse {
    see_other(&req, "/admin/users")
}

mod audit;
mod directory;
mod groups;
mod host_folders;
mod links;
mod mcp;
mod providers;
mod quotas;
mod usage;
mod users;

pub use audit::*;
pub use directory::*;
pub use groups::*;
pub use host_folders::*;
pub use links::*;
pub use mcp::*;
pub use providers::*;
pub use quotas::*;
pub use usage::*;
pub use users::*;
