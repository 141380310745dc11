//! Tasks and subtasks: a task is a stretch of the path between a task start (its goal) and a
//! task end (its summary). Inside it, the model sees the parent's context and the task's work;
//! past its end, only the summary (see `context::window`). The agent opens and closes tasks
//! with `start_task` and `finish_task`, reads a finished one with `expand_task`; a person does
//! the same with `/task <goal>` and `/finish [summary]` in the composer. Tasks nest.

use serde_json::{Value, json};
use uuid::Uuid;

use super::compaction::{Boundary, SummaryAsk, slice_for_model};
use super::{Job, RunEngine, Started, context};
use crate::domain::accounts::Actor;
use crate::domain::agent::{OfferedTool, tool_digest};
use crate::domain::sessions::tree::{self, Message, MessageKind, Role};
use crate::domain::{DomainError, DomainResult};
use crate::providers::types::{Part, ToolSpec};
use crate::storage::repos::messages as repo;
use crate::tools::{Risk, ToolOutput};

/// Longest goal a task may have, in characters.
pub const MAX_GOAL_CHARS: usize = 2_000;
/// Longest summary a task may end with, in characters.
pub const MAX_TASK_SUMMARY_CHARS: usize = 64_000;
/// Characters `expand_task` returns at once.
const EXPAND_SLICE_CHARS: usize = 40_000;

/// What the model is asked when a person ends a task with `/finish` and no summary.
const TASK_SUMMARY_INSTRUCTION: &str = "The task above is finished. Write its summary for the \
conversation outside the task, which will see only your summary and not the task's messages: what was \
done, decided and found; files changed and their state; results, names, numbers and errors, exactly; \
anything left open. Answer with the summary alone.";

/// The three task tools, offered to every run that takes tools. They change only the
/// conversation, so they never wait for a person.
pub fn task_tools() -> Vec<OfferedTool> {
    let specs = [
        ToolSpec {
            name: "start_task".into(),
            description: "Start a task: a focused piece of work (tasks nest). Its messages stay in the \
conversation, but once you call finish_task the conversation outside the task sees only your summary. \
Use it for work with many steps whose details will not matter afterwards."
                .into(),
            parameters: json!({
                "type": "object",
                "properties": {"goal": {"type": "string", "description": "What the task is to achieve."}},
                "required": ["goal"],
                "additionalProperties": false
            }).into(),
        },
        ToolSpec {
            name: "finish_task".into(),
            description: "Finish the innermost open task with a summary of what was done, decided and \
found (files changed, results, anything left open): after this, only the summary is in your context."
                .into(),
            parameters: json!({
                "type": "object",
                "properties": {"summary": {"type": "string", "description": "The task's summary."}},
                "required": ["summary"],
                "additionalProperties": false
            }).into(),
        },
        ToolSpec {
            name: "expand_task".into(),
            description: "Read the messages of a finished task of this conversation, by the task id its \
summary shows. Returns up to 40,000 characters from `offset`."
                .into(),
            parameters: json!({
                "type": "object",
                "properties": {
                    "task_id": {"type": "string", "description": "The id of the task."},
                    "offset": {"type": "integer", "minimum": 0, "description": "Characters to skip (default 0)."}
                },
                "required": ["task_id"],
                "additionalProperties": false
            }).into(),
        },
    ];
    specs
        .into_iter()
        .map(|spec| OfferedTool { digest: tool_digest(&spec), spec, risk: Risk::Read, mcp: None })
        .collect()
}

/// Whether `name` is one of the task tools.
pub fn is_task_tool(name: &str) -> bool {
    matches!(name, "start_task" | "finish_task" | "expand_task")
}

/// The text argument `key`, trimmed, checked against `max` characters.
fn text_argument<'a>(arguments: &'a Value, key: &str, max: usize) -> Result<&'a str, String> {
    let text = arguments.get(key).and_then(Value::as_str).map(str::trim).unwrap_or_default();
    if text.is_empty() {
        return Err(format!("\"{key}\" is needed and may not be empty."));
    }
    if text.chars().count() > max {
        return Err(format!("\"{key}\" is longer than {max} characters."));
    }
    Ok(text)
}

/// The task step (`start_task` or `finish_task` that succeeded) among the results on `path`
/// after the latest answer, with its call's arguments.
fn step_taken(path: &[Message]) -> Option<(String, Value)> {
    let answer = path.iter().rposition(|m| m.role == Role::Assistant)?;
    let calls = &path[answer].parts;
    path[answer + 1..].iter().flat_map(|m| &m.parts).find_map(|p| match p {
        Part::ToolResult { call_id, name, is_error: false, .. }
            if name == "start_task" || name == "finish_task" =>
        {
            let arguments = calls.iter().find_map(|c| match c {
                Part::ToolCall { id, arguments, .. } if id == call_id => Some(arguments.clone()),
                _ => None,
            })?;
            Some((name.clone(), arguments))
        }
        _ => None,
    })
}

/// A finished task's messages as plain text, for `expand_task`.
fn transcript(messages: &[Message]) -> String {
    let mut out = String::new();
    for m in messages {
        let who = match (m.role, m.kind) {
            (_, MessageKind::TaskStart) => "task started",
            (_, MessageKind::TaskEnd) => "task finished",
            (_, MessageKind::Summary) => "summary",
            (_, MessageKind::Clear | MessageKind::ClearFiles) => continue,
            (Role::User, _) => "user",
            (Role::Assistant, _) => "assistant",
            (Role::Tool, _) => "tool",
            (Role::System, _) => "note",
        };
        for p in &m.parts {
            let line = match p {
                Part::Text { text } if !text.trim().is_empty() => format!("[{who}] {text}"),
                Part::ToolCall { name, arguments, .. } => format!("[{who} calls {name}] {arguments}"),
                Part::ToolResult { name, content, is_error, .. } => {
                    let failed = if *is_error { ", failed" } else { "" };
                    format!("[result of {name}{failed}] {content}")
                }
                _ => continue,
            };
            out.push_str(&line);
            out.push_str("\n\n");
        }
    }
    out
}

impl RunEngine {
    /// Runs `start_task`, `finish_task` or `expand_task` for the call whose result is
    /// `job.message_id`. Starting and finishing only check here: the task's start or end is
    /// written once every call of the answer has its result ([`Self::take_task_step`]).
    pub(super) async fn task_tool(&self, job: &Job, name: &str, arguments: &Value) -> ToolOutput {
        let all = match repo::session_messages(&self.db, job.session_id).await {
            Ok(all) => all,
            Err(e) => return ToolOutput::error(format!("The conversation could not be read: {e}")),
        };
        let path = tree::path_to(&all, job.message_id);
        let one_step = "Only one start_task or finish_task per answer: call it again in your next answer.";
        match name {
            "start_task" => match text_argument(arguments, "goal", MAX_GOAL_CHARS) {
                Err(e) => ToolOutput::error(e),
                Ok(_) if step_taken(&path).is_some() => ToolOutput::error(one_step),
                Ok(_) => {
                    ToolOutput::ok("The task starts now. Work on it, then call finish_task with its summary.")
                }
            },
            "finish_task" => match text_argument(arguments, "summary", MAX_TASK_SUMMARY_CHARS) {
                Err(e) => ToolOutput::error(e),
                Ok(_) if context::open_tasks(&path).is_empty() => ToolOutput::error(
                    "No task is open: finish_task ends a task begun with start_task (or /task). \
                     If it was finished already, go on with the conversation.",
                ),
                Ok(_) if step_taken(&path).is_some() => ToolOutput::error(one_step),
                Ok(_) => ToolOutput::ok(
                    "The task is finished: from your next answer on, your context holds its summary \
                     in place of its messages.",
                ),
            },
            _ => expand(&path, arguments),
        }
    }

    /// After an answer's calls all have results (`last` the final one): when one of them
    /// started or finished a task, writes the task's start or end below `last` and returns it
    /// (the next answer goes below it); otherwise `last`. Safe to repeat after a restart.
    pub(super) async fn take_task_step(&self, job: &Job, last: Uuid) -> DomainResult<Uuid> {
        let all = repo::session_messages(&self.db, job.session_id).await?;
        let path = tree::path_to(&all, last);
        let Some((name, arguments)) = step_taken(&path) else { return Ok(last) };
        if let Some(written) = all.iter().find(|m| {
            m.parent_id == Some(last) && matches!(m.kind, MessageKind::TaskStart | MessageKind::TaskEnd)
        }) {
            return Ok(written.id);
        }
        let (kind, key, max) = match name.as_str() {
            "start_task" => (MessageKind::TaskStart, "goal", MAX_GOAL_CHARS),
            _ => (MessageKind::TaskEnd, "summary", MAX_TASK_SUMMARY_CHARS),
        };
        let text = text_argument(&arguments, key, max).map_err(DomainError::Invalid)?;
        let session = self.sessions.get_session(&job.actor, job.session_id).await?;
        let boundary = self.write_boundary(&session, &path, (Uuid::now_v7(), kind), text, None, None).await?;
        Ok(boundary.message_id)
    }

    /// `/task <goal>`: a task starts at the end of the path and the goal is sent as the
    /// person's message, answered at once. A repeat of the same form sends nothing again.
    pub async fn start_task(
        &self,
        actor: &Actor,
        session_id: Uuid,
        goal: &str,
        client_id: &str,
        model: Option<&str>,
    ) -> DomainResult<Started> {
        let session = self.sessions.get_session(actor, session_id).await?;
        if let Some(existing) = self.repeated_submit(session.id, client_id).await? {
            return Ok(existing);
        }
        let goal = goal.trim();
        if goal.is_empty() {
            return Err(DomainError::Invalid("Name the task's goal: /task <goal>.".into()));
        }
        if goal.chars().count() > MAX_GOAL_CHARS {
            return Err(DomainError::Invalid(format!(
                "The goal is longer than {MAX_GOAL_CHARS} characters."
            )));
        }
        self.not_paused(session.id).await?;
        // The model is admitted before anything is written, so a refusal leaves no task behind.
        let reference = self.pick_model(actor, &session, model).await?;
        self.admit(actor, &session, &reference).await?;
        let (start, parent) = {
            let _hold = self.hold(actor, session.id)?;
            let all = repo::session_messages(&self.db, session.id).await?;
            let path = tree::active_path(&all, session.active_root_id);
            let start = self
                .write_boundary(&session, &path, (Uuid::now_v7(), MessageKind::TaskStart), goal, None, None)
                .await?;
            (start, path.last().map(|m| m.id))
        };
        match self.submit(actor, session.id, goal, client_id, Some(&reference)).await {
            Ok(started) => Ok(started),
            Err(e) => {
                // Nothing half-written: the task's start goes with the message that failed.
                if let Err(undo) =
                    repo::delete_branch(&self.db, session.id, &[start.message_id], parent, None).await
                {
                    tracing::warn!(error = %undo, "a task start could not be taken back");
                }
                Err(e)
            }
        }
    }

    /// `/finish [summary]`: ends the innermost open task on the path with the summary given, or
    /// one the model writes (nothing is written when that call fails).
    pub async fn finish_task(
        &self,
        actor: &Actor,
        session_id: Uuid,
        summary: &str,
    ) -> DomainResult<Boundary> {
        let session = self.sessions.get_session(actor, session_id).await?;
        self.not_paused(session.id).await?;
        let summary = summary.trim();
        if summary.chars().count() > MAX_TASK_SUMMARY_CHARS {
            return Err(DomainError::Invalid(format!(
                "The summary is longer than {MAX_TASK_SUMMARY_CHARS} characters."
            )));
        }
        let _hold = self.hold(actor, session.id)?;
        let all = repo::session_messages(&self.db, session.id).await?;
        let path = tree::active_path(&all, session.active_root_id);
        let Some(&open) = context::open_tasks(&path).last() else {
            return Err(DomainError::Invalid(
                "No task is open here: /finish ends a task begun with /task (or by the agent).".into(),
            ));
        };
        let id = Uuid::now_v7();
        if !summary.is_empty() {
            return self
                .write_boundary(&session, &path, (id, MessageKind::TaskEnd), summary, None, None)
                .await;
        }
        let reference = self.pick_model(actor, &session, None).await?;
        let resolved = self.admit(actor, &session, &reference).await?;
        let goal = path[open].text();
        let ask = SummaryAsk::Task { goal: &goal, instruction: TASK_SUMMARY_INSTRUCTION };
        let (text, usage) = self.summarise(actor, &session, &path, &resolved, ask, id).await?;
        self.write_boundary(&session, &path, (id, MessageKind::TaskEnd), &text, Some(&reference), usage).await
    }
}

/// `expand_task`: a finished task on this path, as text, in slices.
fn expand(path: &[Message], arguments: &Value) -> ToolOutput {
    let Some(task_id) = arguments.get("task_id").and_then(Value::as_str) else {
        return ToolOutput::error("expand_task needs \"task_id\": the id its summary shows.");
    };
    let offset = arguments.get("offset").and_then(Value::as_u64).unwrap_or(0);
    let offset = usize::try_from(offset).unwrap_or(usize::MAX);
    let not_here = || {
        ToolOutput::error(format!(
            "No task with id {task_id:?} is in this conversation: use the id a task summary shows."
        ))
    };
    let Ok(id) = Uuid::parse_str(task_id.trim()) else { return not_here() };
    let Some(start) = path.iter().position(|m| m.id == id && m.kind == MessageKind::TaskStart) else {
        return not_here();
    };
    let Some(end) = context::finished_task_end(path, start) else {
        return ToolOutput::error("That task is still open: its messages are in your context.");
    };
    let text = transcript(&path[start + 1..end]);
    ToolOutput::ok(slice_for_model(&text, offset, EXPAND_SLICE_CHARS))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn arguments_are_checked() {
        assert!(text_argument(&json!({"goal": "  "}), "goal", 10).is_err());
        assert!(text_argument(&json!({"goal": 3}), "goal", 10).is_err());
        assert!(text_argument(&json!({"goal": "x".repeat(11)}), "goal", 10).is_err());
        assert_eq!(text_argument(&json!({"goal": " fix it "}), "goal", 10), Ok("fix it"));
    }
}
