//! A session's activity log: messages, runs started and ended, tool calls and the decisions on
//! them (who and when), settings changes, branch switches and compressions, oldest first; read in
//! the session ("Activity") and downloaded as JSON Lines in the browser and through the API.

use super::Sessions;
use serde::Serialize;
use uuid::Uuid;

use crate::domain::DomainResult;
use crate::domain::accounts::Actor;
use crate::storage::Db;
use crate::storage::repos::activity as repo;

/// Events the session's page shows (the newest).
pub const ACTIVITY_SHOWN: u64 = 200;
/// Events one download holds at most (the newest).
pub const ACTIVITY_EXPORTED: u64 = 100_000;

/// One event as the log shows it.
#[derive(Debug, Clone, Serialize)]
pub struct ActivityEntry {
    /// When: RFC 3339 in UTC at a fixed six fractional digits, so that ordering the lines as
    /// text orders them in time (chrono's default drops trailing zeros: `.396Z` would sort after
    /// `.396001Z`).
    pub at: String,
    /// The same, as the page shows it (UTC, to the second).
    pub when: String,
    /// What kind of event (see `model::sessions::ActivityEvent`).
    pub kind: String,
    /// Who, by id.
    pub actor_id: Option<Uuid>,
    /// Who, by name, when they are still a member.
    pub actor: Option<String>,
    /// The rest.
    pub details: serde_json::Value,
}

/// An event's time as the log gives it: fixed width, so text order is time order.
fn log_time(at: chrono::DateTime<chrono::Utc>) -> String {
    at.to_rfc3339_opts(chrono::SecondsFormat::Micros, true)
}

/// The log as JSON Lines: one event per line.
pub fn json_lines(entries: &[ActivityEntry]) -> String {
    let mut out = String::new();
    for e in entries {
        let line = serde_json::json!({
            "at": e.at, "kind": e.kind, "actor_id": e.actor_id, "actor": e.actor, "details": e.details,
        });
        out.push_str(&line.to_string());
        out.push('\n');
    }
    out
}

/// Records an event no other row keeps (a settings change, a branch switch). The log is an
/// account of what happened, never a reason for the change itself to fail: a failure is logged.
pub(super) async fn record(db: &Db, session_id: Uuid, actor: &Actor, kind: &str, details: serde_json::Value) {
    if let Err(e) = repo::record(db, session_id, Some(actor.user_id()), kind, details).await {
        tracing::warn!(session = %session_id, error = %e, "a session event could not be recorded");
    }
}

impl Sessions {
    /// The session's last `limit` events, for someone who may read it.
    pub async fn activity(
        &self,
        actor: &Actor,
        session_id: Uuid,
        limit: u64,
    ) -> DomainResult<Vec<ActivityEntry>> {
        let db = &self.db;
        let (session, _) = self.view_session(actor, session_id).await?;
        let events = repo::session_activity(db, session.id, limit).await?;
        let mut ids: Vec<Uuid> = events.iter().filter_map(|e| e.actor_id).collect();
        ids.sort();
        ids.dedup();
        let names = crate::domain::accounts::names(db, &ids).await?;
        Ok(events
            .into_iter()
            .map(|e| ActivityEntry {
                actor: e.actor_id.and_then(|id| names.get(&id).cloned()),
                when: e.at.format("%Y-%m-%d %H:%M:%S").to_string(),
                at: log_time(e.at),
                kind: e.kind,
                actor_id: e.actor_id,
                details: e.details,
            })
            .collect())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn times_in_the_log_sort_as_text_in_the_order_they_happened() {
        let entry = |at: &str| {
            let at: chrono::DateTime<chrono::Utc> = at.parse().unwrap();
            ActivityEntry {
                at: log_time(at),
                when: String::new(),
                kind: "message".into(),
                actor_id: None,
                actor: None,
                details: serde_json::Value::Null,
            }
        };
        let lines = json_lines(&[entry("2026-11-29T08:08:11.396Z"), entry("2026-11-29T08:08:11.396001Z")]);
        let times: Vec<String> = lines
            .lines()
            .map(|l| serde_json::from_str::<serde_json::Value>(l).unwrap()["at"].as_str().unwrap().to_owned())
            .collect();
        assert_eq!(times, ["2026-11-29T08:08:11.396000Z", "2026-11-29T08:08:11.396001Z"]);
        let mut sorted = times.clone();
        sorted.sort();
        assert_eq!(times, sorted);
    }
}
