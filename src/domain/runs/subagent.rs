//! The `subagent` tool: a nested run on a branch below the call's result, with its own
//! system prompt and a subset of the parent's tools. Its answers are written whole; its final
//! answer is the call's result. The branch hangs off the result without being chosen, so the
//! parent's path goes on to its next answer while the sub-agent's work stays one sibling switch
//! away. Each call the sub-agent makes is decided like the parent's (SECURITY.md 58): where the
//! parent would ask, the run pauses with the dialog on the parent's page, one call per
//! decision, and the decision resumes the sub-agent from its branch.

use futures_util::StreamExt;
use serde_json::Value;
use tokio::time::Instant;
use uuid::Uuid;

use crate::domain::agent::{self, OfferedTool};
use crate::domain::providers::describe_error;
use crate::domain::runs::agent_loop::{Executed, calls_in, refusal};
use crate::domain::runs::context::{self, ContextInput, Mode};
use crate::domain::runs::{Accumulator, Job, RunEngine};
use crate::domain::sessions::ChatSession;
use crate::domain::sessions::tree::{self, MessageStatus, MessageUsage, Role};
use crate::providers::types::{Part, ProviderEvent};
use crate::storage::repos::agent as repo;
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

fn text_of(parts: &[Part]) -> String {
    parts
        .iter()
        .filter_map(|p| if let Part::Text { text } = p { Some(text.as_str()) } else { None })
        .collect()
}

/// The sub-agent's branch from its task down, following the chosen (else newest) children.
fn side_path(all: &[tree::Message], task_id: Uuid) -> Vec<&tree::Message> {
    let index = tree::TreeIndex::new(all);
    let mut path = Vec::new();
    let mut next = index.get(task_id);
    while let Some(m) = next {
        if path.len() > all.len() {
            break;
        }
        path.push(m);
        if m.chosen_child_id == Some(m.id) {
            break;
        }
        let kids = index.children(Some(m.id));
        next =
            m.chosen_child_id.and_then(|c| kids.iter().find(|k| k.id == c)).or_else(|| kids.last()).copied();
    }
    path
}

/// What working through a sub-agent answer's calls came to.
enum SideCalls {
    /// All answered; the next answer goes under `last`.
    Next { last: Uuid },
    /// One waits for a person.
    Waits,
    /// A person said no: the run ends.
    Refused,
}

impl RunEngine {
    /// Runs (or, after a decision, resumes) a sub-agent for the call whose result message is
    /// `result_id`. Its state is the branch under that result, so a decision on one of its
    /// calls, even after a restart, picks up where it waited.
    pub(super) async fn run_subagent(
        &self,
        job: &Job,
        session: &ChatSession,
        result_id: Uuid,
        args: &Value,
    ) -> Executed {
        let task = args.get("task").and_then(Value::as_str).map(str::trim).unwrap_or_default();
        if task.is_empty() {
            return Executed::Output(ToolOutput::error(
                "subagent needs \"task\": what the sub-agent should do.",
            ));
        }
        if task.chars().count() > MAX_TASK_CHARS {
            return Executed::Output(ToolOutput::error(format!(
                "The task is longer than {MAX_TASK_CHARS} characters."
            )));
        }
        let system = match args.get("system_prompt") {
            None | Some(Value::Null) => None,
            Some(Value::String(s)) if s.chars().count() <= MAX_TASK_CHARS => Some(s.clone()),
            Some(_) => {
                return Executed::Output(ToolOutput::error(
                    "\"system_prompt\" must be text of at most 20000 characters.",
                ));
            }
        };
        let tools = match subagent_tools(&job.tools, args) {
            Ok(t) => t,
            Err(m) => return Executed::Output(ToolOutput::error(m)),
        };
        match self.subagent_steps(job, session, result_id, task, system.as_deref(), &tools).await {
            Ok(out) => out,
            Err(e) => {
                tracing::error!(error = %e, "a sub-agent could not store its work");
                Executed::Output(ToolOutput::error("The sub-agent failed while storing its work."))
            }
        }
    }

    /// The sub-agent's task message under `result_id`: the one written before, or a new one.
    async fn subagent_task(
        &self,
        session: &ChatSession,
        result_id: Uuid,
        task: &str,
    ) -> Result<Uuid, crate::storage::StorageError> {
        let all = messages::session_messages(&self.db, session.id).await?;
        if let Some(existing) = all.iter().find(|m| m.parent_id == Some(result_id) && m.role == Role::User) {
            return Ok(existing.id);
        }
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
            author_id: None,
        };
        // Not chosen: the parent's path continues past the result with its own next answer.
        messages::insert_detached(&self.db, session.id, &task_message).await?;
        Ok(task_id)
    }

    async fn subagent_steps(
        &self,
        job: &Job,
        session: &ChatSession,
        result_id: Uuid,
        task: &str,
        system: Option<&str>,
        tools: &[OfferedTool],
    ) -> Result<Executed, crate::domain::DomainError> {
        let reference = job.model.reference();
        let task_id = self.subagent_task(session, result_id, task).await?;
        let mode = self.approval_mode(job, session).await?;
        loop {
            let all = messages::session_messages(&self.db, session.id).await?;
            let side = side_path(&all, task_id);
            let steps = side.iter().filter(|m| m.role == Role::Assistant).count();
            let latest = side.iter().rev().find(|m| m.role == Role::Assistant).map(|m| (*m).clone());
            let parent = match latest {
                None => task_id,
                Some(answer) if calls_in(&answer.parts).is_empty() => {
                    let text = text_of(&answer.parts);
                    let text = if text.trim().is_empty() {
                        "The sub-agent finished without an answer.".into()
                    } else {
                        text
                    };
                    return Ok(Executed::Output(ToolOutput::ok(text)));
                }
                Some(answer) => match self.work_side_calls(job, session, &answer, tools, mode).await? {
                    SideCalls::Next { last } => last,
                    SideCalls::Waits => return Ok(Executed::SubagentWaits),
                    SideCalls::Refused => return Ok(Executed::SubagentRefused),
                },
            };
            if steps >= SUBAGENT_MAX_STEPS {
                return Ok(Executed::Output(ToolOutput::error(format!(
                    "The sub-agent did not finish within {SUBAGENT_MAX_STEPS} steps."
                ))));
            }
            let full = tree::path_to(&all, parent);
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
                files: &[],
            });
            request.tools = tools.iter().map(|t| t.spec.clone()).collect();
            let started = Instant::now();
            let mut acc = Accumulator::new(Vec::new());
            let _hold = match self.hold_quota(job.owner_id, &request, &job.model).await {
                Ok(hold) => hold,
                Err(refused) => {
                    return Ok(Executed::Output(ToolOutput::error(format!(
                        "The sub-agent stopped: {refused}"
                    ))));
                }
            };
            let mut stream = match job.model.chat.stream(&request).await {
                Ok(s) => s,
                Err(e) => {
                    return Ok(Executed::Output(ToolOutput::error(format!(
                        "The sub-agent's model call failed: {}",
                        describe_error(&e)
                    ))));
                }
            };
            while let Some(ev) = stream.next().await {
                if let ProviderEvent::Error(e) = &ev {
                    return Ok(Executed::Output(ToolOutput::error(format!(
                        "The sub-agent's model call failed: {}",
                        describe_error(e)
                    ))));
                }
                acc.apply(ev);
            }
            let usage = acc.usage.map(|u| MessageUsage::priced(&u, &job.model.info, false));
            if let Some(u) = usage {
                self.record_usage(job, u, started).await;
            }
            let answer = NewMessage {
                id: Uuid::now_v7(),
                parent_id: Some(parent),
                role: Role::Assistant,
                parts: &acc.parts,
                model: Some(&reference),
                status: MessageStatus::Complete,
                client_id: None,
                author_id: None,
            };
            messages::insert_chosen(&self.db, session.id, &answer).await?;
        }
    }

    /// Records, decides and runs the calls of one sub-agent answer, in order, under the same
    /// rules as the parent's calls: one decision per call, asked on the parent's page.
    async fn work_side_calls(
        &self,
        job: &Job,
        session: &ChatSession,
        answer: &tree::Message,
        tools: &[OfferedTool],
        mode: agent::ApprovalMode,
    ) -> Result<SideCalls, crate::domain::DomainError> {
        let mut last = answer.id;
        for (position, call) in calls_in(&answer.parts).into_iter().enumerate() {
            let offered = tools.iter().find(|t| t.spec.name == call.name);
            let row = self.record_tool_call(job, session.id, answer.id, position, &call, offered).await?;
            if let Some(result) = row.result_message_id
                && messages::find_message(&self.db, session.id, result)
                    .await?
                    .is_some_and(|m| m.status != MessageStatus::Streaming)
            {
                last = result;
                if row.decision.as_deref() == Some("no") {
                    return Ok(SideCalls::Refused);
                }
                continue;
            }
            let approved = match (row.status.as_str(), offered) {
                ("proposed", Some(tool)) => {
                    if !self
                        .approved_without_asking(job, session, mode, tool, &call.arguments, row.id)
                        .await?
                    {
                        repo::await_confirmation(&self.db, job.run_id).await?;
                        return Ok(SideCalls::Waits);
                    }
                    true
                }
                ("approved", Some(_)) => agent::approval_covers(&row, &call.name, &call.arguments, offered),
                _ => false,
            };
            let result_id = match row.result_message_id {
                Some(id) => id,
                None => self.open_result(job, session.id, last, row.id).await?,
            };
            let (output, status) = match offered {
                None => {
                    (ToolOutput::error(format!("There is no tool named {:?} here.", call.name)), "failed")
                }
                Some(tool) if approved => {
                    let out = self.run_tool(job, session, &call.name, Some(tool), &call.arguments).await;
                    let status = if out.is_error { "failed" } else { "executed" };
                    (out, status)
                }
                Some(_) if row.status == "approved" => (ToolOutput::error(agent::CALL_NOT_COVERED), "failed"),
                Some(_) => (ToolOutput::error(refusal(row.decision.as_deref())), "denied"),
            };
            let parts = [Part::ToolResult {
                call_id: call.id.clone(),
                name: call.name.clone(),
                content: output.content.clone(),
                is_error: output.is_error,
            }];
            repo::close_message(&self.db, result_id, &parts, MessageStatus::Complete, None, None).await?;
            if status != "denied" {
                repo::set_call_outcome(&self.db, row.id, status, output.diff.as_deref()).await?;
            }
            last = result_id;
            if row.decision.as_deref() == Some("no") {
                return Ok(SideCalls::Refused);
            }
        }
        Ok(SideCalls::Next { last })
    }
}
