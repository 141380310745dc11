//! `GET /v1/sessions/{id}/ws`: the agent server protocol over a WebSocket, mapped onto an Arbor
//! session, so a client written for that server works here with its URL and token changed.
//!
//! The client sends `user_input` (the text of its `input_text` parts becomes a message of the
//! session) and `approval_response` (`review`: YES, NO, NO_CONTINUE, ALWAYS, EXPLAIN). Arbor
//! answers `loading_state`, one `response_item` per finished item (`message`, `reasoning`,
//! `function_call`, `function_call_output`), `approval_request` when a tool call waits,
//! `agent_finished` when the run is over, and `error` (the connection stays open). Connecting
//! to a session resumes it: its history is Arbor's own, and a live run is followed.

use std::collections::HashSet;

use actix_web::{HttpRequest, HttpResponse, web};
use actix_ws::{AggregatedMessage, Session};
use futures_util::StreamExt;
use serde_json::{Value, json};
use uuid::Uuid;

use super::domain_error;
use super::openai_error;
use crate::domain::DomainError;
use crate::domain::accounts::Actor;
use crate::domain::agent::{Decision, RuleScope};
use crate::domain::runs::decisions::PendingCall;
use crate::domain::sessions::{self, tree::Message, tree::Role};
use crate::events::RunEvent;
use crate::gateway::ApiError;
use crate::providers::types::Part;
use crate::state::AppState;
use crate::web::api_caller::ApiCaller;

/// Largest message a client may send (a frame, or a message in continuations).
const MAX_MESSAGE_BYTES: usize = 1024 * 1024;

/// `GET /v1/sessions/{id}/ws`.
pub async fn connect(
    state: web::Data<AppState>,
    req: HttpRequest,
    caller: ApiCaller,
    path: web::Path<String>,
    body: web::Payload,
) -> HttpResponse {
    let actor = caller.0.actor.clone();
    let Ok(session_id) = Uuid::parse_str(&path) else {
        return openai_error(&ApiError::new(404, "not_found", "No such session."));
    };
    if let Err(e) = state.sessions.get_session(&actor, session_id).await {
        return openai_error(&domain_error(e));
    }
    let slot = match super::stream_slot(&state, &actor) {
        Ok(slot) => slot,
        Err(refused) => return openai_error(&refused),
    };
    let (response, session, stream) = match actix_ws::handle(&req, body) {
        Ok(parts) => parts,
        Err(e) => return e.error_response(),
    };
    let stream = stream
        .max_frame_size(MAX_MESSAGE_BYTES)
        .aggregate_continuations()
        .max_continuation_size(MAX_MESSAGE_BYTES);
    let state = state.clone();
    actix_web::rt::spawn(async move {
        let _slot = slot;
        let mut conn = Connection { state, actor, session_id, out: session, sent: HashSet::new() };
        conn.run(stream).await;
    });
    response
}

struct Connection {
    state: web::Data<AppState>,
    actor: Actor,
    session_id: Uuid,
    out: Session,
    /// Messages already sent as items (a message is never sent twice).
    sent: HashSet<Uuid>,
}

/// The connection is gone.
struct Gone;

impl Connection {
    async fn send(&mut self, kind: &str, payload: Value) -> Result<(), Gone> {
        let frame = json!({ "id": Uuid::new_v4().to_string(), "type": kind, "payload": payload });
        self.out.text(frame.to_string()).await.map_err(|_| Gone)
    }

    async fn error(&mut self, message: &str) -> Result<(), Gone> {
        self.send("error", json!({ "message": message })).await
    }

    async fn run(&mut self, mut stream: actix_ws::AggregatedMessageStream) {
        // What the session holds already counts as sent: a resumed session replays nothing.
        // What is awaited here but in one frame (the conversation, following a run, a message's
        // handling) is boxed: the connection's task idles in the size of its largest state
        // for as long as the client stays (12 KB each before; see the test).
        if let Ok(c) = Box::pin(self.state.sessions.conversation(&self.actor, self.session_id)).await {
            // A message still being written is not sent yet: the client gets it when it ends.
            let finished = c.path.iter().filter(|m| m.status != sessions::tree::MessageStatus::Streaming);
            self.sent.extend(finished.map(|m| m.id));
        }
        if self.state.runs.is_active(self.session_id) && Box::pin(self.follow()).await.is_err() {
            return;
        }
        while let Some(frame) = stream.next().await {
            let outcome = match frame {
                Ok(AggregatedMessage::Text(text)) => Box::pin(self.handle(&text)).await,
                Ok(AggregatedMessage::Binary(_)) => self.error("Send JSON text frames.").await,
                Ok(AggregatedMessage::Ping(bytes)) => self.out.pong(&bytes).await.map_err(|_| Gone),
                Ok(AggregatedMessage::Pong(_)) => Ok(()),
                Ok(AggregatedMessage::Close(_)) => break,
                Err(e) => {
                    let _ = self.error(&format!("The frame was refused: {e}.")).await;
                    break;
                }
            };
            if outcome.is_err() {
                return;
            }
        }
        let _ = self.out.clone().close(None).await;
    }

    async fn handle(&mut self, text: &str) -> Result<(), Gone> {
        let Ok(message) = serde_json::from_str::<Value>(text) else {
            return self.error("The message is not valid JSON.").await;
        };
        match message["type"].as_str() {
            Some("user_input") => {
                let Some(input) = input_text(&message["payload"]["input"]) else {
                    return self.error("user_input needs payload.input with input_text content.").await;
                };
                let client_id = message["id"].as_str().map(str::to_string).unwrap_or_default();
                let client_id = if client_id.is_empty() || client_id.len() > 128 {
                    Uuid::new_v4().simple().to_string()
                } else {
                    client_id
                };
                let started =
                    self.state.engine.submit(&self.actor, self.session_id, &input, &client_id, None).await;
                match started {
                    Ok(s) => {
                        self.sent.extend(s.user_message_id);
                        self.follow().await
                    }
                    Err(e) => self.error(&refusal(e)).await,
                }
            }
            Some("approval_response") => {
                let review = message["payload"]["review"].as_str().unwrap_or_default().to_ascii_lowercase();
                let Some(decision) = Decision::parse(&review) else {
                    return self.error("review is one of YES, NO, NO_CONTINUE, ALWAYS, EXPLAIN.").await;
                };
                let pending = self.state.engine.pending_call(&self.actor, self.session_id).await;
                let call = match pending {
                    Ok(Some(call)) => call,
                    Ok(None) => return self.error("No tool call is waiting for a decision.").await,
                    Err(e) => return self.error(&refusal(e)).await,
                };
                let decided = self
                    .state
                    .engine
                    .decide(&self.actor, self.session_id, call.id, decision, RuleScope::Session)
                    .await;
                match decided {
                    Ok(_) => self.follow().await,
                    Err(e) => self.error(&refusal(e)).await,
                }
            }
            Some(other) => self.error(&format!("Unknown message type {other:?}.")).await,
            None => self.error("The message has no type.").await,
        }
    }

    /// Follows the session's run to its end: items as messages finish, then a waiting
    /// decision or `agent_finished`.
    async fn follow(&mut self) -> Result<(), Gone> {
        self.send("loading_state", json!({ "loading": true })).await?;
        if let Some(mut sub) = self.state.runs.subscribe(self.session_id) {
            loop {
                match sub.receiver.recv().await {
                    Ok(env) if env.seq <= sub.snapshot.seq => continue,
                    Ok(env) => match &env.event {
                        RunEvent::Advance { .. } => self.send_new_items().await?,
                        RunEvent::Done { .. } => break,
                        RunEvent::Error(m) => {
                            self.error(m).await?;
                            break;
                        }
                        _ => {}
                    },
                    Err(tokio::sync::broadcast::error::RecvError::Lagged(_)) => continue,
                    Err(tokio::sync::broadcast::error::RecvError::Closed) => break,
                }
            }
        }
        self.send_new_items().await?;
        self.send("loading_state", json!({ "loading": false })).await?;
        match self.state.engine.pending_call(&self.actor, self.session_id).await {
            Ok(Some(call)) => self.send("approval_request", approval_payload(&call)).await,
            _ => {
                let last = self
                    .state
                    .sessions
                    .conversation(&self.actor, self.session_id)
                    .await
                    .ok()
                    .and_then(|c| c.path.last().map(|m| m.id));
                self.send("agent_finished", json!({ "responseId": last })).await
            }
        }
    }

    /// The finished messages of the active path not sent yet, as items, in order.
    async fn send_new_items(&mut self) -> Result<(), Gone> {
        let Ok(c) = self.state.sessions.conversation(&self.actor, self.session_id).await else {
            return Ok(());
        };
        let new: Vec<Message> = c
            .path
            .into_iter()
            .filter(|m| !self.sent.contains(&m.id) && m.status != sessions::tree::MessageStatus::Streaming)
            .collect();
        for m in new {
            self.sent.insert(m.id);
            for item in items(&m) {
                self.send("response_item", item).await?;
            }
        }
        Ok(())
    }
}

/// The text of a `user_input`'s messages: their `input_text` parts (or plain string content).
fn input_text(input: &Value) -> Option<String> {
    let mut text = String::new();
    for item in input.as_array()? {
        match &item["content"] {
            Value::String(s) => text.push_str(s),
            Value::Array(parts) => {
                for p in parts {
                    if matches!(p["type"].as_str(), Some("input_text") | Some("text"))
                        && let Some(t) = p["text"].as_str()
                    {
                        if !text.is_empty() {
                            text.push('\n');
                        }
                        text.push_str(t);
                    }
                }
            }
            _ => {}
        }
    }
    (!text.trim().is_empty()).then_some(text)
}

/// A message as the protocol's response items (the Responses API's item shapes).
fn items(m: &Message) -> Vec<Value> {
    let mut out = Vec::new();
    let mut text = Vec::new();
    for p in &m.parts {
        match p {
            Part::Text { text: t } if m.role == Role::Assistant => {
                text.push(json!({ "type": "output_text", "text": t, "annotations": [] }));
            }
            Part::Thought { text: t, .. } if !t.is_empty() => out.push(json!({
                "type": "reasoning", "id": format!("rs_{}", m.id.simple()),
                "summary": [{ "type": "summary_text", "text": t }],
            })),
            Part::ToolCall { id, name, arguments, .. } => out.push(json!({
                "type": "function_call", "id": format!("fc_{}", m.id.simple()), "call_id": id,
                "name": name, "arguments": arguments.to_string(), "status": "completed",
            })),
            Part::ToolResult { call_id, content, .. } => out.push(json!({
                "type": "function_call_output", "call_id": call_id, "output": content,
            })),
            _ => {}
        }
    }
    if !text.is_empty() {
        out.push(json!({
            "type": "message", "id": m.id.to_string(), "role": "assistant", "status": "completed", "content": text,
        }));
    }
    out
}

/// What the client is asked: the seed's `command` (a shell command as its argv, another tool as
/// its name and arguments), with Arbor's call described beside it.
fn approval_payload(call: &PendingCall) -> Value {
    let arguments: Value = serde_json::from_str(&call.arguments).unwrap_or(Value::Null);
    let command = match arguments["command"].as_str() {
        Some(cmd) if call.tool == "shell" => json!(["sh", "-c", cmd]),
        _ => json!([call.tool, call.arguments]),
    };
    json!({
        "command": command, "call_id": call.id, "tool": call.tool, "risk": call.risk,
        "arguments": arguments, "explanation": call.explanation,
    })
}

fn refusal(e: DomainError) -> String {
    domain_error(e).message
}

#[cfg(test)]
mod tests {
    /// A connection's task idles at the size of its largest state for as long as its client
    /// stays.
    #[test]
    fn an_idle_connections_task_stays_small() {
        let size = crate::future_size::future_size(|(connection, stream): (&mut super::Connection, _)| {
            super::Connection::run(connection, stream)
        });
        assert!(size <= 2048, "a connection's task is {size} bytes");
    }
}
