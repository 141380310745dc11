//! Quotas: tokens and dollars per day and per month (UTC), per user with an instance default.
//! Checked before a reply starts, so a user over quota gets a clear message and nothing is
//! written or sent.

use chrono::{DateTime, Datelike, TimeZone, Utc};
use serde::Serialize;
use uuid::Uuid;

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

/// The quota that applies to a user: their own, else the instance default.
pub async fn effective(db: &Db, user: Uuid) -> DomainResult<Quota> {
    // One query for both rows: this runs before every reply and every API call.
    let user_scope = user.to_string();
    let rows = repo::of_scopes(db, &[&user_scope, DEFAULT_SCOPE]).await?;
    let own = rows.iter().find(|(s, _)| *s == user_scope);
    let default = rows.iter().find(|(s, _)| s == DEFAULT_SCOPE);
    Ok(own.or(default).map(|(_, l)| from_limits(l)).unwrap_or_default())
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

/// Refuses when the user has reached a limit, saying which and until when.
pub async fn check(db: &Db, user: Uuid) -> DomainResult<()> {
    let quota = effective(db, user).await?;
    if quota.is_unlimited() {
        return Ok(());
    }
    let s = spent(db, user).await?;
    let now = Utc::now();
    let (day, month) = period_starts(now);
    let tomorrow = day + chrono::Duration::days(1);
    let next_month = month.checked_add_months(chrono::Months::new(1)).unwrap_or(tomorrow);
    let over = |limit: Option<i64>, used: i64| limit.is_some_and(|l| used >= l);
    let refuse = |what: String, until: DateTime<Utc>| {
        Err(DomainError::Limited(
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
    Ok(())
}

/// The instance default and every per-user quota (admins only).
pub async fn list(db: &Db, admin: &Admin) -> DomainResult<(Quota, Vec<(Uuid, Quota)>)> {
    let _actor = admin.actor();
    let mut default = Quota::default();
    let mut users = Vec::new();
    for (scope, limits) in repo::all(db).await? {
        if scope == DEFAULT_SCOPE {
            default = from_limits(&limits);
        } else if let Ok(id) = scope.parse::<Uuid>() {
            users.push((id, from_limits(&limits)));
        }
    }
    Ok((default, users))
}

/// Sets a quota (admins only): `user` `None` is the instance default; for a user, an
/// unlimited quota with `inherit` removes their own so the default applies again.
pub async fn set(
    db: &Db,
    admin: &Admin,
    origin: &Origin,
    user: Option<Uuid>,
    quota: Quota,
    inherit: bool,
) -> DomainResult<()> {
    let _actor = admin.actor();
    for v in
        [quota.tokens_day, quota.tokens_month, quota.micros_day, quota.micros_month].into_iter().flatten()
    {
        if v < 0 {
            return Err(DomainError::Invalid("A limit cannot be negative.".into()));
        }
    }
    let scope = match user {
        Some(id) => {
            crate::storage::repos::users::find(db, id).await?.ok_or(DomainError::NotFound)?;
            id.to_string()
        }
        None => DEFAULT_SCOPE.to_string(),
    };
    if inherit && user.is_some() {
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

#[cfg(test)]
mod tests {
    use super::*;

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
