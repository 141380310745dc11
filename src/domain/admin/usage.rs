//! Usage reports for the admin console: requests, tokens and cost per day, per user and per
//! model over a period, and the same rows as CSV.

use std::collections::{BTreeMap, HashMap};

use chrono::{Duration, Utc};
use serde::Serialize;
use uuid::Uuid;

use crate::domain::authz::Admin;
use crate::domain::{DomainError, DomainResult};
use crate::storage::Db;
use crate::storage::repos::usage as repo;

/// The longest period a report covers, in days.
pub const MAX_DAYS: u32 = 366;

/// One group's totals.
#[derive(Debug, Clone, Default, PartialEq, Serialize)]
pub struct Totals {
    /// What the group is (a day, an email, a model).
    pub key: String,
    /// Provider calls.
    pub requests: u64,
    /// Prompt tokens.
    pub tokens_in: u64,
    /// Generated tokens.
    pub tokens_out: u64,
    /// Cost in micro-dollars (calls with a known price only).
    pub micros: i64,
    /// The cost in dollars, two decimals, for display.
    pub dollars: String,
}

impl Totals {
    fn add(&mut self, tin: i64, tout: i64, micros: Option<i64>) {
        self.requests += 1;
        self.tokens_in += u64::try_from(tin).unwrap_or(0);
        self.tokens_out += u64::try_from(tout).unwrap_or(0);
        self.micros += micros.unwrap_or(0);
        self.dollars = format!("{:.2}", self.micros as f64 / 1_000_000.0);
    }

    /// Tokens in and out.
    pub fn tokens(&self) -> u64 {
        self.tokens_in + self.tokens_out
    }
}

/// A usage report.
#[derive(Debug, Clone, Default, Serialize)]
pub struct Report {
    /// Days covered.
    pub days: u32,
    /// Every day of the period, oldest first (empty days included).
    pub per_day: Vec<Totals>,
    /// Per user (email), most tokens first.
    pub per_user: Vec<Totals>,
    /// Per `provider/model`, most tokens first.
    pub per_model: Vec<Totals>,
    /// Per group, most tokens first: someone in several groups counts in each, someone in
    /// none under "no group".
    pub per_group: Vec<Totals>,
    /// The whole period.
    pub total: Totals,
}

/// One CSV row's grouping: day, user, model.
type CsvKey = (String, String, String);

async fn emails(db: &Db) -> DomainResult<HashMap<Uuid, String>> {
    Ok(crate::storage::repos::users::emails(db).await?)
}

/// Most memberships read for a report.
const MEMBERSHIPS_READ: u64 = 1_000_000;

/// Each person's groups, by name.
async fn groups_of_people(db: &Db) -> DomainResult<HashMap<Uuid, Vec<String>>> {
    let mut out: HashMap<Uuid, Vec<String>> = HashMap::new();
    for (user, name) in crate::storage::repos::groups::all_memberships(db, MEMBERSHIPS_READ).await? {
        out.entry(user).or_default().push(name);
    }
    for names in out.values_mut() {
        names.sort();
    }
    Ok(out)
}

const NO_GROUP: &str = "no group";

fn user_label(emails: &HashMap<Uuid, String>, id: Option<Uuid>) -> String {
    match id {
        Some(id) => emails.get(&id).cloned().unwrap_or_else(|| format!("deleted user {id}")),
        None => "deleted user".to_string(),
    }
}

fn sorted(map: HashMap<String, Totals>) -> Vec<Totals> {
    let mut v: Vec<Totals> = map.into_values().collect();
    v.sort_by(|a, b| b.tokens().cmp(&a.tokens()).then(a.key.cmp(&b.key)));
    v
}

fn period(days: u32) -> DomainResult<(chrono::DateTime<Utc>, chrono::DateTime<Utc>)> {
    if !(1..=MAX_DAYS).contains(&days) {
        return Err(DomainError::Invalid(format!("Pick a period of 1 to {MAX_DAYS} days.")));
    }
    let (today, _) = crate::domain::admin::quotas::period_starts(Utc::now());
    Ok((today - Duration::days(i64::from(days) - 1), today + Duration::days(1)))
}

/// What a report and the CSV are made of: the period's rows and who the people in them are.
struct Period {
    since: chrono::DateTime<Utc>,
    rows: Vec<crate::model::records::UsageRecord>,
    emails: HashMap<Uuid, String>,
    memberships: HashMap<Uuid, Vec<String>>,
}

impl super::AdminConsole {
    /// The usage rows of the last `days` days (today included), with people's emails and groups.
    async fn period(&self, admin: &Admin, days: u32) -> DomainResult<Period> {
        let _actor = admin.actor();
        let (since, until) = period(days)?;
        let rows = repo::rows_between(&self.db, since, until, None).await?;
        let emails = emails(&self.db).await?;
        let memberships = groups_of_people(&self.db).await?;
        Ok(Period { since, rows, emails, memberships })
    }

    /// The report over the last `days` days (today included); admins only.
    pub async fn usage_report(&self, admin: &Admin, days: u32) -> DomainResult<Report> {
        let Period { since, rows, emails, memberships } = self.period(admin, days).await?;
        let mut per_group: HashMap<String, Totals> = HashMap::new();
        let mut per_day: BTreeMap<String, Totals> = (0..days)
            .map(|i| {
                let key = (since + Duration::days(i64::from(i))).format("%Y-%m-%d").to_string();
                (key.clone(), Totals { key, ..Totals::default() })
            })
            .collect();
        let (mut per_user, mut per_model) = (HashMap::new(), HashMap::new());
        let mut total = Totals { key: "total".into(), ..Totals::default() };
        for r in rows {
            let day = r.created_at.format("%Y-%m-%d").to_string();
            per_day.entry(day.clone()).or_insert_with(|| Totals { key: day, ..Totals::default() }).add(
                r.tokens_in,
                r.tokens_out,
                r.cost_micros,
            );
            let who = user_label(&emails, r.user_id);
            per_user.entry(who.clone()).or_insert_with(|| Totals { key: who, ..Totals::default() }).add(
                r.tokens_in,
                r.tokens_out,
                r.cost_micros,
            );
            let model = format!("{}/{}", r.provider, r.model);
            per_model.entry(model.clone()).or_insert_with(|| Totals { key: model, ..Totals::default() }).add(
                r.tokens_in,
                r.tokens_out,
                r.cost_micros,
            );
            let no_group = vec![NO_GROUP.to_string()];
            for g in r.user_id.and_then(|u| memberships.get(&u)).unwrap_or(&no_group) {
                per_group
                    .entry(g.clone())
                    .or_insert_with(|| Totals { key: g.clone(), ..Totals::default() })
                    .add(r.tokens_in, r.tokens_out, r.cost_micros);
            }
            total.add(r.tokens_in, r.tokens_out, r.cost_micros);
        }
        Ok(Report {
            days,
            per_day: per_day.into_values().collect(),
            per_user: sorted(per_user),
            per_model: sorted(per_model),
            per_group: sorted(per_group),
            total,
        })
    }
}

/// One CSV field: quoted, and a leading `= + - @` neutralised so a spreadsheet never runs it.
fn csv_field(value: &str) -> String {
    let guarded = if value.starts_with(['=', '+', '-', '@', '\t', '\r']) {
        format!("'{value}")
    } else {
        value.to_string()
    };
    format!("\"{}\"", guarded.replace('"', "\"\""))
}

impl super::AdminConsole {
    /// The period's usage as CSV: one line per day, user, model and source; admins only.
    pub async fn usage_csv(&self, admin: &Admin, days: u32) -> DomainResult<String> {
        let Period { rows, emails, memberships, .. } = self.period(admin, days).await?;
        let mut of_user: HashMap<String, String> = HashMap::new();
        let mut groups: BTreeMap<(CsvKey, String), Totals> = BTreeMap::new();
        for r in rows {
            let user = user_label(&emails, r.user_id);
            let member_of =
                r.user_id.and_then(|u| memberships.get(&u)).map(|g| g.join("; ")).unwrap_or_default();
            of_user.insert(user.clone(), member_of);
            let key = (
                (r.created_at.format("%Y-%m-%d").to_string(), user, format!("{}/{}", r.provider, r.model)),
                r.via.clone(),
            );
            groups.entry(key).or_default().add(r.tokens_in, r.tokens_out, r.cost_micros);
        }
        let mut out = String::from("day,user,groups,model,via,requests,tokens_in,tokens_out,cost_usd\r\n");
        for (((day, user, model), via), t) in groups {
            out.push_str(&format!(
                "{},{},{},{},{},{},{},{},{:.6}\r\n",
                csv_field(&day),
                csv_field(&user),
                csv_field(of_user.get(&user).map_or("", String::as_str)),
                csv_field(&model),
                csv_field(&via),
                t.requests,
                t.tokens_in,
                t.tokens_out,
                t.micros as f64 / 1_000_000.0
            ));
        }
        Ok(out)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn csv_fields_are_quoted_and_formulas_neutralised() {
        assert_eq!(csv_field("a\"b"), "\"a\"\"b\"");
        assert_eq!(csv_field("=HYPERLINK(\"x\")"), "\"'=HYPERLINK(\"\"x\"\")\"");
        assert_eq!(csv_field("@sum"), "\"'@sum\"");
        assert_eq!(csv_field("openai/gpt-4.1"), "\"openai/gpt-4.1\"");
    }

    #[test]
    fn periods_are_bounded() {
        assert!(period(0).is_err());
        assert!(period(MAX_DAYS + 1).is_err());
        let (since, until) = period(7).expect("a week");
        assert_eq!((until - since).num_days(), 7);
    }
}
