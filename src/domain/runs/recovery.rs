//! Runs a stop left behind: after a crash (at start) and at a graceful shutdown, replies still
//! marked running are marked interrupted with the text they saved; a tool call a stopped,
//! interrupted or failed run left unfinished is offered again ("Run it" or "Skip").

use uuid::Uuid;

use super::RunEngine;
use super::agent_loop::{Decided, calls_in};
use super::decisions::{PendingCall, pending_view};
use crate::domain::accounts::Actor;
use crate::domain::agent::{Decision, RuleScope};
use crate::domain::sessions::tree::{MessageStatus, Role};
use crate::domain::sessions::{ChatSession, tree};
use crate::domain::{DomainError, DomainResult};
use crate::storage::repos::agent as agent_repo;
use crate::storage::repos::messages as repo;

impl RunEngine {
    /// Marks runs a crash left `running` as interrupted; returns how many.
    /// With other instances on the database, only the runs no live instance holds.
    pub async fn recover(&self) -> DomainResult<u64> {
        if self.lease.is_some() {
            return self.join_instances().await;
        }
        Ok(repo::interrupt_orphans(&self.db).await?)
    }

    /// At shutdown, before the server stops serving: every live run is asked to stop and ends
    /// itself as interrupted, with its text, its usage and its end event (so the pages watching
    /// it close their streams); runs begun meanwhile stop at once. Waits at most `within`;
    /// returns how many were live and how many had not ended by then.
    pub async fn stop_for_shutdown(&self, within: std::time::Duration) -> (usize, usize) {
        let live = self.registry.stop_all();
        self.registry.wait_idle(within).await;
        (live, self.registry.len())
    }

    /// At shutdown, once the server stopped serving (the workers' tasks are gone with it): the
    /// runs still marked running (those [`Self::stop_for_shutdown`] could not end in time) are
    /// marked interrupted with the text they saved, so nothing is left "streaming" and Continue
    /// picks them up after the restart. Alone on the database, every run still running is this
    /// instance's; with others, only those it executes. Returns how many.
    pub async fn interrupt_for_shutdown(&self) -> DomainResult<u64> {
        if self.lease.is_some() {
            return self.leave_instances().await;
        }
        Ok(repo::interrupt_orphans(&self.db).await?)
    }
}

/// How far an unfinished call got, as the page says it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "snake_case")]
pub enum CallProgress {
    /// It never started (the run stopped first, or Stop refused it while it waited).
    NotRun,
    /// Stop ended it while it ran: some of its effects may have happened.
    Stopped,
    /// The server stopped while it ran: it may or may not have had its effects.
    Interrupted,
}

/// A tool call a stopped, interrupted or failed run left unfinished at the end of the path:
/// the page offers "Run it" and "Skip", and the run goes on from there.
#[derive(Debug, Clone, serde::Serialize)]
pub struct UnfinishedCall {
    /// The call, as the confirmation dialog shows one.
    pub call: PendingCall,
    /// How far it got.
    pub progress: CallProgress,
}

impl RunEngine {
    /// The first unfinished call of the answer at the end of the session's active path, when
    /// the run that made it has ended (stopped, interrupted or failed); none otherwise.
    pub async fn unfinished_call(
        &self,
        actor: &Actor,
        session_id: Uuid,
    ) -> DomainResult<Option<UnfinishedCall>> {
        let (session, _) = self.sessions.view_session(actor, session_id).await?;
        // Only the latest run can have left one, and only when it ended early (one cheap
        // query; the messages are read only then).
        let latest = agent_repo::latest_run(&self.db, session.id).await?;
        self.unfinished_after(&session, latest).await
    }

    /// The call waiting for a decision in a session the caller was just given by a check of
    /// the actor's access, or else the call its latest run left unfinished: what
    /// [`Self::pending_call`] and [`Self::unfinished_call`] give, with the runs read once.
    pub(crate) async fn calls_to_offer_in(
        &self,
        session: &ChatSession,
    ) -> DomainResult<(Option<PendingCall>, Option<UnfinishedCall>)> {
        let (awaiting, latest) =
            crate::storage::repos::run_state::awaiting_and_latest_run(&self.db, session.id).await?;
        if let Some(run) = awaiting
            && let Some(call) = agent_repo::proposed_call_of(&self.db, run.id).await?
        {
            return Ok((Some(pending_view(&call)), None));
        }
        Ok((None, self.unfinished_after(session, latest).await?))
    }

    /// The call `run`, the session's latest, left unfinished at the end of the active path.
    async fn unfinished_after(
        &self,
        session: &ChatSession,
        run: Option<crate::model::agent::Run>,
    ) -> DomainResult<Option<UnfinishedCall>> {
        let Some(run) = run else { return Ok(None) };
        if !matches!(run.status.as_str(), "cancelled" | "interrupted" | "failed") {
            return Ok(None);
        }
        let all = repo::session_messages(&self.db, session.id).await?;
        let path = tree::active_path(&all, session.active_root_id);
        // The path ends at the answer or at results of its calls.
        let Some(answer) = path.iter().rev().find(|m| m.role != Role::Tool) else { return Ok(None) };
        if answer.role != Role::Assistant || calls_in(&answer.parts).is_empty() {
            return Ok(None);
        }
        let rows = agent_repo::calls_of_message(&self.db, answer.id).await?;
        if rows.first().is_none_or(|first| first.run_id != run.id) {
            return Ok(None);
        }
        for row in &rows {
            let result = row.result_message_id.and_then(|id| all.iter().find(|m| m.id == id));
            let progress = match result.map(|m| m.status) {
                None => CallProgress::NotRun,
                Some(MessageStatus::Stopped) => CallProgress::Stopped,
                Some(MessageStatus::Interrupted | MessageStatus::Streaming) => CallProgress::Interrupted,
                Some(_) if row.status == "proposed" => CallProgress::NotRun,
                Some(_) => continue,
            };
            return Ok(Some(UnfinishedCall { call: pending_view(row), progress }));
        }
        Ok(None)
    }

    /// "Run it" (`Yes`) or "Skip" (`NoContinue`) on the unfinished call [`Self::unfinished_call`]
    /// shows: the run waits on the call again and the decision resumes it, exactly as a
    /// decision in the confirmation dialog would (later calls of the answer are decided by the
    /// approval rules as usual).
    pub async fn resume_call(
        &self,
        actor: &Actor,
        session_id: Uuid,
        call_id: Uuid,
        decision: Decision,
    ) -> DomainResult<Decided> {
        if !matches!(decision, Decision::Yes | Decision::NoContinue) {
            return Err(DomainError::Invalid("Choose \"Run it\" or \"Skip\".".into()));
        }
        let gone = || {
            DomainError::Conflict(
                "This call can no longer be resumed: the conversation went on, or it was resumed already."
                    .into(),
            )
        };
        let unfinished = self.unfinished_call(actor, session_id).await?.ok_or_else(gone)?;
        if unfinished.call.id != call_id {
            return Err(gone());
        }
        let row = agent_repo::find_call(&self.db, session_id, call_id).await?.ok_or(DomainError::NotFound)?;
        if !agent_repo::reopen_call(&self.db, row.run_id, row.id).await? {
            return Err(gone());
        }
        tracing::info!(run = %row.run_id, call = %row.id, decision = decision.as_str(), "an unfinished call is resumed");
        self.decide(actor, session_id, call_id, decision, RuleScope::Session).await
    }
}
