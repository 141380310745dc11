//! The `subagent` tool: a nested run on a branch below the call's result, with its own
//! system prompt and a subset of the parent's tools. Its messages are written whole (never
//! left streaming), so stopping the parent leaves a readable branch; its final answer is the
//! call's result. The branch hangs off the result without being chosen, so the parent's path
//! goes on to its next answer while the sub-agent's work stays one sibling switch away.

use futures_util::StreamExt;
use serde_json::Value;
use tokio::time::Instant;
use uuid::Uuid;

use crate::domain::agent::{self, OfferedTool};
use crate::domain::providers::describe_error;
use crate::domain::runs::context::{self, ContextInput, Mode};
use crate::domain::runs::{Accumulator, Job, RunEngine};
use crate::domain::sessions::ChatSession;
use crate::domain::sessions::tree::{self, MessageStatus, MessageUsage, Role};
use crate::providers::types::{Part, ProviderEvent};
use crate::storage::repos::messages::{self, NewMessage};
use crate::tools::ToolOutput;

/// Most model calls one sub-agent makes.
pub const SUBAGENT_MAX_STEPS: usize = 20;
/// Longest task, in characters.
pub const MAX_TASK_CHARS: usize = 20_000;

/// The tools a sub-agent gets: those asked for (all of the parent's when none are named),
/// never `subagent` itself. Names the parent does not have are an error for the model.
pub fn subagent_tools(parent: &[OfferedTool], args: &Value) -> Result<Vec<OfferedTool>, String> {
    let available: Vec<&OfferedTool> = parent.iter().filter(|t| t.spec.name != "subagent").collect();
    let Some(asked) = args.get("tools") else {
        return Ok(available.into_iter().cloned().collect());
    };
    let Some(list) = asked.as_array() else {
        return Err("\"tools\" must be an array of tool names.".into());
    };
    let mut out = Vec::new();
    for name in list {
        let Some(name) = name.as_str() else {
            return Err("\"tools\" must be an array of tool names.".into());
        };
        match available.iter().find(|t| t.spec.name == name) {
            Some(t) => out.push((*t).clone()),
            None => {
                let names: Vec<&str> = available.iter().map(|t| t.spec.name.as_str()).collect();
                return Err(format!("A sub-agent cannot use {name:?}. Available: {}.", names.join(", ")));
            }
        }
    }
    Ok(out)
}

/// Whether a sub-agent call waits for a person: when any tool it would get does (approving
/// the delegation approves its tools for that task).
pub fn subagent_needs_confirmation(
    parent: &[OfferedTool],
    args: &Value,
    mode: agent::ApprovalMode,
    sandboxed: bool,
) -> bool {
    match subagent_tools(parent, args) {
        Ok(tools) => tools.iter().any(|t| agent::needs_confirmation(t.risk, mode, sandboxed)),
        // A bad call is answered with an error, which needs nobody's approval.
        Err(_) => false,
    }
}

fn text_of(parts: &[Part]) -> String {
    parts
        .iter()
        .filter_map(|p| if let Part::Text { text } = p { Some(text.as_str()) } else { None })
        .collect()
}

impl RunEngine {
    /// Runs a sub-agent for the call whose result message is `result_id`.
    pub(super) async fn run_subagent(
        &self,
        job: &Job,
        session: &ChatSession,
        result_id: Uuid,
        args: &Value,
    ) -> ToolOutput {
        let task = args.get("task").and_then(Value::as_str).map(str::trim).unwrap_or_default();
        if task.is_empty() {
            return ToolOutput::error("subagent needs \"task\": what the sub-agent should do.");
        }
        if task.chars().count() > MAX_TASK_CHARS {
            return ToolOutput::error(format!("The task is longer than {MAX_TASK_CHARS} characters."));
        }
        let system = match args.get("system_prompt") {
            None | Some(Value::Null) => None,
            Some(Value::String(s)) if s.chars().count() <= MAX_TASK_CHARS => Some(s.clone()),
            Some(_) => {
                return ToolOutput::error("\"system_prompt\" must be text of at most 20000 characters.");
            }
        };
        let tools = match subagent_tools(&job.tools, args) {
            Ok(t) => t,
            Err(m) => return ToolOutput::error(m),
        };
        match self.subagent_steps(job, session, result_id, task, system.as_deref(), &tools).await {
            Ok(out) => out,
            Err(e) => {
                tracing::error!(error = %e, "a sub-agent could not store its work");
                ToolOutput::error("The sub-agent failed while storing its work.")
            }
        }
    }

    async fn subagent_steps(
        &self,
        job: &Job,
        session: &ChatSession,
        result_id: Uuid,
        task: &str,
        system: Option<&str>,
        tools: &[OfferedTool],
    ) -> Result<ToolOutput, crate::storage::StorageError> {
        let reference = job.model.reference();
        let task_id = Uuid::now_v7();
        let task_parts = [Part::Text { text: task.to_string() }];
        let task_message = NewMessage {
            id: task_id,
            parent_id: Some(result_id),
            role: Role::User,
            parts: &task_parts,
            model: None,
            status: MessageStatus::Complete,
            client_id: None,
        };
        // Not chosen: the parent's path continues past the result with its own next answer.
        messages::insert_detached(&self.db, session.id, &task_message).await?;
        let mut last = task_id;
        for _ in 0..SUBAGENT_MAX_STEPS {
            let all = messages::session_messages(&self.db, session.id).await?;
            let full = tree::path_to(&all, last);
            let from = full.iter().position(|m| m.id == task_id).unwrap_or(0);
            let mut request = context::render(&ContextInput {
                system,
                path: &full[from..],
                model_reference: &reference,
                model_id: &job.model.model,
                kind: job.model.kind,
                params: job.params.clone(),
                mode: Mode::Answer,
                attachments: None,
            });
            request.tools = tools.iter().map(|t| t.spec.clone()).collect();
            let started = Instant::now();
            let mut acc = Accumulator::new(Vec::new());
            let mut stream = match job.model.chat.stream(&request).await {
                Ok(s) => s,
                Err(e) => {
                    return Ok(ToolOutput::error(format!(
                        "The sub-agent's model call failed: {}",
                        describe_error(&e)
                    )));
                }
            };
            while let Some(ev) = stream.next().await {
                if let ProviderEvent::Error(e) = &ev {
                    return Ok(ToolOutput::error(format!(
                        "The sub-agent's model call failed: {}",
                        describe_error(e)
                    )));
                }
                acc.apply(ev);
            }
            let usage = acc.usage.map(|u| MessageUsage::priced(&u, &job.model.info, false));
            if let Some(u) = usage {
                self.record_usage(job, u, started).await;
            }
            let answer_id = Uuid::now_v7();
            let answer = NewMessage {
                id: answer_id,
                parent_id: Some(last),
                role: Role::Assistant,
                parts: &acc.parts,
                model: Some(&reference),
                status: MessageStatus::Complete,
                client_id: None,
            };
            messages::insert_chosen(&self.db, session.id, &answer).await?;
            last = answer_id;
            let calls: Vec<(String, String, Value)> = acc
                .parts
                .iter()
                .filter_map(|p| match p {
                    Part::ToolCall { id, name, arguments, .. } => {
                        Some((id.clone(), name.clone(), arguments.clone()))
                    }
                    _ => None,
                })
                .collect();
            if calls.is_empty() {
                let text = text_of(&acc.parts);
                let text = if text.trim().is_empty() {
                    "The sub-agent finished without an answer.".into()
                } else {
                    text
                };
                return Ok(ToolOutput::ok(text));
            }
            for (call_id, name, arguments) in calls {
                let output = match tools.iter().find(|t| t.spec.name == name) {
                    None => ToolOutput::error(format!("There is no tool named {name:?} here.")),
                    Some(tool) => self.run_tool(job, session, &name, Some(tool), &arguments).await,
                };
                let parts =
                    [Part::ToolResult { call_id, name, content: output.content, is_error: output.is_error }];
                let id = Uuid::now_v7();
                let result = NewMessage {
                    id,
                    parent_id: Some(last),
                    role: Role::Tool,
                    parts: &parts,
                    model: None,
                    status: MessageStatus::Complete,
                    client_id: None,
                };
                messages::insert_chosen(&self.db, session.id, &result).await?;
                last = id;
            }
        }
        Ok(ToolOutput::error(format!("The sub-agent did not finish within {SUBAGENT_MAX_STEPS} steps.")))
    }
}
