//! Quotas: the instance default and per-person limits.

use super::*;
use crate::domain::admin::quotas;

#[derive(Serialize)]
struct QuotaRow {
    id: Uuid,
    email: String,
    /// The "use the default" button's `hx-vals`, made by a JSON serializer (never by pasting
    /// text into JSON); the template escapes it for the attribute.
    inherit_vals: String,
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
    let page = state.pages.admin_quotas(&admin.1).await?;
    let (all, emails, names) = (page.quotas, page.emails, page.group_names);
    let mut group_rows: Vec<QuotaRow> = all
        .groups
        .iter()
        .filter_map(|(id, q)| {
            let name = names.get(id)?;
            let inherit_vals = serde_json::json!({ "group": name, "inherit": "on" }).to_string();
            Some(QuotaRow { id: *id, email: name.clone(), inherit_vals, quota: quota_text(q) })
        })
        .collect();
    group_rows.sort_by_key(|r| r.email.to_lowercase());
    let (default, users) = (all.default, all.people);
    let mut rows = Vec::new();
    for (id, q) in users {
        if let Some(email) = emails.get(&id) {
            let inherit_vals = serde_json::json!({ "email": email, "inherit": "on" }).to_string();
            rows.push(QuotaRow { id, email: email.clone(), inherit_vals, quota: quota_text(&q) });
        }
    }
    rows.sort_by(|a, b| a.email.cmp(&b.email));
    let mut ctx = base_context(admin, "quotas", &flash);
    ctx.insert("default", &quota_text(&default));
    ctx.insert("rows", &rows);
    ctx.insert("group_rows", &group_rows);
    console_page(state, req, "quotas", ctx, status)
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
    group: String,
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
    let subject = match (form.email.trim(), form.group.trim()) {
        ("", "") => quotas::Subject::Default,
        (email, "") => match state.admin.user_by_email(&admin.1, email).await? {
            Some(id) => quotas::Subject::Person(id),
            None => {
                let flash = Flash::error(format!("There is no user {}.", form.email.trim()));
                return quotas_page(&state, &req, &admin, flash, StatusCode::BAD_REQUEST).await;
            }
        },
        ("", group) => match state.teams.groups.by_name(&admin.1, group).await? {
            Some(g) => quotas::Subject::Group(g.id),
            None => {
                let flash = Flash::error(format!("There is no group called {group}."));
                return quotas_page(&state, &req, &admin, flash, StatusCode::BAD_REQUEST).await;
            }
        },
        _ => {
            let flash = Flash::error("Set a quota for a person or for a group, not both at once.");
            return quotas_page(&state, &req, &admin, flash, StatusCode::BAD_REQUEST).await;
        }
    };
    let who = origin(&req, &state, &admin.0);
    let (flash, status) =
        outcome(state.admin.set_quota(&admin.1, &who, subject, quota, form.inherit.is_some()).await, |()| {
            "Quota saved.".into()
        })?;
    quotas_page(&state, &req, &admin, flash, status).await
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
