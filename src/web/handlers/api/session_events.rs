//! `GET /v1/sessions/{id}/events`: a session's run as Server-Sent Events of JSON, for programs.
//!
//! Events: `snapshot` (what the live message holds so far), `delta`, `thought`, `tool_call`,
//! `usage`, `message` and `tool_result` (a message the run finished before going on),
//! `approval_request` (the run waits for a decision), `error`, and `done` last. Every event
//! carries an id naming the run, the message and how much of it the client has; a client that
//! reconnects with `Last-Event-ID` gets exactly what it missed (the rest of the text, the
//! messages finished meanwhile), never a token twice.

use std::time::Duration;

use actix_web::{HttpRequest, HttpResponse, Responder, web};
use actix_web_lab::sse;
use serde_json::{Value, json};
use tokio::sync::broadcast::error::RecvError;
use tokio::sync::mpsc;
use uuid::Uuid;

use super::openai_error;
use super::{domain_error, message_json};
use crate::domain::sessions;
use crate::events::{RunEvent, RunSnapshot};
use crate::gateway::ApiError;
use crate::state::AppState;
use crate::web::api_caller::ApiCaller;

/// Messages between a reconnecting client's and the live one that are sent again, at most.
const MAX_CATCH_UP: usize = 100;

/// Where a client stands: the run and message of its last event, and how much of that message
/// it has (bytes of text and of thoughts, tool calls).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Position {
    run: Uuid,
    message: Uuid,
    seq: u64,
    text: usize,
    thoughts: usize,
    calls: usize,
}

impl Position {
    fn of(s: &RunSnapshot, message: Uuid) -> Position {
        Position {
            run: s.run_id,
            message,
            seq: s.seq,
            text: s.text.len(),
            thoughts: s.thoughts.len(),
            calls: s.tool_calls.len(),
        }
    }

    fn id(&self) -> String {
        format!("{}.{}.{}.{}.{}.{}", self.run, self.message, self.seq, self.text, self.thoughts, self.calls)
    }

    fn parse(raw: &str) -> Option<Position> {
        let mut parts = raw.trim().split('.');
        let p = Position {
            run: Uuid::parse_str(parts.next()?).ok()?,
            message: Uuid::parse_str(parts.next()?).ok()?,
            seq: parts.next()?.parse().ok()?,
            text: parts.next()?.parse().ok()?,
            thoughts: parts.next()?.parse().ok()?,
            calls: parts.next()?.parse().ok()?,
        };
        parts.next().is_none().then_some(p)
    }
}

fn event(name: &'static str, data: Value, id: Option<String>) -> sse::Event {
    let mut data = sse::Data::new(data.to_string()).event(name);
    if let Some(id) = id {
        data = data.id(id);
    }
    data.into()
}

/// What a stream task sends; a send that fails means the client went away.
struct Out(mpsc::Sender<sse::Event>);

impl Out {
    async fn send(&self, name: &'static str, data: Value, id: Option<String>) -> bool {
        self.0.send(event(name, data, id)).await.is_ok()
    }
}

/// `GET /v1/sessions/{id}/events`.
pub async fn events(
    state: web::Data<AppState>,
    req: HttpRequest,
    caller: ApiCaller,
    path: web::Path<String>,
) -> HttpResponse {
    let actor = caller.0.actor.clone();
    let Ok(session_id) = Uuid::parse_str(&path) else { return openai_error(&not_found()) };
    if let Err(e) = state.sessions.view_session(&actor, session_id).await {
        return openai_error(&domain_error(e));
    }
    let slot = match super::stream_slot(&state, &actor) {
        Ok(slot) => slot,
        Err(refused) => return openai_error(&refused),
    };
    let resume = req.headers().get("last-event-id").and_then(|v| v.to_str().ok()).and_then(Position::parse);
    let (tx, mut rx) = mpsc::channel(64);
    let task_state = state.clone();
    tokio::spawn(async move {
        let _slot = slot;
        follow(&task_state, &actor, session_id, resume, Out(tx)).await;
    });
    let stream = futures_util::stream::poll_fn(move |cx| rx.poll_recv(cx));
    sse::Sse::from_infallible_stream(stream)
        .with_keep_alive(Duration::from_secs(state.config.events.keepalive_secs))
        .customize()
        .insert_header(("X-Accel-Buffering", "no"))
        .respond_to(&req)
        .map_into_boxed_body()
}

fn not_found() -> ApiError {
    ApiError::new(404, "not_found", "No such session.")
}

/// Follows the session's run to its end (or the client's going away). Its task waits on the
/// run's events for as long as the run lasts, at the size of its largest state, so the reads
/// it makes only at the start, between messages and at the end are boxed.
async fn follow(
    state: &AppState,
    actor: &crate::domain::accounts::Actor,
    session_id: Uuid,
    resume: Option<Position>,
    out: Out,
) {
    let mut last_message = resume.map(|p| p.message);
    // Whether the run the client was reading ended while it was away.
    let mut ended_meanwhile = false;
    // A run ends once; a decision may start the next, which the client follows by reconnecting
    // after it decides.
    'run: {
        let live = state.runs.subscribe(session_id).and_then(|sub| sub.snapshot.message_id.map(|m| (sub, m)));
        let Some((mut sub, mut message)) = live else {
            ended_meanwhile = resume.is_some();
            break 'run;
        };
        // The start: what the client lacks of the live message, or all of it.
        let position = match resume.filter(|p| p.run == sub.snapshot.run_id) {
            Some(p) if p.message == message => {
                if !catch_up(&out, &sub.snapshot, p).await {
                    return;
                }
                Some(Position::of(&sub.snapshot, message))
            }
            Some(p) => {
                // The run went on past the client's message: what finished meanwhile, then all of
                // the live one.
                if !Box::pin(finished_between(state, actor, session_id, p.message, message, &out)).await {
                    return;
                }
                snapshot(&out, &sub.snapshot, message).await
            }
            None => snapshot(&out, &sub.snapshot, message).await,
        };
        let Some(position) = position else { return };
        let mut at = position;
        loop {
            match sub.receiver.recv().await {
                Ok(env) if env.run_id != sub.snapshot.run_id || env.seq <= at.seq => continue,
                Ok(env) => {
                    at.seq = env.seq;
                    let (name, data) = match &env.event {
                        RunEvent::Delta(t) => {
                            at.text += t.len();
                            ("delta", json!({ "text": t }))
                        }
                        RunEvent::Thought(t) => {
                            at.thoughts += t.len();
                            ("thought", json!({ "text": t }))
                        }
                        RunEvent::ToolCall { name, arguments } => {
                            at.calls += 1;
                            ("tool_call", json!({ "name": name, "arguments": arguments }))
                        }
                        RunEvent::Usage { input, output } => {
                            ("usage", json!({ "input": input, "output": output }))
                        }
                        RunEvent::Advance { message_id } => {
                            if !Box::pin(send_finished(state, actor, session_id, message, &out)).await {
                                return;
                            }
                            message = *message_id;
                            at = Position {
                                run: env.run_id,
                                message,
                                seq: env.seq,
                                text: 0,
                                thoughts: 0,
                                calls: 0,
                            };
                            continue;
                        }
                        RunEvent::Done { message_id, .. } => {
                            last_message = message_id.or(Some(message));
                            break;
                        }
                        RunEvent::Error(m) => {
                            let _ = out.send("error", json!({ "message": m }), Some(at.id())).await;
                            last_message = Some(message);
                            break;
                        }
                    };
                    if !out.send(name, data, Some(at.id())).await {
                        return;
                    }
                }
                Err(RecvError::Lagged(_)) => match state.runs.subscribe(session_id) {
                    // Too slow: start again from a fresh snapshot.
                    Some(fresh) => {
                        sub = fresh;
                        message = sub.snapshot.message_id.unwrap_or(message);
                        match snapshot(&out, &sub.snapshot, message).await {
                            Some(p) => at = p,
                            None => return,
                        }
                    }
                    None => break,
                },
                Err(RecvError::Closed) => {
                    last_message = Some(message);
                    break;
                }
            }
        }
    }
    if ended_meanwhile
        && let Some(from) = last_message
        && !Box::pin(finished_after(state, actor, session_id, from, &out)).await
    {
        return;
    }
    // After a gap, `done` carries the path's last message; otherwise the run's own.
    let done_with = if ended_meanwhile { None } else { last_message };
    Box::pin(end(state, actor, session_id, done_with, &out)).await;
}

/// After a gap in which the run ended: the client's message as it ended, and every message the
/// run finished after it but the last (which `done` carries).
async fn finished_after(
    state: &AppState,
    actor: &crate::domain::accounts::Actor,
    session_id: Uuid,
    from: Uuid,
    out: &Out,
) -> bool {
    let Ok(c) = state.sessions.conversation(actor, session_id).await else { return true };
    let Some(at) = c.path.iter().position(|m| m.id == from) else { return true };
    let end = c.path.len().saturating_sub(1);
    for m in c.path.iter().take(end).skip(at).take(MAX_CATCH_UP) {
        let name = if m.role == sessions::tree::Role::Tool { "tool_result" } else { "message" };
        if !out.send(name, message_json(m), None).await {
            return false;
        }
    }
    true
}

async fn snapshot(out: &Out, s: &RunSnapshot, message: Uuid) -> Option<Position> {
    let calls: Vec<Value> = s.tool_calls.iter().map(|(n, a)| json!({ "name": n, "arguments": a })).collect();
    let p = Position::of(s, message);
    let data = json!({
        "run_id": s.run_id, "message_id": message, "text": s.text, "thoughts": s.thoughts, "tool_calls": calls,
    });
    out.send("snapshot", data, Some(p.id())).await.then_some(p)
}

/// What the client lacks of the message it was reading.
async fn catch_up(out: &Out, s: &RunSnapshot, p: Position) -> bool {
    let mut at = p;
    at.seq = s.seq;
    if let Some(rest) = s.text.get(p.text..).filter(|r| !r.is_empty()) {
        at.text = s.text.len();
        if !out.send("delta", json!({ "text": rest }), Some(at.id())).await {
            return false;
        }
    }
    if let Some(rest) = s.thoughts.get(p.thoughts..).filter(|r| !r.is_empty()) {
        at.thoughts = s.thoughts.len();
        if !out.send("thought", json!({ "text": rest }), Some(at.id())).await {
            return false;
        }
    }
    for (name, arguments) in s.tool_calls.iter().skip(p.calls) {
        at.calls += 1;
        if !out.send("tool_call", json!({ "name": name, "arguments": arguments }), Some(at.id())).await {
            return false;
        }
    }
    true
}

/// The finished message as a `message` or `tool_result` event.
async fn send_finished(
    state: &AppState,
    actor: &crate::domain::accounts::Actor,
    session_id: Uuid,
    message: Uuid,
    out: &Out,
) -> bool {
    match state.sessions.message(actor, session_id, message).await {
        Ok(m) => {
            let name = if m.role == sessions::tree::Role::Tool { "tool_result" } else { "message" };
            out.send(name, message_json(&m), None).await
        }
        Err(_) => true,
    }
}

/// The messages from the client's (finished since) down to the live one, excluded.
async fn finished_between(
    state: &AppState,
    actor: &crate::domain::accounts::Actor,
    session_id: Uuid,
    from: Uuid,
    live: Uuid,
    out: &Out,
) -> bool {
    let mut chain = Vec::new();
    let mut cursor = state.sessions.message(actor, session_id, live).await.ok().and_then(|m| m.parent_id);
    while let Some(id) = cursor {
        chain.push(id);
        if id == from || chain.len() >= MAX_CATCH_UP {
            break;
        }
        cursor = state.sessions.message(actor, session_id, id).await.ok().and_then(|m| m.parent_id);
    }
    if !chain.contains(&from) {
        // Not on this run's way: nothing to send again but the live message.
        return true;
    }
    for id in chain.into_iter().rev() {
        if !send_finished(state, actor, session_id, id, out).await {
            return false;
        }
    }
    true
}

/// The last events: a waiting decision, then `done` with the final message.
async fn end(
    state: &AppState,
    actor: &crate::domain::accounts::Actor,
    session_id: Uuid,
    message: Option<Uuid>,
    out: &Out,
) {
    if let Ok(Some(call)) = state.engine.pending_call(actor, session_id).await
        && !out.send("approval_request", json!({ "call": call }), None).await
    {
        return;
    }
    let message = match message {
        Some(id) => state.sessions.message(actor, session_id, id).await.ok(),
        None => {
            state.sessions.conversation(actor, session_id).await.ok().and_then(|c| c.path.last().cloned())
        }
    };
    let _ = out.send("done", json!({ "message": message.as_ref().map(message_json) }), None).await;
}

#[cfg(test)]
mod tests {
    /// A client following a session's run holds this future in its task for as long as the run
    /// lasts.
    #[test]
    fn a_followed_sessions_task_stays_small() {
        let size = crate::future_size::future_size(|(state, actor, session_id, resume, out)| {
            super::follow(state, actor, session_id, resume, out)
        });
        assert!(size <= 2048, "a follower's task is {size} bytes");
    }
}
