//! Quotas: tokens and dollars per day and per month (UTC), per user with an instance default.
//! Checked before a reply starts, so a user over quota gets a clear message and nothing is
//! written or sent.

use chrono::{DateTime, Datelike, TimeZone, Utc};
use serde::Serialize;
use uuid::Uuid;

use crate::domain::admin::quota_holds::{Estimate, QuotaHold, QuotaHolds};
use crate::domain::audit::{self, Origin};
use crate::domain::authz::Admin;
use crate::domain::{DomainError, DomainResult};
use crate::storage::Db;
use crate::storage::repos::quotas::{self as repo, Limits};
use crate::storage::repos::usage as usage_repo;

/// The scope of the instance default.
pub const DEFAULT_SCOPE: &str = "default";

/// Limits; `None` means unlimited.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize)]
pub struct Quota {
    /// Tokens (in + out) per UTC day.
    pub tokens_day: Option<i64>,
    /// Tokens per calendar month.
    pub tokens_month: Option<i64>,
    /// Micro-dollars per UTC day.
    pub micros_day: Option<i64>,
    /// Micro-dollars per calendar month.
    pub micros_month: Option<i64>,
}

impl Quota {
    /// Whether no limit is set.
    pub fn is_unlimited(&self) -> bool {
        *self == Quota::default()
    }
}

fn from_limits(l: &Limits) -> Quota {
    Quota {
        tokens_day: l.tokens_day,
        tokens_month: l.tokens_month,
        micros_day: l.micros_day,
        micros_month: l.micros_month,
    }
}

/// What a user spent today and this month.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize)]
pub struct Spent {
    /// Tokens today.
    pub tokens_day: i64,
    /// Tokens this month.
    pub tokens_month: i64,
    /// Micro-dollars today.
    pub micros_day: i64,
    /// Micro-dollars this month.
    pub micros_month: i64,
}

/// Midnight UTC today and the first of this month.
pub fn period_starts(now: DateTime<Utc>) -> (DateTime<Utc>, DateTime<Utc>) {
    let day = Utc.with_ymd_and_hms(now.year(), now.month(), now.day(), 0, 0, 0).single().unwrap_or(now);
    let month = Utc.with_ymd_and_hms(now.year(), now.month(), 1, 0, 0, 0).single().unwrap_or(now);
    (day, month)
}

/// Seconds until the given period ends (for `Retry-After`).
fn seconds_until(end: DateTime<Utc>, now: DateTime<Utc>) -> u64 {
    u64::try_from((end - now).num_seconds()).unwrap_or(0).max(1)
}

/// The quota scope of a group (`g:` and its id: the column holds 40 characters).
pub fn group_scope(group: Uuid) -> String {
    format!("{GROUP_PREFIX}{group}")
}

const GROUP_PREFIX: &str = "g:";

/// The most generous of several quotas, limit by limit: unlimited beats any number, else the
/// larger number.
fn most_generous(quotas: &[Quota]) -> Option<Quota> {
    let pick = |get: fn(&Quota) -> Option<i64>| -> Option<i64> {
        if quotas.iter().any(|q| get(q).is_none()) { None } else { quotas.iter().filter_map(get).max() }
    };
    (!quotas.is_empty()).then(|| Quota {
        tokens_day: pick(|q| q.tokens_day),
        tokens_month: pick(|q| q.tokens_month),
        micros_day: pick(|q| q.micros_day),
        micros_month: pick(|q| q.micros_month),
    })
}

/// The gate every model call of a member passes: their quota (the most specific that applies,
/// read from the table the holds keep in memory) against what they spent and what their running
/// calls hold. Built once over the database and the holds; the run engine and the gateway
/// share it.
#[derive(Clone)]
pub struct QuotaGate {
    db: Db,
    holds: QuotaHolds,
}

impl QuotaGate {
    /// The gate over this database, with these holds (shared with the other instances through
    /// Redis when there are several).
    pub fn new(db: Db, holds: QuotaHolds) -> QuotaGate {
        QuotaGate { db, holds }
    }

    /// The quota that applies to a user: the most specific one. Their own; else their groups'
    /// (the most generous of them, when they are in several groups with quotas); else the
    /// instance default. Read from the table as `holds` keep it in memory: no query at all when
    /// no quota is set, the user's groups only when some group has a quota.
    pub async fn effective(&self, user: Uuid) -> DomainResult<Quota> {
        let (db, holds) = (&self.db, &self.holds);
        let rows = holds.table(db).await?;
        if rows.is_empty() {
            return Ok(Quota::default());
        }
        let user_scope = user.to_string();
        if let Some((_, own)) = rows.iter().find(|(s, _)| *s == user_scope) {
            return Ok(from_limits(own));
        }
        if rows.iter().any(|(s, _)| s.starts_with(GROUP_PREFIX)) {
            let groups: Vec<String> = crate::storage::repos::groups::group_ids_of(db, user)
                .await?
                .into_iter()
                .map(group_scope)
                .collect();
            let of_groups: Vec<Quota> =
                rows.iter().filter(|(s, _)| groups.contains(s)).map(|(_, l)| from_limits(l)).collect();
            if let Some(q) = most_generous(&of_groups) {
                return Ok(q);
            }
        }
        Ok(rows.iter().find(|(s, _)| s == DEFAULT_SCOPE).map(|(_, l)| from_limits(l)).unwrap_or_default())
    }

    /// Refuses when the user has reached a limit, counting what their calls still running hold,
    /// saying which and until when.
    pub async fn check(&self, user: Uuid) -> DomainResult<()> {
        self.admit(user, Estimate::default).await.map(drop)
    }

    /// Admits one call of the user's: refused when spent plus what their other running calls hold
    /// reaches a limit; else the call holds `estimate` (computed only for a user with limits)
    /// until the returned hold is dropped, after its usage row is stored.
    pub async fn admit(&self, user: Uuid, estimate: impl FnOnce() -> Estimate) -> DomainResult<QuotaHold> {
        let (db, holds) = (&self.db, &self.holds);
        let quota = self.effective(user).await?;
        if quota.is_unlimited() {
            return Ok(QuotaHold::none());
        }
        holds
            .hold(user, estimate(), async |held: Estimate| {
                let s = spent(db, user).await?;
                let grow = |n: i64, by: u64| n.saturating_add(i64::try_from(by).unwrap_or(i64::MAX));
                let counted = Spent {
                    tokens_day: grow(s.tokens_day, held.tokens),
                    tokens_month: grow(s.tokens_month, held.tokens),
                    micros_day: grow(s.micros_day, held.micros),
                    micros_month: grow(s.micros_month, held.micros),
                };
                refusal(&quota, &counted).map_or(Ok(()), Err)
            })
            .await
    }
}

/// What the user spent today and this month.
pub async fn spent(db: &Db, user: Uuid) -> DomainResult<Spent> {
    let (day, month) = period_starts(Utc::now());
    let (tokens_month, micros_month) = usage_repo::spent_since(db, user, month).await?;
    let (tokens_day, micros_day) = usage_repo::spent_since(db, user, day).await?;
    Ok(Spent { tokens_day, tokens_month, micros_day, micros_month })
}

fn dollars(micros: i64) -> String {
    format!("${:.2}", micros as f64 / 1_000_000.0)
}

/// The refusal of a user with `quota` who spent (or holds) `s`, if a limit is reached.
fn refusal(quota: &Quota, s: &Spent) -> Option<DomainError> {
    let now = Utc::now();
    let (day, month) = period_starts(now);
    let tomorrow = day + chrono::Duration::days(1);
    let next_month = month.checked_add_months(chrono::Months::new(1)).unwrap_or(tomorrow);
    let over = |limit: Option<i64>, used: i64| limit.is_some_and(|l| used >= l);
    let refuse = |what: String, until: DateTime<Utc>| {
        Some(DomainError::Limited(
            format!(
                "You have used your {what}. It renews at {} UTC; ask an admin if you need more.",
                until.format("%Y-%m-%d %H:%M")
            ),
            seconds_until(until, now),
        ))
    };
    if over(quota.tokens_day, s.tokens_day) {
        return refuse(format!("daily allowance of {} tokens", quota.tokens_day.unwrap_or(0)), tomorrow);
    }
    if over(quota.micros_day, s.micros_day) {
        return refuse(format!("daily budget of {}", dollars(quota.micros_day.unwrap_or(0))), tomorrow);
    }
    if over(quota.tokens_month, s.tokens_month) {
        return refuse(
            format!("monthly allowance of {} tokens", quota.tokens_month.unwrap_or(0)),
            next_month,
        );
    }
    if over(quota.micros_month, s.micros_month) {
        return refuse(format!("monthly budget of {}", dollars(quota.micros_month.unwrap_or(0))), next_month);
    }
    None
}

/// Every quota an admin set: the instance default, per person and per group.
#[derive(Debug, Clone, Default)]
pub struct Quotas {
    /// The instance default.
    pub default: Quota,
    /// People with their own.
    pub people: Vec<(Uuid, Quota)>,
    /// Groups with their own.
    pub groups: Vec<(Uuid, Quota)>,
}

impl super::AdminConsole {
    /// The instance default and every per-person and per-group quota (admins only).
    pub async fn quotas(&self, admin: &Admin) -> DomainResult<Quotas> {
        let db = &self.db;
        let _actor = admin.actor();
        let mut out = Quotas::default();
        for (scope, limits) in repo::all(db).await? {
            if scope == DEFAULT_SCOPE {
                out.default = from_limits(&limits);
            } else if let Some(id) = scope.strip_prefix(GROUP_PREFIX).and_then(|g| g.parse::<Uuid>().ok()) {
                out.groups.push((id, from_limits(&limits)));
            } else if let Ok(id) = scope.parse::<Uuid>() {
                out.people.push((id, from_limits(&limits)));
            }
        }
        Ok(out)
    }
}

/// Whose quota a change is about.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Subject {
    /// The instance default.
    Default,
    /// One person.
    Person(Uuid),
    /// Everyone in a group (the most generous group quota applies to someone in several).
    Group(Uuid),
}

impl super::AdminConsole {
    /// Sets a quota (admins only); for a person or a group, `inherit` removes their own so the
    /// next one (their groups', the default) applies again.
    pub async fn set_quota(
        &self,
        admin: &Admin,
        origin: &Origin,
        subject: Subject,
        quota: Quota,
        inherit: bool,
    ) -> DomainResult<()> {
        let db = &self.db;
        let _actor = admin.actor();
        for v in
            [quota.tokens_day, quota.tokens_month, quota.micros_day, quota.micros_month].into_iter().flatten()
        {
            if v < 0 {
                return Err(DomainError::Invalid("A limit cannot be negative.".into()));
            }
        }
        let scope = match subject {
            Subject::Person(id) => {
                crate::storage::repos::users::find(db, id).await?.ok_or(DomainError::NotFound)?;
                id.to_string()
            }
            Subject::Group(id) => {
                crate::storage::repos::groups::find(db, id).await?.ok_or(DomainError::NotFound)?;
                group_scope(id)
            }
            Subject::Default => DEFAULT_SCOPE.to_string(),
        };
        if inherit && subject != Subject::Default {
            repo::remove(db, &scope).await?;
        } else {
            let limits = Limits {
                tokens_day: quota.tokens_day,
                tokens_month: quota.tokens_month,
                micros_day: quota.micros_day,
                micros_month: quota.micros_month,
            };
            repo::put(db, &scope, limits).await?;
        }
        audit::record(
            db,
            origin,
            "quota.set",
            &format!("quota:{scope}"),
            serde_json::json!({ "quota": quota, "inherit": inherit }),
        )
        .await
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_most_generous_group_quota_wins_limit_by_limit() {
        let a =
            Quota { tokens_day: Some(100), tokens_month: None, micros_day: Some(5), micros_month: Some(1) };
        let b =
            Quota { tokens_day: Some(300), tokens_month: Some(10), micros_day: None, micros_month: Some(2) };
        let m = most_generous(&[a, b]).unwrap();
        assert_eq!(
            m,
            Quota { tokens_day: Some(300), tokens_month: None, micros_day: None, micros_month: Some(2) }
        );
        assert_eq!(most_generous(&[]), None);
    }

    #[test]
    fn periods_start_at_midnight_and_the_first() {
        let now = Utc.with_ymd_and_hms(2026, 11, 23, 15, 4, 5).single().expect("valid");
        let (day, month) = period_starts(now);
        assert_eq!(day.to_rfc3339(), "2026-11-23T00:00:00+00:00");
        assert_eq!(month.to_rfc3339(), "2026-11-01T00:00:00+00:00");
        assert_eq!(seconds_until(now, now), 1);
        assert!(Quota::default().is_unlimited());
        assert!(!Quota { tokens_day: Some(1), ..Quota::default() }.is_unlimited());
        assert_eq!(dollars(1_234_567), "$1.23");
    }
}
