//! The admin console: users, providers with shared keys, quotas, usage and the audit log.
//! Every handler takes an [`AdminUser`], so members get 403 and anonymous callers 401.

use actix_web::http::StatusCode;
use actix_web::http::header::{self, HeaderValue};
use actix_web::{HttpRequest, HttpResponse, web};
use serde::{Deserialize, Serialize};
use tera::Context;
use uuid::Uuid;

use crate::domain::accounts::Role;
use crate::domain::admin::quotas::{self, Quota};
use crate::domain::admin::usage;
use crate::domain::admin::{self, ProviderForm};
use crate::domain::mcp::servers::{self, ServerForm};
use crate::domain::{DomainError, DomainResult, audit};
use crate::secret::Secret;
use crate::state::AppState;
use crate::web::charts::{self, Bar};
use crate::web::client::{origin, see_other};
use crate::web::extractors::AdminUser;
use crate::web::form::Flash;
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

/// Splits a refusal the person can act on from a failure: `(flash, status)` or the error.
fn refusal(e: DomainError) -> Result<(Flash, StatusCode), WebError> {
    match e {
        DomainError::Invalid(m) => Ok((Flash::error(m), StatusCode::BAD_REQUEST)),
        DomainError::Conflict(m) => Ok((Flash::error(m), StatusCode::CONFLICT)),
        other => Err(other.into()),
    }
}

/// `GET /admin`: the console opens on the users page.
pub async fn index(req: HttpRequest, _admin: AdminUser) -> HttpResponse {
    see_other(&req, "/admin/users")
}

// ----- Users ------------------------------------------------------------------------------------

/// Query of the users page.
#[derive(Deserialize, Default)]
#[serde(default)]
pub struct UsersQuery {
    q: String,
    page: u64,
}

#[derive(Serialize)]
struct UserView {
    id: Uuid,
    email: String,
    display_name: String,
    role: &'static str,
    status: &'static str,
    oidc: bool,
    created: String,
    last_login: String,
    is_self: bool,
}

async fn users_page(
    state: &AppState,
    req: &HttpRequest,
    admin: &AdminUser,
    query: &UsersQuery,
    flash: Flash,
    status: StatusCode,
) -> Result<HttpResponse, WebError> {
    let (rows, total) = admin::list_users(&state.db, &admin.0.actor, &query.q, query.page).await?;
    let users: Vec<UserView> = rows
        .into_iter()
        .map(|r| UserView {
            id: r.user.id,
            is_self: r.user.id == admin.0.user.id,
            email: r.user.email,
            display_name: r.user.display_name,
            role: r.user.role.as_str(),
            status: r.user.status.as_str(),
            oidc: r.oidc,
            created: r.created_at.format("%Y-%m-%d").to_string(),
            last_login: r
                .last_login_at
                .map_or_else(|| "never".into(), |t| t.format("%Y-%m-%d %H:%M").to_string()),
        })
        .collect();
    let mut ctx = base_context(admin, "users", &flash);
    ctx.insert("users", &users);
    ctx.insert("total", &total);
    ctx.insert("q", &query.q);
    ctx.insert("page", &query.page);
    let page_url = |page: u64| link("/admin/users", &[("q", query.q.as_str()), ("page", &page.to_string())]);
    ctx.insert("prev_url", &(query.page > 0).then(|| page_url(query.page - 1)));
    ctx.insert("next_url", &((query.page + 1) * admin::USERS_PAGE < total).then(|| page_url(query.page + 1)));
    render::section(
        state,
        req,
        "pages/admin_users.html",
        "partials/_admin_users.html",
        ctx,
        status,
        "#admin-users",
    )
}

/// `GET /admin/users`.
pub async fn users(
    state: web::Data<AppState>,
    req: HttpRequest,
    admin: AdminUser,
    query: web::Query<UsersQuery>,
) -> Result<HttpResponse, WebError> {
    users_page(&state, &req, &admin, &query, Flash::default(), StatusCode::OK).await
}

async fn after_user_change(
    state: &AppState,
    req: &HttpRequest,
    admin: &AdminUser,
    result: DomainResult<String>,
) -> Result<HttpResponse, WebError> {
    let (flash, status) = match result {
        Ok(m) => (Flash::ok(m), StatusCode::OK),
        Err(e) => refusal(e)?,
    };
    users_page(state, req, admin, &UsersQuery::default(), flash, status).await
}

/// The enable/disable form.
#[derive(Deserialize)]
pub struct StatusForm {
    active: String,
}

/// `POST /admin/users/{id}/status`.
pub async fn set_status(
    state: web::Data<AppState>,
    req: HttpRequest,
    admin: AdminUser,
    id: web::Path<Uuid>,
    form: web::Form<StatusForm>,
) -> Result<HttpResponse, WebError> {
    let active = match form.active.as_str() {
        "1" | "true" => true,
        "0" | "false" => false,
        _ => return Err(WebError::BadRequest("Say whether the account is active.".into())),
    };
    let who = origin(&req, &state, &admin.0);
    let result = admin::set_status(&state.db, &admin.0.actor, &who, id.into_inner(), active)
        .await
        .map(|u| format!("{} is now {}.", u.email, u.status.as_str()));
    after_user_change(&state, &req, &admin, result).await
}

/// The role form: only the role; any other field is ignored.
#[derive(Deserialize)]
pub struct RoleForm {
    role: String,
}

/// `POST /admin/users/{id}/role`.
pub async fn set_role(
    state: web::Data<AppState>,
    req: HttpRequest,
    admin: AdminUser,
    id: web::Path<Uuid>,
    form: web::Form<RoleForm>,
) -> Result<HttpResponse, WebError> {
    let role = Role::parse(&form.role).ok_or_else(|| WebError::BadRequest("Pick admin or member.".into()))?;
    let who = origin(&req, &state, &admin.0);
    let result = admin::set_role(&state.db, &admin.0.actor, &who, id.into_inner(), role)
        .await
        .map(|u| format!("{} is now {}.", u.email, u.role.as_str()));
    after_user_change(&state, &req, &admin, result).await
}

/// `GET /admin/users/{id}/delete`: what deleting the user would remove.
pub async fn confirm_delete_user(
    state: web::Data<AppState>,
    req: HttpRequest,
    admin: AdminUser,
    id: web::Path<Uuid>,
) -> Result<HttpResponse, WebError> {
    let id = id.into_inner();
    let summary = admin::deletion_summary(&state.db, &admin.0.actor, id).await?;
    let mut ctx = base_context(&admin, "users", &Flash::default());
    ctx.insert("summary", &summary);
    ctx.insert("target_id", &id);
    ctx.insert("is_self", &(id == admin.0.user.id));
    render::page(&state, &req, "pages/admin_user_delete.html", "partials/_admin_user_delete.html", ctx)
}

/// `POST /admin/users/{id}/delete`: deletes the user and their data, after stopping their
/// running answers.
pub async fn delete_user(
    state: web::Data<AppState>,
    req: HttpRequest,
    admin: AdminUser,
    id: web::Path<Uuid>,
) -> Result<HttpResponse, WebError> {
    let id = id.into_inner();
    let sessions = admin::user_session_ids(&state.db, &admin.0.actor, id).await?;
    let live: Vec<Uuid> = sessions.into_iter().filter(|s| state.runs.is_active(*s)).collect();
    if !live.is_empty() {
        for s in &live {
            state.runs.cancel(*s);
        }
        return Err(WebError::Conflict(
            "This user has answers being written; they are being stopped. Try again in a moment.".into(),
        ));
    }
    let who = origin(&req, &state, &admin.0);
    let result = admin::delete_user(&state.db, &admin.0.actor, &who, id).await.map(|s| {
        format!("{} was deleted with {} sessions and {} messages.", s.email, s.sessions, s.messages)
    });
    after_user_change(&state, &req, &admin, result).await
}

// ----- Providers --------------------------------------------------------------------------------

async fn providers_page(
    state: &AppState,
    req: &HttpRequest,
    admin: &AdminUser,
    flash: Flash,
    form: &ProviderForm,
    status: StatusCode,
) -> Result<HttpResponse, WebError> {
    let mut ctx = base_context(admin, "providers", &flash);
    ctx.insert("providers", &admin::list_providers(&state.db, &admin.0.actor).await?);
    let configured: Vec<(String, String)> = state
        .engine
        .providers()
        .entries()
        .into_iter()
        .filter(|e| e.id.is_none())
        .map(|e| (e.name, e.base_url))
        .collect();
    ctx.insert("configured", &configured);
    ctx.insert("f", &FormEcho::from(form));
    render::section(
        state,
        req,
        "pages/admin_providers.html",
        "partials/_admin_providers.html",
        ctx,
        status,
        "#admin-providers",
    )
}

/// A provider form as shown again after a refusal.
#[derive(Serialize)]
struct FormEcho {
    name: String,
    label: String,
    kind: String,
    base_url: String,
    enabled: bool,
    visibility: String,
    allowed_emails: String,
    models: String,
    rpm: String,
    tpm: String,
}

impl From<&ProviderForm> for FormEcho {
    fn from(f: &ProviderForm) -> Self {
        FormEcho {
            name: f.name.clone(),
            label: f.label.clone(),
            kind: f.kind.clone(),
            base_url: f.base_url.clone(),
            enabled: f.enabled.is_some() || f.kind.is_empty(),
            visibility: f.visibility.clone(),
            allowed_emails: f.allowed_emails.clone(),
            models: f.models.clone(),
            rpm: f.rpm.clone(),
            tpm: f.tpm.clone(),
        }
    }
}

/// `GET /admin/providers`.
pub async fn providers(
    state: web::Data<AppState>,
    req: HttpRequest,
    admin: AdminUser,
) -> Result<HttpResponse, WebError> {
    providers_page(&state, &req, &admin, Flash::default(), &ProviderForm::default(), StatusCode::OK).await
}

/// `POST /admin/providers`: adds a provider, then opens it.
pub async fn create_provider(
    state: web::Data<AppState>,
    req: HttpRequest,
    admin: AdminUser,
    form: web::Form<ProviderForm>,
) -> Result<HttpResponse, WebError> {
    let who = origin(&req, &state, &admin.0);
    match admin::create_provider(&state.db, state.engine.providers(), &admin.0.actor, &who, &form).await {
        Ok(p) => Ok(see_other(&req, &format!("/admin/providers/{}", p.id))),
        Err(e) => {
            let (flash, status) = refusal(e)?;
            providers_page(&state, &req, &admin, flash, &form, status).await
        }
    }
}

async fn provider_page(
    state: &AppState,
    req: &HttpRequest,
    admin: &AdminUser,
    id: Uuid,
    flash: Flash,
    models_override: Option<String>,
    status: StatusCode,
) -> Result<HttpResponse, WebError> {
    let p = admin::get_provider(&state.db, &admin.0.actor, id).await?;
    let emails = admin::user_emails(&state.db, &admin.0.actor, &p.allowed_users).await?;
    let allowed: Vec<String> = p.allowed_users.iter().filter_map(|id| emails.get(id).cloned()).collect();
    let mut ctx = base_context(admin, "providers", &flash);
    let limit = |v: Option<i64>| v.map(|v| v.to_string()).unwrap_or_default();
    let echo = FormEcho {
        name: p.name.clone(),
        label: p.label.clone(),
        kind: p.kind.clone(),
        base_url: p.base_url.clone(),
        enabled: p.enabled,
        visibility: p.visibility.clone(),
        allowed_emails: allowed.join("\n"),
        models: models_override.unwrap_or_else(|| p.models.join("\n")),
        rpm: limit(p.rpm),
        tpm: limit(p.tpm),
    };
    ctx.insert("f", &echo);
    ctx.insert("provider", &p);
    render::section(
        state,
        req,
        "pages/admin_provider.html",
        "partials/_admin_provider.html",
        ctx,
        status,
        "#admin-provider",
    )
}

/// `GET /admin/providers/{id}`.
pub async fn provider(
    state: web::Data<AppState>,
    req: HttpRequest,
    admin: AdminUser,
    id: web::Path<Uuid>,
) -> Result<HttpResponse, WebError> {
    provider_page(&state, &req, &admin, id.into_inner(), Flash::default(), None, StatusCode::OK).await
}

/// `POST /admin/providers/{id}`: saves its settings.
pub async fn update_provider(
    state: web::Data<AppState>,
    req: HttpRequest,
    admin: AdminUser,
    id: web::Path<Uuid>,
    form: web::Form<ProviderForm>,
) -> Result<HttpResponse, WebError> {
    let id = id.into_inner();
    let who = origin(&req, &state, &admin.0);
    let (flash, status) =
        match admin::update_provider(&state.db, state.engine.providers(), &admin.0.actor, &who, id, &form)
            .await
        {
            Ok(_) => (Flash::ok("Saved."), StatusCode::OK),
            Err(e) => refusal(e)?,
        };
    provider_page(&state, &req, &admin, id, flash, None, status).await
}

/// `POST /admin/providers/{id}/delete`.
pub async fn delete_provider(
    state: web::Data<AppState>,
    req: HttpRequest,
    admin: AdminUser,
    id: web::Path<Uuid>,
) -> Result<HttpResponse, WebError> {
    let who = origin(&req, &state, &admin.0);
    admin::delete_provider(&state.db, state.engine.providers(), &admin.0.actor, &who, id.into_inner())
        .await?;
    Ok(see_other(&req, "/admin/providers"))
}

/// The add-key form.
#[derive(Deserialize)]
pub struct KeyForm {
    #[serde(default)]
    label: String,
    #[serde(default)]
    key: String,
}

/// `POST /admin/providers/{id}/keys`: adds a shared key.
pub async fn add_key(
    state: web::Data<AppState>,
    req: HttpRequest,
    admin: AdminUser,
    id: web::Path<Uuid>,
    form: web::Form<KeyForm>,
) -> Result<HttpResponse, WebError> {
    let id = id.into_inner();
    let who = origin(&req, &state, &admin.0);
    let form = form.into_inner();
    let value = Secret::new(form.key);
    let result = admin::add_key(
        &state.db,
        &state.vault,
        state.engine.providers(),
        &admin.0.actor,
        &who,
        id,
        admin::NewKey { label: &form.label, value: &value },
    )
    .await;
    let (flash, status) = match result {
        Ok(k) => (Flash::ok(format!("Key \"{}\" (…{}) added.", k.label, k.last4)), StatusCode::OK),
        Err(e) => refusal(e)?,
    };
    provider_page(&state, &req, &admin, id, flash, None, status).await
}

/// `POST /admin/providers/{id}/keys/{key_id}/delete`.
pub async fn delete_key(
    state: web::Data<AppState>,
    req: HttpRequest,
    admin: AdminUser,
    path: web::Path<(Uuid, Uuid)>,
) -> Result<HttpResponse, WebError> {
    let (id, key) = path.into_inner();
    let who = origin(&req, &state, &admin.0);
    admin::delete_key(&state.db, state.engine.providers(), &admin.0.actor, &who, id, key).await?;
    provider_page(&state, &req, &admin, id, Flash::ok("Key deleted."), None, StatusCode::OK).await
}

/// `POST /admin/providers/{id}/test`: lists the provider's models with its shared keys and
/// offers them in the enabled-models box.
pub async fn test_provider(
    state: web::Data<AppState>,
    req: HttpRequest,
    admin: AdminUser,
    id: web::Path<Uuid>,
) -> Result<HttpResponse, WebError> {
    let id = id.into_inner();
    let who = origin(&req, &state, &admin.0);
    match admin::discover_models(&state.db, state.engine.providers(), &admin.0.actor, &who, id).await? {
        Ok(models) => {
            let flash = Flash::ok(format!(
                "The connection works: {} chat models found. They are in the box below; remove the ones to \
                 keep off, then save.",
                models.len()
            ));
            provider_page(&state, &req, &admin, id, flash, Some(models.join("\n")), StatusCode::OK).await
        }
        Err(m) => {
            provider_page(
                &state,
                &req,
                &admin,
                id,
                Flash::error(format!("The test failed. {m}")),
                None,
                StatusCode::OK,
            )
            .await
        }
    }
}

// ----- Quotas -----------------------------------------------------------------------------------

#[derive(Serialize)]
struct QuotaRow {
    id: Uuid,
    email: String,
    quota: QuotaText,
}

/// A quota as the form shows it: tokens as numbers, money in dollars.
#[derive(Serialize, Default)]
struct QuotaText {
    tokens_day: String,
    tokens_month: String,
    dollars_day: String,
    dollars_month: String,
}

fn quota_text(q: &Quota) -> QuotaText {
    let t = |v: Option<i64>| v.map(|v| v.to_string()).unwrap_or_default();
    let d = |v: Option<i64>| v.map(|v| format!("{:.2}", v as f64 / 1_000_000.0)).unwrap_or_default();
    QuotaText {
        tokens_day: t(q.tokens_day),
        tokens_month: t(q.tokens_month),
        dollars_day: d(q.micros_day),
        dollars_month: d(q.micros_month),
    }
}

async fn quotas_page(
    state: &AppState,
    req: &HttpRequest,
    admin: &AdminUser,
    flash: Flash,
    status: StatusCode,
) -> Result<HttpResponse, WebError> {
    let (default, users) = quotas::list(&state.db, &admin.0.actor).await?;
    let ids: Vec<Uuid> = users.iter().map(|(id, _)| *id).collect();
    let emails = admin::user_emails(&state.db, &admin.0.actor, &ids).await?;
    let mut rows = Vec::new();
    for (id, q) in users {
        if let Some(email) = emails.get(&id) {
            rows.push(QuotaRow { id, email: email.clone(), quota: quota_text(&q) });
        }
    }
    rows.sort_by(|a, b| a.email.cmp(&b.email));
    let mut ctx = base_context(admin, "quotas", &flash);
    ctx.insert("default", &quota_text(&default));
    ctx.insert("rows", &rows);
    render::section(
        state,
        req,
        "pages/admin_quotas.html",
        "partials/_admin_quotas.html",
        ctx,
        status,
        "#admin-quotas",
    )
}

/// `GET /admin/quotas`.
pub async fn quotas_show(
    state: web::Data<AppState>,
    req: HttpRequest,
    admin: AdminUser,
) -> Result<HttpResponse, WebError> {
    quotas_page(&state, &req, &admin, Flash::default(), StatusCode::OK).await
}

/// The quota form; `email` blank means the instance default.
#[derive(Deserialize, Default)]
#[serde(default)]
pub struct QuotaForm {
    email: String,
    tokens_day: String,
    tokens_month: String,
    dollars_day: String,
    dollars_month: String,
    inherit: Option<String>,
}

fn parse_tokens(raw: &str, what: &str) -> Result<Option<i64>, String> {
    let raw = raw.trim().replace(['_', ','], "");
    if raw.is_empty() {
        return Ok(None);
    }
    raw.parse::<i64>()
        .ok()
        .filter(|v| *v >= 0)
        .map(Some)
        .ok_or_else(|| format!("{what} must be a whole number, or blank."))
}

fn parse_dollars(raw: &str, what: &str) -> Result<Option<i64>, String> {
    let raw = raw.trim().trim_start_matches('$').replace(',', "");
    if raw.is_empty() {
        return Ok(None);
    }
    match raw.parse::<f64>() {
        Ok(v) if v.is_finite() && (0.0..=1e9).contains(&v) => Ok(Some((v * 1_000_000.0).round() as i64)),
        _ => Err(format!("{what} must be an amount in dollars, or blank.")),
    }
}

/// `POST /admin/quotas`: sets the instance default or one user's quota.
pub async fn quotas_save(
    state: web::Data<AppState>,
    req: HttpRequest,
    admin: AdminUser,
    form: web::Form<QuotaForm>,
) -> Result<HttpResponse, WebError> {
    let parsed = (|| -> Result<Quota, String> {
        Ok(Quota {
            tokens_day: parse_tokens(&form.tokens_day, "Tokens per day")?,
            tokens_month: parse_tokens(&form.tokens_month, "Tokens per month")?,
            micros_day: parse_dollars(&form.dollars_day, "Dollars per day")?,
            micros_month: parse_dollars(&form.dollars_month, "Dollars per month")?,
        })
    })();
    let quota = match parsed {
        Ok(q) => q,
        Err(m) => return quotas_page(&state, &req, &admin, Flash::error(m), StatusCode::BAD_REQUEST).await,
    };
    let user = match form.email.trim() {
        "" => None,
        email => match admin::user_by_email(&state.db, &admin.0.actor, email).await? {
            Some(id) => Some(id),
            None => {
                let flash = Flash::error(format!("There is no user {}.", form.email.trim()));
                return quotas_page(&state, &req, &admin, flash, StatusCode::BAD_REQUEST).await;
            }
        },
    };
    let who = origin(&req, &state, &admin.0);
    let (flash, status) =
        match quotas::set(&state.db, &admin.0.actor, &who, user, quota, form.inherit.is_some()).await {
            Ok(()) => (Flash::ok("Quota saved."), StatusCode::OK),
            Err(e) => refusal(e)?,
        };
    quotas_page(&state, &req, &admin, flash, status).await
}

// ----- Usage ------------------------------------------------------------------------------------

/// Query of the usage page and export.
#[derive(Deserialize)]
pub struct UsageQuery {
    #[serde(default = "thirty")]
    days: u32,
}

fn thirty() -> u32 {
    30
}

/// `GET /admin/usage`: charts and tables for the period.
pub async fn usage_show(
    state: web::Data<AppState>,
    req: HttpRequest,
    admin: AdminUser,
    query: web::Query<UsageQuery>,
) -> Result<HttpResponse, WebError> {
    let report = usage::report(&state.db, &admin.0.actor, query.days).await?;
    let per_day: Vec<Bar> = report
        .per_day
        .iter()
        .map(|t| Bar::new(t.key.get(5..).unwrap_or(&t.key), t.tokens() as f64))
        .collect();
    let cost_per_day: Vec<Bar> = report
        .per_day
        .iter()
        .map(|t| Bar::new(t.key.get(5..).unwrap_or(&t.key), t.micros as f64 / 1_000_000.0))
        .collect();
    let per_user: Vec<Bar> =
        report.per_user.iter().take(15).map(|t| Bar::new(t.key.clone(), t.tokens() as f64)).collect();
    let per_model: Vec<Bar> =
        report.per_model.iter().take(15).map(|t| Bar::new(t.key.clone(), t.tokens() as f64)).collect();
    let mut ctx = base_context(&admin, "usage", &Flash::default());
    // The charts escape every label themselves (see web::charts); the template marks them safe.
    ctx.insert("chart_tokens", &charts::bar_chart("Tokens per day", "tokens", &per_day));
    ctx.insert("chart_cost", &charts::bar_chart("Cost per day", "$", &cost_per_day));
    ctx.insert("chart_users", &charts::ranking_chart("Tokens per user", "tokens", &per_user));
    ctx.insert("chart_models", &charts::ranking_chart("Tokens per model", "tokens", &per_model));
    ctx.insert("report", &report);
    ctx.insert("periods", &[1u32, 7, 30, 90, 365]);
    ctx.insert("total_cost", &format!("{:.2}", report.total.micros as f64 / 1_000_000.0));
    render::page(&state, &req, "pages/admin_usage.html", "partials/_admin_usage.html", ctx)
}

/// `GET /admin/usage.csv`: the period's usage as a download.
pub async fn usage_csv(
    state: web::Data<AppState>,
    admin: AdminUser,
    query: web::Query<UsageQuery>,
) -> Result<HttpResponse, WebError> {
    let body = usage::csv(&state.db, &admin.0.actor, query.days).await?;
    let name = format!("arbor-usage-{}d-{}.csv", query.days, chrono::Utc::now().format("%Y%m%d"));
    Ok(HttpResponse::Ok()
        .insert_header((header::CONTENT_TYPE, HeaderValue::from_static("text/csv; charset=utf-8")))
        .insert_header((header::CONTENT_DISPOSITION, format!("attachment; filename=\"{name}\"")))
        .insert_header((header::CACHE_CONTROL, HeaderValue::from_static("no-store")))
        .insert_header((header::X_CONTENT_TYPE_OPTIONS, HeaderValue::from_static("nosniff")))
        .body(body))
}

// ----- Audit log --------------------------------------------------------------------------------

/// Filters of the audit page.
#[derive(Deserialize, Default, Serialize)]
#[serde(default)]
pub struct AuditQuery {
    action: String,
    actor: String,
    target: String,
    before: Option<Uuid>,
}

/// An audit row as the page shows it.
#[derive(Serialize)]
struct AuditRow {
    when: String,
    actor: String,
    action: String,
    target: String,
    details: String,
    ip: Option<String>,
}

/// Audit rows per page.
const AUDIT_PAGE: u64 = 100;

/// `GET /admin/audit`.
pub async fn audit_show(
    state: web::Data<AppState>,
    req: HttpRequest,
    admin: AdminUser,
    query: web::Query<AuditQuery>,
) -> Result<HttpResponse, WebError> {
    let filter = audit::Filter {
        action: Some(query.action.trim().to_string()),
        actor: Some(query.actor.trim().to_string()),
        target: Some(query.target.trim().to_string()),
        since: None,
        until: None,
        before: query.before,
    };
    let (rows, more) = audit::list(&state.db, &admin.0.actor, &filter, AUDIT_PAGE).await?;
    let older_url = more.then(|| rows.last().map(|r| r.id)).flatten().map(|before| {
        let before = before.to_string();
        link(
            "/admin/audit",
            &[
                ("action", query.action.as_str()),
                ("actor", query.actor.as_str()),
                ("target", query.target.as_str()),
                ("before", before.as_str()),
            ],
        )
    });
    let rows: Vec<AuditRow> = rows
        .into_iter()
        .map(|r| AuditRow {
            when: r.at.format("%Y-%m-%d %H:%M:%S").to_string(),
            actor: r.actor,
            action: r.action,
            target: r.target,
            details: r.details,
            ip: r.ip,
        })
        .collect();
    let mut ctx = base_context(&admin, "audit", &Flash::default());
    ctx.insert("rows", &rows);
    ctx.insert("query", &*query);
    ctx.insert("older_url", &older_url);
    render::page(&state, &req, "pages/admin_audit.html", "partials/_admin_audit.html", ctx)
}

// ----- MCP servers ------------------------------------------------------------------------------

async fn mcp_page(
    state: &AppState,
    req: &HttpRequest,
    admin: &AdminUser,
    flash: Flash,
    status: StatusCode,
) -> Result<HttpResponse, WebError> {
    let mut ctx = base_context(admin, "mcp", &flash);
    ctx.insert("servers", &servers::list(&state.db, &admin.0.actor).await?);
    render::section(state, req, "pages/admin_mcp.html", "partials/_admin_mcp.html", ctx, status, "#admin-mcp")
}

/// `GET /admin/mcp`.
pub async fn mcp_show(
    state: web::Data<AppState>,
    req: HttpRequest,
    admin: AdminUser,
) -> Result<HttpResponse, WebError> {
    mcp_page(&state, &req, &admin, Flash::default(), StatusCode::OK).await
}

async fn after_mcp_change<T>(
    state: &AppState,
    req: &HttpRequest,
    admin: &AdminUser,
    result: DomainResult<T>,
    ok: &str,
) -> Result<HttpResponse, WebError> {
    let (flash, status) = match result {
        Ok(_) => (Flash::ok(ok), StatusCode::OK),
        Err(e) => refusal(e)?,
    };
    mcp_page(state, req, admin, flash, status).await
}

/// `POST /admin/mcp`: adds a server.
pub async fn mcp_create(
    state: web::Data<AppState>,
    req: HttpRequest,
    admin: AdminUser,
    form: web::Form<ServerForm>,
) -> Result<HttpResponse, WebError> {
    let who = origin(&req, &state, &admin.0);
    let result = servers::create(&state.db, &state.vault, &admin.0.actor, &who, &form).await;
    after_mcp_change(&state, &req, &admin, result, "MCP server added.").await
}

/// `POST /admin/mcp/{id}`: saves a server.
pub async fn mcp_update(
    state: web::Data<AppState>,
    req: HttpRequest,
    admin: AdminUser,
    id: web::Path<Uuid>,
    form: web::Form<ServerForm>,
) -> Result<HttpResponse, WebError> {
    let who = origin(&req, &state, &admin.0);
    let result = servers::update(&state.db, &state.vault, &admin.0.actor, &who, id.into_inner(), &form).await;
    after_mcp_change(&state, &req, &admin, result, "Saved.").await
}

/// `POST /admin/mcp/{id}/delete`.
pub async fn mcp_delete(
    state: web::Data<AppState>,
    req: HttpRequest,
    admin: AdminUser,
    id: web::Path<Uuid>,
) -> Result<HttpResponse, WebError> {
    let who = origin(&req, &state, &admin.0);
    servers::delete(&state.db, &admin.0.actor, &who, id.into_inner()).await?;
    mcp_page(&state, &req, &admin, Flash::ok("MCP server deleted."), StatusCode::OK).await
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn quota_numbers_are_parsed_strictly() {
        assert_eq!(parse_tokens("", "x"), Ok(None));
        assert_eq!(parse_tokens("1_000,000", "x"), Ok(Some(1_000_000)));
        assert!(parse_tokens("-5", "x").is_err());
        assert!(parse_tokens("lots", "x").is_err());
        assert_eq!(parse_dollars("$1.50", "x"), Ok(Some(1_500_000)));
        assert_eq!(parse_dollars("", "x"), Ok(None));
        assert!(parse_dollars("NaN", "x").is_err());
        assert!(parse_dollars("inf", "x").is_err());
        assert!(parse_dollars("-1", "x").is_err());
    }
}

// ----- Host folders -----------------------------------------------------------------------------

async fn host_page(
    state: &AppState,
    req: &HttpRequest,
    admin: &AdminUser,
    flash: Flash,
    status: StatusCode,
) -> Result<HttpResponse, WebError> {
    let (rows, workspaces) = crate::domain::agent::host_roots_console(&state.db, &admin.0.actor).await?;
    let mut ctx = base_context(admin, "host", &flash);
    ctx.insert("rows", &rows);
    ctx.insert("workspaces", &workspaces);
    render::section(
        state,
        req,
        "pages/admin_host_folders.html",
        "partials/_admin_host_folders.html",
        ctx,
        status,
        "#admin-host-folders",
    )
}

/// `GET /admin/host-folders`: host folders allowed per workspace.
pub async fn host_folders(
    state: web::Data<AppState>,
    req: HttpRequest,
    admin: AdminUser,
) -> Result<HttpResponse, WebError> {
    host_page(&state, &req, &admin, Flash::default(), StatusCode::OK).await
}

/// The form allowing a host folder.
#[derive(Deserialize)]
pub struct HostFolderForm {
    #[serde(default)]
    workspace_id: String,
    #[serde(default)]
    path: String,
}

/// `POST /admin/host-folders`: allows a host folder for a workspace.
pub async fn allow_host_folder(
    state: web::Data<AppState>,
    req: HttpRequest,
    admin: AdminUser,
    form: web::Form<HostFolderForm>,
) -> Result<HttpResponse, WebError> {
    let who = origin(&req, &state, &admin.0);
    let result = match Uuid::parse_str(form.workspace_id.trim()) {
        Ok(ws) => {
            crate::domain::agent::allow_host_root(
                &state.db,
                &admin.0.actor,
                &who,
                &state.config.data_dir,
                ws,
                &form.path,
            )
            .await
        }
        Err(_) => Err(DomainError::Invalid("Choose a workspace.".into())),
    };
    let (flash, status) = match result {
        Ok(()) => (Flash::ok("Folder allowed: that workspace's sessions may expose it now."), StatusCode::OK),
        Err(e) => refusal(e)?,
    };
    host_page(&state, &req, &admin, flash, status).await
}

/// `POST /admin/host-folders/{id}/delete`: withdraws a host folder.
pub async fn remove_host_folder(
    state: web::Data<AppState>,
    req: HttpRequest,
    admin: AdminUser,
    id: web::Path<Uuid>,
) -> Result<HttpResponse, WebError> {
    let who = origin(&req, &state, &admin.0);
    crate::domain::agent::remove_host_root(&state.db, &admin.0.actor, &who, id.into_inner()).await?;
    host_page(
        &state,
        &req,
        &admin,
        Flash::ok("Folder withdrawn: the agent cannot use it any more."),
        StatusCode::OK,
    )
    .await
}
