//! The run engine: a reply is a tokio task owned by the run registry, never by a request.
//!
//! Submit writes the user turn, the assistant placeholder and the run in one transaction, then
//! spawns the task. The task streams from the provider, publishes coalesced deltas to the
//! registry, writes the partial text at least every `flush` interval, and records the outcome
//! (complete, stopped or failed) with its usage before publishing the end of the stream.

pub mod agent_loop;
pub mod ambient;
mod answer;
mod assembly;
pub mod compaction;
pub mod context;
pub mod decisions;
mod images;
mod lease;
mod preparation;
mod recovery;
mod stream;
pub mod subagent;
pub mod tasks;
mod toolset;
pub mod window;
mod written;

pub(crate) use answer::{Accumulator, End};
pub use recovery::{CallProgress, UnfinishedCall};
pub use stream::clean_title;
pub use written::Written;

use std::sync::Arc;
use std::time::Duration;

use futures_util::StreamExt;
use tokio::time::Instant;
use uuid::Uuid;

use crate::domain::accounts::Actor;
use crate::domain::agent::{AgentSettings, OfferedTool};
use crate::domain::providers::describe_error;
use crate::domain::providers::{Providers, ResolvedModel};
use crate::domain::runs::agent_loop::Start;
use crate::domain::runs::context::{ContextInput, Mode};
use crate::domain::runs::preparation::Files;

use crate::domain::sessions::tree::{self, Message, MessageStatus, MessageUsage, Role};
use crate::domain::sessions::{self, ChatSession};
use crate::domain::{DomainError, DomainResult};
use crate::events::{RunEvent, RunPublisher, RunRegistry};
use crate::providers::types::{ChatRequest, GenParams, Part, ProviderEvent, Usage};
use crate::storage::Db;
use crate::storage::repos::agent as agent_repo;
use crate::storage::repos::messages::{self as repo, NewMessage, NewRun, Outcome};

/// Longest message accepted from the composer, in characters.
pub const MAX_MESSAGE_CHARS: usize = 200_000;

/// Timing of a run's updates.
#[derive(Debug, Clone, Copy)]
pub struct Pacing {
    /// Text arriving within this window after an update is sent together.
    pub coalesce: Duration,
    /// Partial text is written to the database at least this often.
    pub flush: Duration,
}

/// Starts, stops and resumes runs.
#[derive(Clone)]
pub struct RunEngine {
    pub(super) db: Db,
    pub(super) sessions: sessions::Sessions,
    pub(super) registry: RunRegistry,
    providers: Arc<Providers>,
    pacing: Pacing,
    pub(super) data_dir: Arc<std::path::PathBuf>,
    infer_titles: bool,
    pub(super) agent_settings: Arc<AgentSettings>,
    /// The agent's rules, todos and memory.
    pub(super) agent: crate::domain::agent::Agent,
    pub(super) mcp: Option<crate::domain::mcp::runtime::SharedMcp>,
    /// Attached files (sent to models, recalled, generated), with the limits of uploads.
    pub(super) files: Option<crate::domain::files::Files>,
    pub(super) search: Option<std::sync::Arc<crate::domain::search::SearchService>>,
    /// With other instances on the database: how long this instance's lease lasts.
    pub(super) lease: Option<Duration>,
    /// What running calls hold of their members' token and dollar quotas.
    pub(super) quotas: crate::domain::admin::quotas::QuotaGate,
    /// The built-in tools a run offers, made once for each combination of what decides them
    /// (their specs and digests do not change while the process runs).
    tool_sets: Arc<toolset::ToolSets>,
}

/// What a submit, retry or continue produced.
#[derive(Debug, Clone)]
pub struct Started {
    /// The user message (submit only).
    pub user_message_id: Option<Uuid>,
    /// The assistant message being written.
    pub assistant_message_id: Uuid,
    /// False when this was a repeat of an earlier submit (same client id).
    pub created: bool,
    /// Whether the messages may carry files: uploads came with the question, or the messages
    /// were there before. A new answer's placeholder has none, so its page need not look.
    pub may_have_files: bool,
    /// What a new submit wrote (none for a repeated submit, a retry or a continue): its page is
    /// drawn from this instead of reading it back.
    pub written: Option<Written>,
}

/// A run ready to be driven.
pub(super) struct Job {
    pub(super) actor: Actor,
    pub(super) session_id: Uuid,
    /// The session's workspace (a session never moves to another one).
    pub(super) workspace_id: Uuid,
    pub(super) owner_id: Uuid,
    pub(super) run_id: Uuid,
    /// The message being written now (an answer or a tool result).
    pub(super) message_id: Uuid,
    pub(super) model: ResolvedModel,
    /// The request of the next model call.
    pub(super) request: ChatRequest,
    /// The rendered system prompt, for the requests after tool calls.
    pub(super) system: Option<String>,
    /// Generation settings, likewise.
    pub(super) params: GenParams,
    /// The tools offered (none when the model cannot call tools).
    pub(super) tools: Arc<Vec<OfferedTool>>,
    /// Content already there (a continued answer) that new text is appended to.
    pub(super) parts: Vec<Part>,
    /// Usage already recorded on the message (a continued answer).
    pub(super) prior_usage: Option<MessageUsage>,
    /// The session's first message, when this answer should be followed by a proposed title.
    pub(super) first_question: Option<String>,
    /// The next model call is already counted in the run's `iterations` (a new run's first).
    pub(super) next_call_counted: bool,
}

/// Checks a composer client id: 1-64 characters of `[A-Za-z0-9_-]`.
pub fn valid_client_id(id: &str) -> bool {
    (1..=64).contains(&id.len()) && id.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'-' || b == b'_')
}

/// The empty, streaming answer a run writes into.
fn answer_placeholder(id: Uuid, parent: Uuid, reference: &str, author: Uuid) -> NewMessage<'_> {
    NewMessage {
        id,
        parent_id: Some(parent),
        role: Role::Assistant,
        parts: &[],
        model: Some(reference),
        status: MessageStatus::Streaming,
        client_id: None,
        author_id: Some(author),
    }
}

/// The refusal of a new message while a tool call waits for the member's decision.
fn paused_refusal() -> DomainError {
    DomainError::Conflict(
        "A tool call is waiting for your decision: answer it (or stop the run) first.".into(),
    )
}

fn busy() -> DomainError {
    DomainError::Conflict("A reply is still being written: stop it or wait for it to finish.".into())
}

/// Whose session a run is in, kept with the live run so the page that follows it is
/// authorized without reading the session again.
fn session_of(session: &ChatSession) -> crate::events::SessionOf {
    crate::events::SessionOf { owner_id: session.owner_id, workspace_id: session.workspace_id }
}

/// A run that could not begin, in the person's terms.
fn begin_refused(e: crate::events::BeginError) -> DomainError {
    match e {
        crate::events::BeginError::AlreadyRunning => busy(),
        crate::events::BeginError::TooMany { max } => DomainError::Limited(
            format!(
                "You have {max} replies being written at once, the most allowed: wait for one to finish."
            ),
            5,
        ),
    }
}

fn gen_params(session: &ChatSession) -> GenParams {
    // Settings saved by an older version or edited by hand fall back to provider defaults.
    serde_json::from_value(session.params.clone()).unwrap_or_default()
}

impl RunEngine {
    /// A new session in `workspace` (the actor's default workspace when none), started by its
    /// first message; returns its id. The same `client_id` twice opens the session the first
    /// made. A first message that is refused leaves no session behind.
    pub async fn start_session(
        &self,
        actor: &Actor,
        workspace: Option<Uuid>,
        text: &str,
        client_id: &str,
        model: Option<&str>,
    ) -> DomainResult<Uuid> {
        if let Some(existing) = self.sessions.session_by_client_id(actor, client_id).await? {
            return Ok(existing);
        }
        if text.trim().is_empty() {
            return Err(DomainError::Invalid("Write a message first.".into()));
        }
        let workspace = match workspace {
            Some(id) => self.sessions.view_workspace(actor, id).await?.0,
            None => self.sessions.default_workspace(actor).await?,
        };
        let session = self.sessions.create_session(actor, workspace.id, &sessions::title_from(text)).await?;
        match self.submit(actor, session.id, text, client_id, model).await {
            Ok(_) => Ok(session.id),
            Err(e) => {
                // Nothing was sent: the empty session goes again.
                if let Err(del) = self.sessions.delete_session(actor, session.id).await {
                    tracing::warn!(error = %del, "could not remove an empty session");
                }
                Err(e)
            }
        }
    }

    /// Appends a user message at the end of the active path and starts its reply. A repeated
    /// submit with the same `client_id` returns the first one's messages and starts nothing.
    pub async fn submit(
        &self,
        actor: &Actor,
        session_id: Uuid,
        text: &str,
        client_id: &str,
        model: Option<&str>,
    ) -> DomainResult<Started> {
        self.submit_at(actor, session_id, None, text, client_id, model, &[]).await
    }

    /// [`Self::submit`] with files the actor uploaded, which become the message's attachments
    /// in the same transaction (an upload that is not the actor's is refused, nothing written).
    pub async fn submit_with_files(
        &self,
        actor: &Actor,
        session_id: Uuid,
        text: &str,
        client_id: &str,
        model: Option<&str>,
        uploads: &[Uuid],
    ) -> DomainResult<Started> {
        self.submit_at(actor, session_id, None, text, client_id, model, uploads).await
    }

    /// Edits a user message: the new text becomes a sibling of it (the old branch stays) and is
    /// answered. Idempotent by `client_id` like a submit.
    pub async fn edit(
        &self,
        actor: &Actor,
        session_id: Uuid,
        message_id: Uuid,
        text: &str,
        client_id: &str,
        model: Option<&str>,
    ) -> DomainResult<Started> {
        self.submit_at(actor, session_id, Some(message_id), text, client_id, model, &[]).await
    }

    /// A submit at the end of the active path, or (`replacing`) beside a user message.
    #[allow(clippy::too_many_arguments)]
    async fn submit_at(
        &self,
        actor: &Actor,
        session_id: Uuid,
        replacing: Option<Uuid>,
        text: &str,
        client_id: &str,
        model: Option<&str>,
        uploads: &[Uuid],
    ) -> DomainResult<Started> {
        // The session, the same submit again and a run waiting for a decision, in one statement;
        // the actor's access is checked on the row as always.
        let (row, repeated, paused) =
            crate::storage::repos::run_state::session_for_submit(&self.db, session_id, client_id).await?;
        let (session, role) =
            sessions::access::session_row_as(&self.db, actor, row, sessions::access::ShareRole::Editor)
                .await?;
        if !valid_client_id(client_id) {
            return Err(DomainError::Invalid("The form is out of date: reload the page.".into()));
        }
        if let Some(user_id) = repeated {
            return self.started_by(session.id, user_id).await;
        }
        let text = text.trim();
        if text.is_empty() && uploads.is_empty() {
            return Err(DomainError::Invalid("Write a message first.".into()));
        }
        crate::domain::files::check_uploads(&self.db, actor, uploads).await?;
        if text.chars().count() > MAX_MESSAGE_CHARS {
            return Err(DomainError::Invalid(format!(
                "The message is longer than {MAX_MESSAGE_CHARS} characters."
            )));
        }
        if paused {
            return Err(paused_refusal());
        }
        let reference = self.pick_model(actor, &session, model).await?;
        let resolved = self.admit(actor, &session, &reference).await?;
        let system = self.system_prompt(actor, &session, &reference).await?;

        let run_id = Uuid::now_v7();
        let (user_id, assistant_id) = (Uuid::now_v7(), Uuid::now_v7());
        let publisher =
            match self.registry.begin_owned(actor.user_id(), session.id, run_id, Some(assistant_id)) {
                Ok(p) => p.in_session_of(session_of(&session)),
                Err(e @ crate::events::BeginError::TooMany { .. }) => return Err(begin_refused(e)),
                Err(_) => {
                    // The same submit may be a moment ahead of us, its turn not yet written.
                    for _ in 0..20 {
                        tokio::time::sleep(Duration::from_millis(50)).await;
                        if let Some(existing) = self.repeated_submit(session.id, client_id).await? {
                            return Ok(existing);
                        }
                    }
                    return Err(busy());
                }
            };
        // With whether the session has files, in the same read: the path and that answer are
        // of one moment (a run that just ended may have attached images to its answer).
        let (all, has_files) = repo::session_messages_and_files(&self.db, session.id).await?;
        let leaf = match replacing {
            None => tree::active_path(&all, session.active_root_id).last().map(|m| m.id),
            Some(id) => match all.iter().find(|m| m.id == id) {
                Some(old) if old.role == Role::User => old.parent_id,
                Some(_) => {
                    publisher.abandon();
                    return Err(DomainError::Invalid("Only your own messages can be edited.".into()));
                }
                None => {
                    publisher.abandon();
                    return Err(DomainError::NotFound);
                }
            },
        };
        let mut path = leaf.map(|l| tree::path_to(&all, l)).unwrap_or_default();
        // A new message at the end of a context near the model's window: compress first.
        let summary = match replacing {
            None => self.compact_if_needed(actor, &session, &path, &resolved, text.len()).await,
            Some(_) => None,
        };
        let leaf = match summary {
            Some(s) => {
                let id = s.id;
                path.push(s);
                Some(id)
            }
            None => leaf,
        };
        // Folders changed since the last message: a note goes first, for the model.
        let note_id = Uuid::now_v7();
        let note_parts = session.env_note.iter().map(|n| Part::Text { text: n.clone() }).collect::<Vec<_>>();
        let note = session.env_note.as_ref().map(|_| NewMessage {
            id: note_id,
            parent_id: leaf,
            role: Role::System,
            parts: &note_parts,
            model: None,
            status: MessageStatus::Complete,
            client_id: None,
            author_id: None,
        });
        let user_parent = if note.is_some() { Some(note_id) } else { leaf };
        let user_parts = vec![Part::Text { text: text.to_string() }];
        let user = NewMessage {
            id: user_id,
            parent_id: user_parent,
            role: Role::User,
            parts: &user_parts,
            model: None,
            status: MessageStatus::Complete,
            client_id: Some(client_id),
            author_id: Some(actor.user_id()),
        };
        let assistant = answer_placeholder(assistant_id, user_id, &reference, actor.user_id());
        let run = NewRun {
            id: run_id,
            owner_id: actor.user_id(),
            leaf_message_id: user_id,
            assistant_message_id: assistant_id,
        };
        let version = match repo::insert_noted_turn(
            &self.db,
            session.id,
            note.as_ref(),
            &user,
            &assistant,
            &run,
            uploads,
        )
        .await
        {
            Ok(version) => version,
            Err(e) => {
                publisher.abandon();
                // Two identical submits raced: the other one won the unique client id.
                if let Some(existing) = self.repeated_submit(session.id, client_id).await? {
                    return Ok(existing);
                }
                return Err(e.into());
            }
        };
        path.extend(note.as_ref().map(|n| written::message(session.id, n, Some(user_id))));
        let question = written::message(session.id, &user, Some(assistant_id));
        path.push(question.clone());
        let first = leaf.is_none().then(|| if note.is_some() { note_id } else { user_id });
        let written = Written {
            session: written::session_after(&session, version, &reference, note.is_some(), first),
            role,
            messages: vec![question, written::message(session.id, &assistant, None)],
        };
        // A session without files before this post has none now but the uploads it brought.
        let files = match has_files || !uploads.is_empty() {
            true => Files::Look,
            false => Files::NoneAttached,
        };
        self.launch(
            actor,
            &session,
            system.as_deref(),
            &path,
            resolved,
            Mode::Answer,
            files,
            (run_id, assistant_id),
            None,
            publisher,
        )
        .await;
        Ok(Started {
            user_message_id: Some(user_id),
            assistant_message_id: assistant_id,
            created: true,
            may_have_files: !uploads.is_empty(),
            written: Some(written),
        })
    }

    async fn repeated_submit(&self, session_id: Uuid, client_id: &str) -> DomainResult<Option<Started>> {
        match repo::find_by_client_id(&self.db, session_id, client_id).await? {
            Some(user) => self.started_by(session_id, user.id).await.map(Some),
            None => Ok(None),
        }
    }

    /// What an earlier submit that made the user message `user_id` started.
    async fn started_by(&self, session_id: Uuid, user_id: Uuid) -> DomainResult<Started> {
        let all = repo::session_messages(&self.db, session_id).await?;
        // The reply the submit started: the first assistant child of the user message.
        let answer = all
            .iter()
            .filter(|m| m.parent_id == Some(user_id) && m.role == Role::Assistant)
            .min_by_key(|m| (m.created_at, m.id))
            .map(|m| m.id)
            .ok_or(DomainError::NotFound)?;
        Ok(Started {
            user_message_id: Some(user_id),
            assistant_message_id: answer,
            created: false,
            may_have_files: true,
            written: None,
        })
    }

    /// Writes a new answer to the user message that `message_id` answers, as a sibling of it.
    pub async fn retry(&self, actor: &Actor, session_id: Uuid, message_id: Uuid) -> DomainResult<Started> {
        let session = self.sessions.get_session(actor, session_id).await?;
        let all = repo::session_messages(&self.db, session.id).await?;
        let old = all.iter().find(|m| m.id == message_id).ok_or(DomainError::NotFound)?;
        if old.role != Role::Assistant {
            return Err(DomainError::Invalid("Only an answer can be tried again.".into()));
        }
        let parent = old.parent_id.ok_or(DomainError::NotFound)?;
        self.not_paused(session.id).await?;
        let reference = self.pick_model(actor, &session, old.model.as_deref()).await?;
        let resolved = self.admit(actor, &session, &reference).await?;
        let system = self.system_prompt(actor, &session, &reference).await?;
        let (run_id, assistant_id) = (Uuid::now_v7(), Uuid::now_v7());
        let publisher = self
            .registry
            .begin_owned(actor.user_id(), session.id, run_id, Some(assistant_id))
            .map_err(begin_refused)?
            .in_session_of(session_of(&session));
        let assistant = answer_placeholder(assistant_id, parent, &reference, actor.user_id());
        let run = NewRun {
            id: run_id,
            owner_id: actor.user_id(),
            leaf_message_id: parent,
            assistant_message_id: assistant_id,
        };
        if let Err(e) = repo::insert_answer(&self.db, session.id, &assistant, &run).await {
            publisher.abandon();
            return Err(e.into());
        }
        let path = tree::path_to(&all, parent);
        self.launch(
            actor,
            &session,
            system.as_deref(),
            &path,
            resolved,
            Mode::Answer,
            Files::Look,
            (run_id, assistant_id),
            None,
            publisher,
        )
        .await;
        Ok(Started {
            user_message_id: None,
            assistant_message_id: assistant_id,
            created: true,
            may_have_files: false,
            written: None,
        })
    }

    /// Resumes an interrupted, stopped or failed answer from its partial text.
    pub async fn resume(&self, actor: &Actor, session_id: Uuid, message_id: Uuid) -> DomainResult<Started> {
        let session = self.sessions.get_session(actor, session_id).await?;
        let all = repo::session_messages(&self.db, session.id).await?;
        let old = all.iter().find(|m| m.id == message_id).ok_or(DomainError::NotFound)?;
        if old.role != Role::Assistant || !old.status.can_continue() {
            return Err(DomainError::Conflict("This answer is not waiting to be continued.".into()));
        }
        if old.text().trim().is_empty() {
            // Nothing to continue from: a fresh answer is the same thing.
            return self.retry(actor, session_id, message_id).await;
        }
        self.not_paused(session.id).await?;
        let reference = self.pick_model(actor, &session, old.model.as_deref()).await?;
        let resolved = self.admit(actor, &session, &reference).await?;
        let system = self.system_prompt(actor, &session, &reference).await?;
        let run_id = Uuid::now_v7();
        let publisher = self
            .registry
            .begin_owned(actor.user_id(), session.id, run_id, Some(old.id))
            .map_err(begin_refused)?
            .in_session_of(session_of(&session));
        let run = NewRun {
            id: run_id,
            owner_id: actor.user_id(),
            leaf_message_id: old.parent_id.unwrap_or(old.id),
            assistant_message_id: old.id,
        };
        if let Err(e) = repo::resume_message(&self.db, session.id, old.id, &run).await {
            publisher.abandon();
            return Err(e.into());
        }
        let path = tree::path_to(&all, old.id);
        self.launch(
            actor,
            &session,
            system.as_deref(),
            &path,
            resolved,
            Mode::Continue,
            Files::Look,
            (run_id, old.id),
            Some(old),
            publisher,
        )
        .await;
        Ok(Started {
            user_message_id: None,
            assistant_message_id: old.id,
            created: true,
            may_have_files: true,
            written: None,
        })
    }

    /// Asks the session's live run to stop; its partial answer is kept. A run waiting for a
    /// decision ends with its call refused.
    pub async fn stop(&self, actor: &Actor, session_id: Uuid) -> DomainResult<bool> {
        let session = self.sessions.get_session(actor, session_id).await?;
        if let Some(run) = agent_repo::paused_run(&self.db, session.id).await? {
            return Ok(agent_repo::cancel_paused(&self.db, run.id, actor.user_id()).await?);
        }
        Ok(self.registry.cancel(session.id))
    }

    /// Refuses to start another reply while a tool call waits for a decision.
    async fn not_paused(&self, session_id: Uuid) -> DomainResult<()> {
        match agent_repo::paused_run(&self.db, session_id).await? {
            Some(_) => Err(paused_refusal()),
            None => Ok(()),
        }
    }
}

#[cfg(test)]
mod tests;
