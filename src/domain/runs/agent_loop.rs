//! The agent loop: after an answer that calls tools, each call is recorded, run (or paused for
//! a person's decision) and answered by a tool message, then the model is called again, until
//! it stops calling tools, the iteration limit is reached, or the run is stopped.
//!
//! A pause is durable: the run's row says `awaiting_confirmation` and the call's row
//! `proposed`; nothing of it lives only in memory, so a decision after a restart resumes it.

use std::time::Duration;

use serde_json::Value;
use tokio::time::Instant;
use uuid::Uuid;

use crate::domain::agent::{self, OfferedTool};
use crate::domain::runs::context::{self, ContextInput, Mode};
use crate::domain::runs::preparation::Files;
use crate::domain::runs::{Accumulator, End, Job, RunEngine};
use crate::domain::sessions::ChatSession;
use crate::domain::sessions::tree::{self, MessageStatus, Role};
use crate::domain::{DomainError, DomainResult};
use crate::events::{RunEvent, RunPublisher};
use crate::providers::types::Part;
use crate::storage::repos::agent::{self as repo, NewToolCall};
use crate::storage::repos::messages::{self as messages, NewMessage};
use crate::tools::{self, ToolOutput};

/// Where a run (re)starts.
pub(super) enum Start {
    /// Call the model into `job.message_id`.
    Model,
    /// Work through the calls of this answer (after a decision).
    Calls {
        /// The answer holding the calls.
        answer: Uuid,
    },
}

/// What working through an answer's calls came to.
pub(super) enum Flow {
    /// Every call is answered; the next answer goes under `last`.
    Next { last: Uuid },
    /// A call waits for a person.
    Paused,
    /// The run is over.
    Ended { status: &'static str, error: Option<String> },
}

/// What running an approved call came to.
pub(super) enum Executed {
    /// Its output.
    Output(ToolOutput),
    /// A sub-agent's own call waits for a person; the run pauses.
    SubagentWaits,
    /// A person refused a sub-agent's call with "no": the run ends.
    SubagentRefused,
}

/// What a sub-agent's call result says while one of its calls waits for a decision.
pub(super) const SUBAGENT_WAITS: &str = "The sub-agent paused for a decision on one of its tool calls.";

/// What a decision did.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Decided {
    /// The run goes on; it writes this tool result first.
    Resumed {
        /// The tool result message being written.
        result_message_id: Uuid,
    },
    /// The model explained the call; the dialog asks again.
    Explained,
    /// Someone (another tab) decided first, or the run is gone.
    AlreadyDecided,
}

/// A call as the model made it.
pub(super) struct ModelCall {
    pub(super) id: String,
    pub(super) name: String,
    pub(super) arguments: Value,
}

pub(super) fn calls_in(parts: &[Part]) -> Vec<ModelCall> {
    parts
        .iter()
        .filter_map(|p| match p {
            Part::ToolCall { id, name, arguments, .. } => {
                Some(ModelCall { id: id.clone(), name: name.clone(), arguments: arguments.clone() })
            }
            _ => None,
        })
        .collect()
}

/// The empty, streaming tool result a call's outcome is written into.
pub(super) fn result_placeholder(id: Uuid, parent: Uuid) -> NewMessage<'static> {
    NewMessage {
        id,
        parent_id: Some(parent),
        role: Role::Tool,
        parts: &[],
        model: None,
        status: MessageStatus::Streaming,
        client_id: None,
        author_id: None,
    }
}

/// What the model is told when a call was refused.
pub(super) fn refusal(decision: Option<&str>) -> String {
    match decision {
        Some("no") => "The user refused this call and stopped the run.".into(),
        _ => "The user declined this call. Do not retry it; continue without it or ask the user.".into(),
    }
}

/// Longest the model may take to explain a call.
pub(super) const EXPLAIN_TIMEOUT: Duration = Duration::from_secs(60);
/// Characters of explanation kept at most.
pub(super) const EXPLAIN_MAX_CHARS: usize = 16_000;

/// What the model is asked when the user wants a call explained.
pub(super) const EXPLAIN_INSTRUCTION: &str = "Before this tool call runs, the user asks you to explain it. In a few \
sentences: why you want to make this call, what it will do (and change), and what you expect from it. Do \
not call any tool.";

impl RunEngine {
    /// Drives a run from `start` until it ends or pauses.
    ///
    /// A live reply's task is allocated whole, as large as the largest state any of its awaits
    /// can be in, for as long as the reply streams. So only the model call is awaited in place;
    /// the work before and after it (tool calls, the next request, the end) is boxed and
    /// allocated while it runs (see `tests::a_live_replys_task_stays_small`).
    pub(super) async fn run_loop(&self, mut job: Box<Job>, mut publisher: RunPublisher, mut start: Start) {
        loop {
            let answer = match start {
                Start::Model => {
                    let started = Instant::now();
                    let (acc, end, hold) = self.call_model(&mut job, &mut publisher).await;
                    let new_calls = calls_in(&acc.parts[job.parts.len().min(acc.parts.len())..]);
                    if !matches!(end, End::Finished) || new_calls.is_empty() || job.tools.is_empty() {
                        Box::pin(self.conclude(*job, publisher, acc, end, started)).await;
                        drop(hold);
                        return;
                    }
                    Box::pin(self.close_answer(&job, &acc, &end, started)).await;
                    drop(hold);
                    job.message_id
                }
                Start::Calls { answer } => answer,
            };
            let flow = match Box::pin(self.work_calls(&mut job, &mut publisher, answer)).await {
                Ok(flow) => flow,
                Err(e) => {
                    tracing::error!(run = %job.run_id, error = %e, "a tool step failed");
                    Flow::Ended {
                        status: "failed",
                        error: Some("The run failed while handling a tool call.".into()),
                    }
                }
            };
            match flow {
                Flow::Next { last } => match Box::pin(self.next_answer(&mut job, &publisher, last)).await {
                    Ok(()) => start = Start::Model,
                    Err(message) => {
                        Box::pin(self.end(*job, publisher, "failed", Some(message))).await;
                        return;
                    }
                },
                Flow::Paused => {
                    tracing::info!(run = %job.run_id, "run waits for a decision");
                    publisher.finish(RunEvent::Done { message_id: Some(job.message_id), plain: false });
                    return;
                }
                Flow::Ended { status, error } => {
                    Box::pin(self.end(*job, publisher, status, error)).await;
                    return;
                }
            }
        }
    }

    /// Ends the run and its stream.
    async fn end(&self, job: Job, publisher: RunPublisher, status: &str, error: Option<String>) {
        if let Err(e) = repo::end_run(&self.db, job.run_id, status, error.as_deref()).await {
            tracing::error!(run = %job.run_id, error = %e, "could not record the end of a run");
        }
        tracing::info!(run = %job.run_id, session = %job.session_id, status, "run ended");
        match error {
            Some(message) => publisher.finish(RunEvent::Error(message)),
            None => publisher.finish(RunEvent::Done { message_id: Some(job.message_id), plain: false }),
        }
    }

    /// Stores an answer that called tools as complete, with its usage; the run goes on.
    async fn close_answer(&self, job: &Job, acc: &Accumulator, end: &End, started: Instant) {
        let (call, total) = self.usage_of(job, acc, end);
        if let Err(e) =
            repo::close_message(&self.db, job.message_id, &acc.parts, MessageStatus::Complete, None, total)
                .await
        {
            tracing::error!(run = %job.run_id, error = %e, "could not store an answer");
        }
        if let Some(usage) = call {
            self.record_usage(job, usage, started).await;
        }
    }

    /// Opens the next answer under `last` and renders its request from the stored path.
    async fn next_answer(&self, job: &mut Job, publisher: &RunPublisher, last: Uuid) -> Result<(), String> {
        let storage = |e: crate::storage::StorageError| {
            tracing::error!(error = %e, "agent step failed");
            "The run failed while storing its progress.".to_string()
        };
        let run = repo::find_run(&self.db, job.session_id, job.run_id).await.map_err(storage)?;
        let done = run.map_or(0, |r| r.iterations);
        if u32::try_from(done).unwrap_or(u32::MAX) >= self.agent_settings.max_iterations {
            return Err(format!(
                "The agent stopped after {done} steps, its limit. Send a message to let it go on."
            ));
        }
        if let Err(e) = self.quotas.check(job.owner_id).await {
            return Err(e.to_string());
        }
        let all = messages::session_messages(&self.db, job.session_id).await.map_err(storage)?;
        let mut path = tree::path_to(&all, last);
        let session = self.sessions.get_session(&job.actor, job.session_id).await.map_err(|e| {
            tracing::error!(error = %e, "agent step failed");
            "The run failed while reading its session.".to_string()
        })?;
        // A long agent turn near the model's window is compressed before its next call, as a
        // new message is; the next answer goes below the summary.
        let mut last = last;
        if let Some(summary) = self.compact_if_needed(&job.actor, &session, &path, &job.model, 0).await {
            last = summary.id;
            path.push(summary);
        }
        let reference = job.model.reference();
        let id = Uuid::now_v7();
        let placeholder = NewMessage {
            id,
            parent_id: Some(last),
            role: Role::Assistant,
            parts: &[],
            model: Some(&reference),
            status: MessageStatus::Streaming,
            client_id: None,
            author_id: None,
        };
        repo::open_message(&self.db, job.session_id, job.run_id, &placeholder, None)
            .await
            .map_err(storage)?;
        publisher.advance(id);
        let supplements = self.supplements(&session, &path, &job.model, Files::Look).await;
        let mut request = context::render(&ContextInput {
            system: job.system.as_deref(),
            path: &path,
            model_reference: &reference,
            model_id: &job.model.model,
            kind: job.model.kind,
            params: job.params.clone(),
            mode: Mode::Answer,
            attachments: Some(&supplements.attachments),
            files: &supplements.files,
        });
        request.tools = job.tools.iter().map(|t| t.spec.clone()).collect();
        job.request = request;
        job.message_id = id;
        job.parts = Vec::new();
        job.prior_usage = None;
        Ok(())
    }

    /// Records, decides and runs the calls of `answer` in order.
    async fn work_calls(
        &self,
        job: &mut Job,
        publisher: &mut RunPublisher,
        answer: Uuid,
    ) -> DomainResult<Flow> {
        let session = self.sessions.get_session(&job.actor, job.session_id).await?;
        let mode = self.approval_mode(job, &session).await?;
        let answer_message =
            messages::find_message(&self.db, session.id, answer).await?.ok_or(DomainError::NotFound)?;
        let mut last = answer;
        for (position, call) in calls_in(&answer_message.parts).into_iter().enumerate() {
            let offered = job.tools.iter().find(|t| t.spec.name == call.name).cloned();
            let row =
                self.record_tool_call(job, session.id, answer, position, &call, offered.as_ref()).await?;
            if let Some(result) = row.result_message_id {
                // A sub-agent waiting for a decision left its result saying so, and its row
                // approved: it is not answered until the sub-agent finishes.
                let waiting_subagent = row.tool_name == "subagent" && row.status == "approved";
                let answered = !waiting_subagent
                    && messages::find_message(&self.db, session.id, result)
                        .await?
                        .is_some_and(|m| m.status != MessageStatus::Streaming);
                if answered {
                    last = result;
                    if row.decision.as_deref() == Some("no") {
                        return Ok(Flow::Ended { status: "cancelled", error: None });
                    }
                    continue;
                }
            }
            let approved = match row.status.as_str() {
                "proposed" => match &offered {
                    // Nothing runs for a tool that does not exist; the model is told so.
                    None => false,
                    Some(tool) => {
                        if !self
                            .approved_without_asking(job, &session, mode, tool, &call.arguments, row.id)
                            .await?
                        {
                            repo::await_confirmation(&self.db, job.run_id).await?;
                            return Ok(Flow::Paused);
                        }
                        true
                    }
                },
                "approved" => agent::approval_covers(&row, &call.name, &call.arguments, offered.as_ref()),
                _ => false,
            };
            let result_id = match row.result_message_id {
                Some(id) => id,
                None => self.open_result(job, session.id, last, row.id).await?,
            };
            if result_id != job.message_id {
                publisher.advance(result_id);
                job.message_id = result_id;
            }
            let (output, status) = if offered.is_none() {
                let names: Vec<&str> = job.tools.iter().map(|t| t.spec.name.as_str()).collect();
                let text =
                    format!("There is no tool named {:?}. Available tools: {}.", call.name, names.join(", "));
                (ToolOutput { content: text, is_error: true, diff: None }, "failed")
            } else if approved {
                let run = tokio::select! {
                    biased;
                    _ = publisher.cancelled() => None,
                    out = self.execute(job, &session, &call, offered.as_ref()) => Some(out),
                };
                match run {
                    Some(Executed::Output(out)) => {
                        let status = if out.is_error { "failed" } else { "executed" };
                        (out, status)
                    }
                    Some(Executed::SubagentWaits) => {
                        // Readable while it waits (and after a restart); replaced when it is done.
                        let waiting = ToolOutput::ok(SUBAGENT_WAITS);
                        self.store_result(&call, result_id, &waiting, MessageStatus::Complete).await?;
                        return Ok(Flow::Paused);
                    }
                    Some(Executed::SubagentRefused) => {
                        let refused = ToolOutput::error(refusal(Some("no")));
                        self.store_result(&call, result_id, &refused, MessageStatus::Complete).await?;
                        repo::set_call_outcome(&self.db, row.id, "failed", None).await?;
                        return Ok(Flow::Ended { status: "cancelled", error: None });
                    }
                    None => {
                        let who =
                            if self.registry.is_stopping() { "the server stopping" } else { "the user" };
                        let stopped = ToolOutput {
                            content: format!("Stopped by {who} before the tool finished."),
                            is_error: true,
                            diff: None,
                        };
                        self.store_result(&call, result_id, &stopped, MessageStatus::Stopped).await?;
                        repo::set_call_outcome(&self.db, row.id, "failed", None).await?;
                        return Ok(Flow::Ended { status: "cancelled", error: None });
                    }
                }
            } else if row.status == "approved" {
                (ToolOutput::error(agent::CALL_NOT_COVERED), "failed")
            } else {
                let text = refusal(row.decision.as_deref());
                (ToolOutput { content: text, is_error: true, diff: None }, "denied")
            };
            self.store_result(&call, result_id, &output, MessageStatus::Complete).await?;
            if status != "denied" {
                repo::set_call_outcome(&self.db, row.id, status, output.diff.as_deref()).await?;
            }
            last = result_id;
            if row.decision.as_deref() == Some("no") {
                return Ok(Flow::Ended { status: "cancelled", error: None });
            }
        }
        // Only an answer that started or finished a task needs the tree read again here.
        let task_step = calls_in(&answer_message.parts)
            .iter()
            .any(|c| matches!(c.name.as_str(), "start_task" | "finish_task"));
        let last = if task_step { self.take_task_step(job, last).await? } else { last };
        Ok(Flow::Next { last })
    }

    async fn store_result(
        &self,
        call: &ModelCall,
        message_id: Uuid,
        output: &ToolOutput,
        status: MessageStatus,
    ) -> DomainResult<()> {
        let parts = [Part::ToolResult {
            call_id: call.id.clone(),
            name: call.name.clone(),
            content: output.content.clone(),
            is_error: output.is_error,
        }];
        repo::close_message(&self.db, message_id, &parts, status, None, None).await?;
        Ok(())
    }

    /// Runs one approved call.
    async fn execute(
        &self,
        job: &Job,
        session: &ChatSession,
        call: &ModelCall,
        tool: Option<&OfferedTool>,
    ) -> Executed {
        if call.name == "subagent" {
            return self.run_subagent(job, session, job.message_id, &call.arguments).await;
        }
        Executed::Output(self.run_tool(job, session, &call.name, tool, &call.arguments).await)
    }

    /// Records a call of an answer (once: a resumed run finds the same row).
    pub(super) async fn record_tool_call(
        &self,
        job: &Job,
        session_id: Uuid,
        answer: Uuid,
        position: usize,
        call: &ModelCall,
        offered: Option<&OfferedTool>,
    ) -> DomainResult<crate::model::agent::ToolCall> {
        let canonical = tools::canonical_arguments(&call.arguments);
        Ok(repo::ensure_call(
            &self.db,
            &NewToolCall {
                run_id: job.run_id,
                session_id,
                owner_id: job.owner_id,
                message_id: answer,
                call_id: &call.id,
                position: i32::try_from(position).unwrap_or(i32::MAX),
                tool_name: &call.name,
                arguments: &canonical,
                args_hash: &agent::call_hash(&call.name, &canonical),
                tool_digest: offered.map_or("", |t| t.digest.as_str()),
                tool_description: offered.map(|t| agent::dialog_description(&t.spec.description)),
                risk: offered.map_or("exec", |t| t.risk.as_str()),
            },
        )
        .await?)
    }

    /// Opens the (streaming) result message of a call under `parent`; returns its id.
    pub(super) async fn open_result(
        &self,
        job: &Job,
        session_id: Uuid,
        parent: Uuid,
        row_id: Uuid,
    ) -> DomainResult<Uuid> {
        let id = Uuid::now_v7();
        repo::open_message(&self.db, session_id, job.run_id, &result_placeholder(id, parent), Some(row_id))
            .await?;
        Ok(id)
    }

    /// The approval mode for this session's calls.
    pub(super) async fn approval_mode(
        &self,
        job: &Job,
        session: &ChatSession,
    ) -> DomainResult<agent::ApprovalMode> {
        let (workspace, _) = self.sessions.view_workspace(&job.actor, session.workspace_id).await?;
        // The person who started the run: their groups may allow a looser mode than the
        // instance's (admins set it per group), the loosest of their groups' winning.
        let loosest = crate::domain::teams::groups::loosest_approval_mode(&self.db, job.actor.user_id())
            .await?
            .unwrap_or(self.agent_settings.loosest);
        Ok(agent::effective_mode(session.approval_mode.as_deref(), &workspace.approval_mode, loosest))
    }

    /// Decides a proposed call by the rules alone, recording why it may run; `false` means a
    /// person must decide. The same rules hold for a sub-agent's calls (SECURITY.md 58). The
    /// `subagent` call itself only delegates: each call the sub-agent makes is decided alone.
    pub(super) async fn approved_without_asking(
        &self,
        job: &Job,
        session: &ChatSession,
        mode: agent::ApprovalMode,
        tool: &OfferedTool,
        arguments: &Value,
        row_id: Uuid,
    ) -> DomainResult<bool> {
        if tool.spec.name == "subagent"
            || !agent::needs_confirmation(tool.risk, mode, self.agent_settings.sandboxed())
        {
            repo::set_call_status(&self.db, row_id, "approved", Some("auto")).await?;
            return Ok(true);
        }
        if self.agent.rule_allows(job.owner_id, session.id, session.workspace_id, tool, arguments).await? {
            repo::set_call_status(&self.db, row_id, "approved", Some("rule")).await?;
            return Ok(true);
        }
        Ok(false)
    }

    /// Runs one tool call (not `subagent`): an MCP server's, `write_todo`, or a built-in.
    pub(super) async fn run_tool(
        &self,
        job: &Job,
        session: &ChatSession,
        name: &str,
        tool: Option<&OfferedTool>,
        arguments: &Value,
    ) -> ToolOutput {
        if let Some((server, remote)) = tool.and_then(|t| t.mcp.as_ref()) {
            return match &self.mcp {
                Some(mcp) => {
                    mcp.call_in(job.owner_id, Some(session.workspace_id), *server, remote, arguments).await
                }
                None => ToolOutput::error("MCP servers are not available."),
            };
        }
        if name == agent::GENERATE_IMAGE {
            return self.generate_image_tool(job, session, arguments).await;
        }
        if name == "write_todo" {
            return self.agent.write_todo(job.session_id, arguments).await;
        }
        if name == "search_chat" {
            return self.search_chat(job, arguments).await;
        }
        if super::tasks::is_task_tool(name) {
            return self.task_tool(job, name, arguments).await;
        }
        if name == "read_tool_result" {
            return self.read_tool_result(job.session_id, arguments).await;
        }
        if name == "memory_read" || name == "memory_write" {
            return self.agent.run_memory_tool(&job.actor, session.workspace_id, name, arguments).await;
        }
        if name == "recall" {
            let hash =
                arguments.get("hash").and_then(Value::as_str).unwrap_or_default().trim().to_ascii_lowercase();
            return match &self.files {
                Some(files) => match files.recall(job.owner_id, &hash).await {
                    Ok(text) => ToolOutput::ok(text),
                    Err(m) => ToolOutput::error(m),
                },
                None => ToolOutput::error("Files are not available."),
            };
        }
        let env = self.agent_settings.env(self.roots_of(session).await);
        tools::run_builtin(name, arguments, &env).await
    }

    /// `search_chat`: the user's own messages, as text for the model.
    async fn search_chat(&self, job: &Job, arguments: &Value) -> ToolOutput {
        let Some(search) = &self.search else { return ToolOutput::error("Search is not available.") };
        let Some(query) = arguments.get("query").and_then(Value::as_str) else {
            return ToolOutput::error("search_chat needs \"query\": what to look for.");
        };
        let limit = arguments.get("limit").and_then(Value::as_u64).unwrap_or(10).clamp(1, 20) as usize;
        match search.search(&job.actor, query, None, 1, limit).await {
            Ok(page) if page.hits.is_empty() => ToolOutput::ok("No messages match."),
            Ok(page) => {
                let mut out = format!("{} matching messages; the best {}:", page.total, page.hits.len());
                for h in page.hits {
                    out.push_str(&format!(
                        "\n- [{}] \"{}\" ({}): {}",
                        h.date,
                        h.session_title,
                        h.role,
                        h.snippet.text.clone()
                    ));
                }
                ToolOutput::ok(out)
            }
            Err(DomainError::Invalid(m)) => ToolOutput::error(m),
            Err(e) => {
                tracing::warn!(error = %e, "search_chat failed");
                ToolOutput::error("The search failed.")
            }
        }
    }

    /// The session's folders as tool roots, resolved and checked now.
    pub(super) async fn roots_of(&self, session: &ChatSession) -> Vec<tools::Root> {
        let allowed = match agent::host_roots_of(&self.db, session.workspace_id).await {
            Ok(a) => a,
            Err(e) => {
                tracing::warn!(error = %e, "could not read the allowed host folders");
                Vec::new()
            }
        };
        let dir = crate::prompting::workspace_dir(&self.data_dir, session.workspace_id);
        let exposed = session.exposed_roots.clone();
        tokio::task::spawn_blocking(move || agent::session_roots(&dir, &exposed, &allowed))
            .await
            .unwrap_or_default()
    }
}
