//! Decisions on waiting tool calls: recording a person's yes, no or "always" (first decision
//! wins), resuming the run it paused, explaining a call, and what the session page shows of the
//! calls (the one waiting, and each call's state by its result).

use crate::domain::accounts::Actor;
use crate::domain::agent::{self, Decision, RuleScope};
use crate::domain::providers::ResolvedModel;
use crate::domain::runs::context::{self, ContextInput, Mode};
use crate::domain::runs::{Job, RunEngine};
use crate::domain::sessions::ChatSession;
use crate::domain::sessions::tree::{self, MessageStatus, Role};
use crate::domain::{DomainError, DomainResult};
use crate::events::{RunEvent, RunPublisher};
use crate::model::agent::ToolCall;
use crate::providers::types::{ChatMessage, ChatRequest, ChatRole, GenParams, Part};
use crate::storage::repos::agent::{self as repo, DecisionRecord};
use crate::storage::repos::messages;
use serde_json::Value;
use std::time::Duration;
use tokio::time::Instant;
use uuid::Uuid;

use super::agent_loop::*;

/// How long a decision waits for the session's run slot to free (see `resume_slot`): a busy
/// server may take a while to end the run that proposed the call.
const RESUME_SLOT_WAIT: Duration = Duration::from_secs(10);

impl RunEngine {
    /// Records a person's decision on a waiting call and resumes its run (or, for `explain`,
    /// asks the model to explain the call and keeps waiting). Deciding twice, from two tabs
    /// say, is safe: the first decision wins, the second learns it came late.
    pub async fn decide(
        &self,
        actor: &Actor,
        session_id: Uuid,
        call_id: Uuid,
        decision: Decision,
        scope: RuleScope,
    ) -> DomainResult<Decided> {
        let session = self.sessions.get_session(actor, session_id).await?;
        let row = repo::find_call(&self.db, session.id, call_id).await?.ok_or(DomainError::NotFound)?;
        if row.status != "proposed" {
            return Ok(Decided::AlreadyDecided);
        }
        let Some(run) = repo::find_run(&self.db, session.id, row.run_id).await? else {
            return Ok(Decided::AlreadyDecided);
        };
        if run.status != "awaiting_confirmation" {
            return Ok(Decided::AlreadyDecided);
        }
        let answer = messages::find_message(&self.db, session.id, row.message_id)
            .await?
            .ok_or(DomainError::NotFound)?;
        let reference = answer.model.clone().unwrap_or_default();
        let all = messages::session_messages(&self.db, session.id).await?;
        let resume_at = self.resume_answer(session.id, &all, answer.id).await?;
        // In a shared workspace a teammate may decide; the run goes on as its starter's.
        let runner = self.runner(run.owner_id, actor).await?;
        // Refusing ends the run without calling the model; anything else needs it again. A
        // sub-agent's refused call ends its run through the parent, which records the refusal.
        let model = match decision {
            Decision::No if resume_at == answer.id => None,
            _ => Some(self.admit_model(&runner, &session, &reference).await?),
        };
        if decision == Decision::Explain {
            let model = model.ok_or(DomainError::NotFound)?;
            self.explain(&runner, &session, &row, &answer.id, model).await?;
            return Ok(Decided::Explained);
        }
        // The result goes under the last answered call of this answer, or the answer itself.
        let calls = repo::calls_of_message(&self.db, answer.id).await?;
        let parent = calls
            .iter()
            .filter(|c| c.position < row.position)
            .filter_map(|c| c.result_message_id)
            .rfind(|id| all.iter().any(|m| m.id == *id))
            .unwrap_or(answer.id);
        let result_id = Uuid::now_v7();
        let Some(publisher) =
            self.resume_slot(runner.user_id(), session.id, run.id, result_id, row.id).await?
        else {
            return Ok(Decided::AlreadyDecided);
        };
        let result = result_placeholder(result_id, parent);
        let (status, stored) = match decision {
            Decision::Yes | Decision::Always => ("approved", decision.as_str()),
            _ => ("denied", decision.as_str()),
        };
        let record = DecisionRecord {
            call_id: row.id,
            run_id: run.id,
            status,
            decision: stored,
            decided_by: actor.user_id(),
            result: &result,
        };
        match repo::record_decision(&self.db, session.id, &record).await {
            Ok(true) => {}
            Ok(false) => {
                publisher.abandon();
                return Ok(Decided::AlreadyDecided);
            }
            Err(e) => {
                publisher.abandon();
                return Err(e.into());
            }
        }
        tracing::info!(run = %run.id, call = %row.id, tool = %row.tool_name, decision = stored, "tool call decided");
        if decision == Decision::Always {
            let (scope_name, scope_id) = match scope {
                RuleScope::Session => (RuleScope::Session.as_str(), session.id),
                RuleScope::Workspace => (RuleScope::Workspace.as_str(), session.workspace_id),
            };
            let args: Value = serde_json::from_str(&row.arguments).unwrap_or(Value::Null);
            let pattern = agent::default_pattern(&row.tool_name, &args);
            repo::insert_rule(
                &self.db,
                actor.user_id(),
                scope_name,
                scope_id,
                &row.tool_name,
                &pattern,
                &row.tool_digest,
            )
            .await?;
        }
        let job = self.resumed_job(&runner, &session, &run.id, result_id, model).await;
        match job {
            Some(job) => {
                let engine = self.clone();
                tokio::spawn(async move {
                    engine.run_loop(Box::new(job), publisher, Start::Calls { answer: resume_at }).await
                });
            }
            None => {
                // Refused: write the refusal and end the run, without a model.
                self.finish_refused(&session, &row, result_id, &run.id, publisher).await;
            }
        }
        Ok(Decided::Resumed { result_message_id: result_id })
    }

    /// The session's run slot for the resumed run, or `None` when the call was decided
    /// meanwhile. The slot can be held for a moment by the run that proposed the call (it has
    /// recorded its wait and is ending) or by another tab's decision on the same call: the first
    /// frees it soon, the second decides the call. Either way the slot is tried again until it
    /// frees, for at most [`RESUME_SLOT_WAIT`].
    async fn resume_slot(
        &self,
        owner: Uuid,
        session_id: Uuid,
        run_id: Uuid,
        result_id: Uuid,
        call_id: Uuid,
    ) -> DomainResult<Option<RunPublisher>> {
        let deadline = Instant::now() + RESUME_SLOT_WAIT;
        loop {
            match self.registry.begin_owned(owner, session_id, run_id, Some(result_id)) {
                Ok(publisher) => return Ok(Some(publisher)),
                Err(e @ crate::events::BeginError::TooMany { .. }) => return Err(super::begin_refused(e)),
                Err(crate::events::BeginError::AlreadyRunning) => {}
            }
            if Instant::now() >= deadline {
                return Err(DomainError::Conflict(
                    "A reply is still being written: wait for it to finish.".into(),
                ));
            }
            tokio::time::sleep(Duration::from_millis(25)).await;
            let now = repo::find_call(&self.db, session_id, call_id).await?;
            if now.is_none_or(|c| c.status != "proposed") {
                return Ok(None);
            }
        }
    }

    /// The answer a decision resumes the run at: the call's own, or, for a call a sub-agent
    /// made, the parent's answer holding the `subagent` call (the sub-agent resumes inside it).
    /// A sub-agent's branch starts with its task: a user message under the `subagent` result
    /// that the result's path does not choose.
    async fn resume_answer(
        &self,
        session_id: Uuid,
        all: &[tree::Message],
        answer_id: Uuid,
    ) -> DomainResult<Uuid> {
        let path = tree::path_to(all, answer_id);
        for pair in path.windows(2).rev() {
            let (above, below) = (&pair[0], &pair[1]);
            if below.role == Role::User
                && above.role == Role::Tool
                && above.chosen_child_id != Some(below.id)
                && let Some(row) = repo::call_by_result(&self.db, session_id, above.id).await?
                && row.tool_name == "subagent"
            {
                return Ok(row.message_id);
            }
        }
        Ok(answer_id)
    }

    /// Whose run a decision continues: its starter's keys, quota and tools are used whoever
    /// decides, so an editor deciding a teammate's dialog spends nothing of their own and
    /// reaches nothing of the starter's beyond that run.
    pub(super) async fn runner(&self, run_owner: Uuid, actor: &Actor) -> DomainResult<Actor> {
        if run_owner == actor.user_id() {
            return Ok(actor.clone());
        }
        let starter =
            crate::storage::repos::users::find(&self.db, run_owner).await?.ok_or(DomainError::NotFound)?;
        if starter.status != crate::domain::accounts::UserStatus::Active {
            return Err(DomainError::Conflict(
                "The person who started this run can no longer use Arbor: ask again to start a new one."
                    .into(),
            ));
        }
        Ok(Actor::verified(&starter))
    }

    /// Quota check and model resolution for a resumed run.
    pub(super) async fn admit_model(
        &self,
        actor: &Actor,
        session: &ChatSession,
        reference: &str,
    ) -> DomainResult<ResolvedModel> {
        self.admit(actor, session, reference).await
    }

    /// The job a decision resumes: the same model, prompt and tools the run had.
    pub(super) async fn resumed_job(
        &self,
        actor: &Actor,
        session: &ChatSession,
        run_id: &Uuid,
        message_id: Uuid,
        model: Option<ResolvedModel>,
    ) -> Option<Job> {
        let model = model?;
        let system = self.system_prompt(actor, session, &model.reference()).await.ok().flatten();
        let tools = self.offered_tools(session, &model);
        let params: GenParams = serde_json::from_value(session.params.clone()).unwrap_or_default();
        let mut job = Job {
            actor: actor.clone(),
            session_id: session.id,
            workspace_id: session.workspace_id,
            owner_id: actor.user_id(),
            run_id: *run_id,
            message_id,
            request: ChatRequest {
                model: model.model.clone(),
                system: None,
                messages: Vec::new(),
                tools: Vec::new(),
                params: params.clone(),
                passthrough: None,
            },
            model,
            system,
            params,
            tools,
            parts: Vec::new(),
            prior_usage: None,
            first_question: None,
            // A run that waited for a decision: its calls so far are counted, the next is not.
            next_call_counted: false,
        };
        self.add_run_tools(&mut job).await;
        Some(job)
    }

    /// A refused call: its result says so and the run ends.
    pub(super) async fn finish_refused(
        &self,
        session: &ChatSession,
        row: &ToolCall,
        result_id: Uuid,
        run_id: &Uuid,
        publisher: RunPublisher,
    ) {
        let parts = [Part::ToolResult {
            call_id: row.call_id.clone(),
            name: row.tool_name.clone(),
            content: refusal(Some("no")),
            is_error: true,
        }];
        if let Err(e) =
            repo::close_message(&self.db, result_id, &parts, MessageStatus::Complete, None, None).await
        {
            tracing::error!(error = %e, "could not store a refusal");
        }
        if let Err(e) = repo::end_run(&self.db, *run_id, "cancelled", None).await {
            tracing::error!(error = %e, "could not end a refused run");
        }
        tracing::info!(run = %run_id, session = %session.id, "run ended by a refusal");
        publisher.finish(RunEvent::Done { message_id: Some(result_id), plain: false });
    }

    /// Asks the model why it wants to make a waiting call; the answer is stored on the call.
    pub(super) async fn explain(
        &self,
        actor: &Actor,
        session: &ChatSession,
        row: &ToolCall,
        answer_id: &Uuid,
        model: ResolvedModel,
    ) -> DomainResult<()> {
        let all = messages::session_messages(&self.db, session.id).await?;
        let path = tree::path_to(&all, *answer_id);
        let reference = model.reference();
        let system = self.system_prompt(actor, session, &reference).await?;
        let mut request = context::render(&ContextInput {
            system: system.as_deref(),
            path: &path,
            model_reference: &reference,
            model_id: &model.model,
            kind: model.kind,
            params: GenParams::default(),
            mode: Mode::Answer,
            attachments: None,
            files: &[],
        });
        // The waiting call reads as not run yet (see `context`); the question follows it.
        request.messages.push(ChatMessage {
            role: ChatRole::User,
            parts: vec![Part::Text {
                text: format!(
                    "{EXPLAIN_INSTRUCTION}\n\nThe call: {} with arguments {}",
                    row.tool_name, row.arguments
                ),
            }],
        });
        let started = Instant::now();
        let (text, usage) =
            match super::stream::side_call(&model, &request, EXPLAIN_MAX_CHARS, EXPLAIN_TIMEOUT).await {
                Ok(done) => done,
                Err(super::stream::SideCallError::Failed(message)) => {
                    return Err(DomainError::Conflict(message));
                }
                Err(super::stream::SideCallError::TimedOut) => {
                    return Err(DomainError::Conflict("The model took too long to explain the call.".into()));
                }
            };
        if let Some(u) = usage {
            let priced = crate::domain::sessions::tree::MessageUsage::priced(&u, &model.info, false);
            self.record_call(actor.user_id(), (session.id, *answer_id), &model, priced, started).await;
        }
        let text = text.trim();
        let text = if text.is_empty() { "The model gave no explanation." } else { text };
        repo::set_explanation(&self.db, row.id, text).await?;
        Ok(())
    }
}

/// A waiting call as the confirmation dialog shows it.
#[derive(Debug, Clone, serde::Serialize)]
pub struct PendingCall {
    /// Row id (the dialog's).
    pub id: Uuid,
    /// Tool name.
    pub tool: String,
    /// read, write, exec or network.
    pub risk: String,
    /// The exact arguments, pretty-printed.
    pub arguments: String,
    /// What the tool says it does, as the model was offered it (an MCP server's own words).
    pub description: Option<String>,
    /// The model's explanation, when asked for.
    pub explanation: Option<String>,
    /// The answer holding the call.
    pub message_id: Uuid,
}

/// A call's state as the dialog (or its resolved card) shows it.
#[derive(Debug, Clone, serde::Serialize)]
pub struct CallState {
    /// The call.
    pub call: PendingCall,
    /// proposed, approved, denied, executed or failed.
    pub status: String,
    /// What was decided (yes, no, no_continue, always, auto, rule).
    pub decision: Option<String>,
    /// When, for display.
    pub decided: Option<String>,
    /// The result message, once there is one.
    pub result_message_id: Option<Uuid>,
    /// The unified diff of the file it changed.
    pub diff: Option<String>,
    /// Who decided, when a person did (every open page of a shared session shows it).
    pub decided_by: Option<String>,
}

fn call_state_of(row: &ToolCall, names: &std::collections::HashMap<Uuid, String>) -> CallState {
    CallState {
        call: pending_view(row),
        status: row.status.clone(),
        decision: row.decision.clone(),
        decided: row.decided_at.map(|t| t.format("%H:%M:%S UTC").to_string()),
        result_message_id: row.result_message_id,
        diff: row.diff.clone(),
        decided_by: row
            .decided_by
            .map(|id| names.get(&id).cloned().unwrap_or_else(|| "a former member".into())),
    }
}

pub(super) fn pending_view(row: &ToolCall) -> PendingCall {
    let arguments = serde_json::from_str::<Value>(&row.arguments)
        .ok()
        .and_then(|v| serde_json::to_string_pretty(&v).ok())
        .unwrap_or_else(|| row.arguments.clone());
    PendingCall {
        id: row.id,
        tool: row.tool_name.clone(),
        risk: row.risk.clone(),
        arguments,
        description: row.tool_description.clone().filter(|d| !d.trim().is_empty()),
        explanation: row.explanation.clone(),
        message_id: row.message_id,
    }
}

impl RunEngine {
    /// The call of one of the actor's sessions waiting for a decision, if any.
    pub async fn pending_call(&self, actor: &Actor, session_id: Uuid) -> DomainResult<Option<PendingCall>> {
        let (session, _) = self.sessions.view_session(actor, session_id).await?;
        Ok(repo::pending_call(&self.db, session.id).await?.as_ref().map(pending_view))
    }

    /// One call of one of the actor's sessions.
    pub async fn call_state(
        &self,
        actor: &Actor,
        session_id: Uuid,
        call_id: Uuid,
    ) -> DomainResult<CallState> {
        let db = &self.db;
        let (session, _) = self.sessions.view_session(actor, session_id).await?;
        let row = repo::find_call(db, session.id, call_id).await?.ok_or(DomainError::NotFound)?;
        let names =
            crate::domain::accounts::names(db, &row.decided_by.into_iter().collect::<Vec<_>>()).await?;
        Ok(call_state_of(&row, &names))
    }

    /// Every recorded call of one of the actor's sessions, keyed by its result message (for cards).
    pub async fn calls_by_result(
        &self,
        actor: &Actor,
        session_id: Uuid,
    ) -> DomainResult<std::collections::HashMap<Uuid, CallState>> {
        let (session, _) = self.sessions.view_session(actor, session_id).await?;
        self.calls_by_result_in(&session).await
    }

    /// [`Self::calls_by_result`] in a session the caller was just given by a check of the
    /// actor's access.
    pub(crate) async fn calls_by_result_in(
        &self,
        session: &ChatSession,
    ) -> DomainResult<std::collections::HashMap<Uuid, CallState>> {
        let db = &self.db;
        let rows = repo::calls_of_session(db, session.id).await?;
        let mut deciders: Vec<Uuid> = rows.iter().filter_map(|r| r.decided_by).collect();
        deciders.sort_unstable();
        deciders.dedup();
        let names = crate::domain::accounts::names(db, &deciders).await?;
        Ok(rows.iter().filter_map(|row| Some((row.result_message_id?, call_state_of(row, &names)))).collect())
    }
}
