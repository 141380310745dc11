//! A session's activity log: read from the rows that keep each event (messages, runs, tool calls
//! and their decisions) and from `session_events` (settings changes, branch switches).

use chrono::Utc;
use sea_orm::{ActiveModelTrait, ColumnTrait, EntityTrait, QueryFilter, QueryOrder, QuerySelect, Set};
use serde_json::json;
use uuid::Uuid;

use crate::model::sessions::ActivityEvent;
use crate::storage::entities::{message, run, session_event, tool_call};
use crate::storage::{Db, StorageResult};

/// Records a settings change or a branch switch.
pub async fn record(
    db: &Db,
    session_id: Uuid,
    actor_id: Option<Uuid>,
    kind: &str,
    details: serde_json::Value,
) -> StorageResult<()> {
    session_event::ActiveModel {
        id: Set(Uuid::now_v7()),
        session_id: Set(session_id),
        actor_id: Set(actor_id),
        kind: Set(kind.to_string()),
        details: Set(details),
        at: Set(Utc::now()),
    }
    .insert(db)
    .await?;
    Ok(())
}

fn event(
    at: chrono::DateTime<Utc>,
    kind: &str,
    actor_id: Option<Uuid>,
    details: serde_json::Value,
) -> ActivityEvent {
    ActivityEvent { at, kind: kind.to_string(), actor_id, details }
}

/// What the log reads of a message: id, role, kind, author, written, status, model.
type MessageFacts = (Uuid, String, String, Option<Uuid>, chrono::DateTime<Utc>, String, Option<String>);

/// The session's last `limit` events, oldest first (each source read newest first, at most
/// `limit` rows, so a long session costs no more than its tail).
pub async fn session_activity(db: &Db, session_id: Uuid, limit: u64) -> StorageResult<Vec<ActivityEvent>> {
    let mut out = Vec::new();
    let messages: Vec<MessageFacts> = message::Entity::find()
        .select_only()
        .columns([
            message::Column::Id,
            message::Column::Role,
            message::Column::Kind,
            message::Column::AuthorId,
            message::Column::CreatedAt,
            message::Column::Status,
            message::Column::Model,
        ])
        .filter(message::Column::SessionId.eq(session_id))
        .order_by_desc(message::Column::CreatedAt)
        .limit(limit)
        .into_tuple()
        .all(db)
        .await?;
    for (id, role, kind, author, at, status, model) in messages {
        let (name, details) = match (role.as_str(), kind.as_str()) {
            (_, "summary") => ("compression", json!({ "message_id": id })),
            (_, "clear" | "clear_files" | "task_start" | "task_end") => {
                (kind.as_str(), json!({ "message_id": id }))
            }
            ("user", _) => ("message", json!({ "message_id": id })),
            ("tool", _) => ("tool_result", json!({ "message_id": id, "status": status })),
            _ => ("answer", json!({ "message_id": id, "model": model, "status": status })),
        };
        out.push(event(at, name, author, details));
    }
    for r in run::Entity::find()
        .filter(run::Column::SessionId.eq(session_id))
        .order_by_desc(run::Column::CreatedAt)
        .limit(limit)
        .all(db)
        .await?
    {
        out.push(event(r.created_at, "run_started", Some(r.owner_id), json!({ "run_id": r.id })));
        if let Some(at) = r.finished_at {
            let details = json!({ "run_id": r.id, "status": r.status, "error": r.error });
            out.push(event(at, "run_ended", Some(r.owner_id), details));
        }
    }
    for c in tool_call::Entity::find()
        .filter(tool_call::Column::SessionId.eq(session_id))
        .order_by_desc(tool_call::Column::CreatedAt)
        .limit(limit)
        .all(db)
        .await?
    {
        let details = json!({ "call_id": c.id, "tool": c.tool_name, "risk": c.risk, "status": c.status });
        out.push(event(c.created_at, "tool_call", Some(c.owner_id), details));
        if let (Some(at), Some(decision)) = (c.decided_at, &c.decision) {
            let details = json!({ "call_id": c.id, "tool": c.tool_name, "decision": decision });
            out.push(event(at, "decision", c.decided_by, details));
        }
    }
    for e in session_event::Entity::find()
        .filter(session_event::Column::SessionId.eq(session_id))
        .order_by_desc(session_event::Column::At)
        .limit(limit)
        .all(db)
        .await?
    {
        out.push(event(e.at, &e.kind, e.actor_id, e.details));
    }
    out.sort_by_key(|e| e.at);
    let keep = usize::try_from(limit).unwrap_or(usize::MAX);
    if out.len() > keep {
        out.drain(..out.len() - keep);
    }
    Ok(out)
}
