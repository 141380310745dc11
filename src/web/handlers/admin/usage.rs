//! Usage: the report page with its charts, and the CSV export.

use super::*;

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
    let report = state.admin.usage_report(&admin.1, query.days).await?;
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
    let body = state.admin.usage_csv(&admin.1, query.days).await?;
    let name = format!("arbor-usage-{}d-{}.csv", query.days, chrono::Utc::now().format("%Y%m%d"));
    Ok(HttpResponse::Ok()
        .insert_header((header::CONTENT_TYPE, HeaderValue::from_static("text/csv; charset=utf-8")))
        .insert_header((header::CONTENT_DISPOSITION, format!("attachment; filename=\"{name}\"")))
        .insert_header((header::CACHE_CONTROL, HeaderValue::from_static("no-store")))
        .insert_header((header::X_CONTENT_TYPE_OPTIONS, HeaderValue::from_static("nosniff")))
        .body(body))
}
