//! The audit log, filtered and paged.

use super::*;
use crate::domain::audit;

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
    let (rows, more) = state.admin.audit_log(&admin.1, &filter, AUDIT_PAGE).await?;
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
