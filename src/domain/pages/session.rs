//! The home page, the session page and the fragments of it that posts and live events answer
//! with (a turn, a finished message, a decided call).

use std::collections::HashMap;
use std::ops::Range;

use uuid::Uuid;

use super::Pages;
use crate::domain::accounts::Actor;
use crate::domain::agent::TodoItem;
use crate::domain::files::FileView;
use crate::domain::providers::ModelChoice;
use crate::domain::runs::ambient::FileInContext;
use crate::domain::runs::decisions::{CallState, PendingCall};
use crate::domain::runs::{Started, UnfinishedCall};
use crate::domain::sessions::access::ShareRole;
use crate::domain::sessions::tree::{Message, MessageStatus, Role};
use crate::domain::sessions::{ChatSession, Conversation, SidebarWorkspace, Workspace};
use crate::domain::{DomainError, DomainResult};
use crate::providers::catalog::ModelInfo;
use crate::providers::types::Part;

/// Messages a session page shows at first, and per "earlier messages" step.
pub const THREAD_WINDOW: usize = 40;

/// The signed-in home page: the composer (where a new session starts, with which model) and
/// the sidebar.
pub struct HomePage {
    /// Models the member may choose.
    pub models: Vec<ModelChoice>,
    /// The member's workspaces and their latest sessions.
    pub sidebar: Vec<SidebarWorkspace>,
    /// Where a new session starts.
    pub workspace: Workspace,
    /// The model chosen in advance: the workspace's, else the member's default.
    pub selected_model: Option<String>,
}

/// A session's header: the conversation (with the window of messages that carry their
/// content), the model it answers with, and what is known of that model (its context window).
pub struct SessionHeader {
    /// The session, its active path and totals.
    pub conversation: Conversation,
    /// The session's model, else the member's default.
    pub selected_model: Option<String>,
    /// What the catalog and the provider say of the selected model.
    pub model_info: Option<ModelInfo>,
}

/// What a page adds to the messages it shows, gathered for all of them at once.
#[derive(Default)]
pub struct MessageExtras {
    /// The session's recorded tool calls, by the id of the message holding their result.
    pub calls: HashMap<Uuid, CallState>,
    /// Attached files, by message.
    pub files: HashMap<Uuid, Vec<FileView>>,
    /// The first message of a sub-agent's work, by the id of the result it hangs below.
    pub side_branches: HashMap<Uuid, Uuid>,
    /// Names of the people other than the reader who wrote the messages, by id (shared
    /// workspaces); a deleted account has none.
    pub authors: HashMap<Uuid, String>,
}

/// The agent's state beside a session: the waiting call, the todo list, the files carried in
/// context and the workspace's approval mode.
pub struct AgentPanel {
    /// The call waiting for a decision.
    pub pending: Option<PendingCall>,
    /// A call a stopped, interrupted or failed run left unfinished (only when none waits).
    pub unfinished: Option<UnfinishedCall>,
    /// The session's todos.
    pub todos: Vec<TodoItem>,
    /// Files carried in context.
    pub context_files: Vec<FileInContext>,
    /// The workspace's approval mode (the session's own setting falls back to it).
    pub workspace_approval_mode: String,
}

/// The whole session page.
pub struct SessionPage {
    /// The session and its header.
    pub header: SessionHeader,
    /// The part of the active path the page shows: `header.conversation.path[window]`.
    pub window: Range<usize>,
    /// The message to show (a search hit), when it is on the active path.
    pub focus: Option<Uuid>,
    /// What the shown messages carry besides their content.
    pub extras: MessageExtras,
    /// The agent's state.
    pub agent: AgentPanel,
    /// Models the member may choose.
    pub models: Vec<ModelChoice>,
    /// The sidebar, when the page draws it.
    pub sidebar: Option<Vec<SidebarWorkspace>>,
}

impl SessionPage {
    /// The message to ask the earlier messages before, when older ones remain.
    pub fn older_before(&self) -> Option<Uuid> {
        older_before(&self.header.conversation, &self.window)
    }
}

/// One finished message as the `done` event shows it, with what the run wrote after it.
pub struct MessagePage {
    /// The session's header (the path as a skeleton, the message with its content: the gauge reads
    /// the path's sizes and usage).
    pub header: SessionHeader,
    /// The message, then what the run wrote after it up to the next message of a person.
    pub messages: Vec<Message>,
    /// What the messages carry besides their content.
    pub extras: MessageExtras,
    /// The agent's state; none when the run's plain answer changed nothing it shows.
    pub agent: Option<AgentPanel>,
}

/// The answer to a post of the composer: the messages it made in their session.
pub struct TurnPage {
    /// The session.
    pub session: ChatSession,
    /// What the reader may do in it.
    pub role: ShareRole,
    /// The session's model, else the member's default (for a fresh composer).
    pub selected_model: Option<String>,
    /// The person's message (when the post made one) and the answer being written.
    pub messages: Vec<Message>,
    /// Their attached files.
    pub files: HashMap<Uuid, Vec<FileView>>,
    /// Models for a fresh composer (empty when none is asked for).
    pub models: Vec<ModelChoice>,
}

/// A session as the sessions API shows it: every path message with its content, the waiting
/// call and whether an answer is being written.
pub struct SessionState {
    /// The session and its active path.
    pub conversation: Conversation,
    /// The call waiting for a decision.
    pub pending: Option<PendingCall>,
    /// Whether an answer is being written now.
    pub running: bool,
}

/// The panel of files carried in a session's context.
pub struct ContextFilesPanel {
    /// The session.
    pub session: ChatSession,
    /// The files carried, and those that could be.
    pub files: Vec<FileInContext>,
}

/// A tool call's confirmation dialog as it stands.
pub struct CallDialog {
    /// The session.
    pub session: ChatSession,
    /// What the reader may do in it.
    pub role: ShareRole,
    /// The call.
    pub call: CallState,
    /// Once decided: the conversation (skeleton) and what the run wrote from the call's result on.
    pub decided: Option<DecidedCall>,
}

/// What a decided call's card shows below it.
pub struct DecidedCall {
    /// The session's active path, for the result's sibling position.
    pub conversation: Conversation,
    /// The call's result and what the run wrote after it.
    pub messages: Vec<Message>,
    /// The session's recorded calls, by result message.
    pub calls: HashMap<Uuid, CallState>,
}

/// The part of the active path a page shows: the `THREAD_WINDOW` messages before `before` (or
/// the end).
pub fn window_of(conversation: &Conversation, before: Option<Uuid>) -> DomainResult<Range<usize>> {
    let end = match before {
        Some(id) => conversation.path.iter().position(|m| m.id == id).ok_or(DomainError::NotFound)?,
        None => conversation.path.len(),
    };
    Ok(end.saturating_sub(THREAD_WINDOW)..end)
}

/// The message to ask the earlier messages before, when the window leaves older ones.
pub fn older_before(conversation: &Conversation, window: &Range<usize>) -> Option<Uuid> {
    (window.start > 0).then(|| conversation.path[window.start].id)
}

/// Whether a message holds a sub-agent's result (its work hangs below it as a side branch).
fn is_subagent_result(m: &Message) -> bool {
    m.role == Role::Tool
        && m.parts.iter().find_map(|p| match p {
            Part::ToolResult { name, .. } => Some(name == "subagent"),
            _ => None,
        }) == Some(true)
}

impl Pages {
    /// The sidebar; a sidebar that cannot be read is logged and shown empty rather than fail
    /// the page around it.
    pub async fn sidebar(&self, actor: &Actor, active: Option<Uuid>) -> Vec<SidebarWorkspace> {
        self.sessions.sidebar(actor, active).await.unwrap_or_else(|e| {
            tracing::warn!(error = %e, "sidebar could not be loaded");
            Vec::new()
        })
    }

    /// The models the member may choose.
    pub(super) async fn models(&self, actor: &Actor) -> Vec<ModelChoice> {
        self.engine.providers().choices(actor).await
    }

    /// The signed-in home page; `workspace` is where a new session starts (the default
    /// workspace when none is given or it is not the member's to write in).
    pub async fn home(&self, actor: &Actor, workspace: Option<Uuid>) -> DomainResult<HomePage> {
        let chosen = match workspace {
            Some(id) => self.sessions.view_workspace(actor, id).await.ok().map(|(w, _)| w),
            None => None,
        };
        let workspace = match chosen {
            Some(w) => w,
            None => self.sessions.default_workspace(actor).await?,
        };
        let selected_model = match workspace.default_model.clone() {
            Some(m) => Some(m),
            None => self.engine.providers().default_model(actor).await,
        };
        Ok(HomePage {
            models: self.models(actor).await,
            sidebar: self.sidebar(actor, None).await,
            workspace,
            selected_model,
        })
    }

    /// A session's header, with the `window` path messages before `before` (or the end)
    /// carrying their content.
    pub async fn header(
        &self,
        actor: &Actor,
        session_id: Uuid,
        before: Option<Uuid>,
        window: usize,
    ) -> DomainResult<SessionHeader> {
        let conversation = self.sessions.conversation_window(actor, session_id, before, window).await?;
        Ok(self.header_of(actor, conversation).await)
    }

    /// The model a session answers with: its own, else the member's default.
    async fn selected_model(&self, actor: &Actor, session: &ChatSession) -> Option<String> {
        match session.model.clone() {
            Some(m) => Some(m),
            None => self.engine.providers().default_model(actor).await,
        }
    }

    /// The header of a conversation: its model, else the member's default, and what is known of it.
    async fn header_of(&self, actor: &Actor, conversation: Conversation) -> SessionHeader {
        let selected_model = self.selected_model(actor, &conversation.session).await;
        let model_info = match selected_model.as_deref() {
            Some(m) => self.engine.model_info(actor, &conversation.session, m).await,
            None => None,
        };
        SessionHeader { conversation, selected_model, model_info }
    }

    /// The session page; with `focus`, the window is placed so that this message (on the active
    /// path) is in it.
    pub async fn session(
        &self,
        actor: &Actor,
        session_id: Uuid,
        focus: Option<Uuid>,
        with_sidebar: bool,
    ) -> DomainResult<SessionPage> {
        // The window ends half a window after the focused message, when that is not the end.
        let before = match focus {
            Some(f) => {
                let skeleton = self.sessions.conversation_window(actor, session_id, None, 0).await?;
                skeleton
                    .path
                    .iter()
                    .position(|m| m.id == f)
                    .and_then(|i| skeleton.path.get(i + THREAD_WINDOW / 2))
                    .map(|m| m.id)
            }
            None => None,
        };
        let header = self.header(actor, session_id, before, THREAD_WINDOW).await?;
        let window = window_of(&header.conversation, before)?;
        let shown = &header.conversation.path[window.clone()];
        let (extras, agent) = self.agent_state(actor, &header.conversation.session, shown).await?;
        let sidebar = match with_sidebar {
            true => Some(self.sidebar(actor, Some(session_id)).await),
            false => None,
        };
        Ok(SessionPage { window, focus, extras, agent, models: self.models(actor).await, sidebar, header })
    }

    /// One finished message of the actor's session with what the run wrote after it. `plain`:
    /// the run that wrote it said this answer is all it wrote (`RunEvent::Done`): then it has no
    /// files, and unless the session exposes folders (whose panel follows the path's window) the
    /// agent's state is as the page shows it, so neither is read.
    pub async fn message(
        &self,
        actor: &Actor,
        session_id: Uuid,
        message_id: Uuid,
        plain: bool,
    ) -> DomainResult<MessagePage> {
        // The skeleton and the message whole in one read; the gauge reads the path's sizes and
        // usage, which the skeleton carries.
        let (conversation, message) = self.sessions.conversation_with(actor, session_id, message_id).await?;
        let header = self.header_of(actor, conversation).await;
        let mut messages = vec![message];
        let content_from = header.conversation.path.len();
        messages.extend(self.run_tail(actor, &header.conversation, message_id, content_from).await?);
        let session = &header.conversation.session;
        let (extras, agent) = match plain && session.exposed_roots.is_empty() {
            true => (self.extras(actor, session, &messages, false).await?, None),
            false => {
                let (extras, agent) = self.agent_state(actor, session, &messages).await?;
                (extras, Some(agent))
            }
        };
        Ok(MessagePage { header, messages, extras, agent })
    }

    /// What a post of the composer answers with: the messages it made (in order) and their
    /// files (read when `started.may_have_files` or the answer already ended); with
    /// `with_models`, the models for a fresh composer. A new submit's own turn is drawn from
    /// what it wrote; anything else (a repeated post, a retry, a continue) is read.
    pub async fn turn(
        &self,
        actor: &Actor,
        session_id: Uuid,
        started: &Started,
        with_models: bool,
    ) -> DomainResult<TurnPage> {
        let ids: Vec<Uuid> =
            started.user_message_id.into_iter().chain([started.assistant_message_id]).collect();
        let (session, role, messages) = match &started.written {
            Some(w) if w.session.id == session_id => (w.session.clone(), w.role, w.messages.clone()),
            _ => {
                let (session, role) = self.sessions.view_session(actor, session_id).await?;
                let messages = self.sessions.messages_in(&session, &ids).await?;
                (session, role, messages)
            }
        };
        // An answer that already ended (an image model can finish before this page is made)
        // may carry files of its own; only one still being written surely has none.
        let ended = messages.iter().any(|m| m.role != Role::User && m.status != MessageStatus::Streaming);
        let files = match started.may_have_files || ended {
            true => self.files.views_of(&ids).await?,
            false => HashMap::new(),
        };
        let selected_model = self.selected_model(actor, &session).await;
        let models = match with_models {
            true => self.models(actor).await,
            false => Vec::new(),
        };
        Ok(TurnPage { session, role, selected_model, messages, files, models })
    }

    /// The panel of files carried in a session's context.
    pub async fn context_files(&self, actor: &Actor, session_id: Uuid) -> DomainResult<ContextFilesPanel> {
        let session = self.sessions.get_session(actor, session_id).await?;
        let files = self.engine.files_in_context_in(&session).await?;
        Ok(ContextFilesPanel { session, files })
    }

    /// A session for the sessions API.
    pub async fn session_state(&self, actor: &Actor, session_id: Uuid) -> DomainResult<SessionState> {
        let conversation = self.sessions.conversation(actor, session_id).await?;
        let pending = self.engine.pending_call(actor, session_id).await?;
        let running = self.engine.is_running(conversation.session.id);
        Ok(SessionState { conversation, pending, running })
    }

    /// A tool call's confirmation dialog: waiting, or decided with what the run wrote since.
    pub async fn call_dialog(
        &self,
        actor: &Actor,
        session_id: Uuid,
        call_id: Uuid,
    ) -> DomainResult<CallDialog> {
        let call = self.engine.call_state(actor, session_id, call_id).await?;
        let (session, role) = self.sessions.view_session(actor, session_id).await?;
        if call.status == "proposed" {
            return Ok(CallDialog { session, role, call, decided: None });
        }
        let conversation = self.sessions.conversation_window(actor, session.id, None, 0).await?;
        let mut messages = Vec::new();
        if let Some(result) =
            call.result_message_id.filter(|id| conversation.path.iter().any(|m| m.id == *id))
        {
            messages.push(self.sessions.message(actor, session.id, result).await?);
            let full_from = conversation.path.len();
            messages.extend(self.run_tail(actor, &conversation, result, full_from).await?);
        }
        let calls = self.engine.calls_by_result_in(&session).await?;
        Ok(CallDialog { session, role, call, decided: Some(DecidedCall { conversation, messages, calls }) })
    }

    /// The messages after `message_id` on the active path, up to the next message of a person:
    /// what a run wrote after it (tool results, the next answer). One read for all of them.
    /// (`full_from`: where the path's messages start carrying their content.)
    async fn run_tail(
        &self,
        actor: &Actor,
        conversation: &Conversation,
        message_id: Uuid,
        full_from: usize,
    ) -> DomainResult<Vec<Message>> {
        let Some(at) = conversation.path.iter().position(|m| m.id == message_id) else {
            return Ok(Vec::new());
        };
        let tail: Vec<&Message> =
            conversation.path.iter().skip(at + 1).take_while(|m| m.role != Role::User).collect();
        if tail.is_empty() {
            return Ok(Vec::new());
        }
        if at + 1 >= full_from {
            return Ok(tail.into_iter().cloned().collect());
        }
        let ids: Vec<Uuid> = tail.iter().map(|m| m.id).collect();
        self.sessions.messages(actor, conversation.session.id, &ids).await
    }

    /// What the agent adds beside the shown messages of a session, and to each of them.
    async fn agent_state(
        &self,
        actor: &Actor,
        session: &ChatSession,
        shown: &[Message],
    ) -> DomainResult<(MessageExtras, AgentPanel)> {
        let (workspace, _) = self.sessions.view_workspace(actor, session.workspace_id).await?;
        let extras = self.extras(actor, session, shown, true).await?;
        // `session` came from the check of the actor's access that read the page's
        // conversation: what follows reads in it without checking again.
        // The call waiting for a decision, or else one a stopped, interrupted or failed run
        // left unfinished (offered again).
        let (pending, unfinished) = self.engine.calls_to_offer_in(session).await?;
        let agent = AgentPanel {
            pending,
            unfinished,
            todos: self.agent.todos(session.id).await?,
            context_files: self.engine.files_in_context_in(session).await?,
            workspace_approval_mode: workspace.approval_mode,
        };
        Ok((extras, agent))
    }

    /// Calls, files (read unless `may_have_files` is false), sub-agent branches and authors of
    /// the shown messages, each in one read.
    async fn extras(
        &self,
        actor: &Actor,
        session: &ChatSession,
        shown: &[Message],
        may_have_files: bool,
    ) -> DomainResult<MessageExtras> {
        // Calls are shown on their results only: a window without one (an answer's end, most
        // pages of a chat) needs none of them.
        let calls = match shown.iter().any(|m| m.role == Role::Tool) {
            true => self.engine.calls_by_result_in(session).await?,
            false => HashMap::new(),
        };
        let ids: Vec<Uuid> = shown.iter().map(|m| m.id).collect();
        let files = match may_have_files {
            true => self.files.views_of(&ids).await?,
            false => HashMap::new(),
        };
        let results: Vec<&Message> = shown.iter().filter(|m| is_subagent_result(m)).collect();
        let side_branches = match results.is_empty() {
            true => HashMap::new(),
            false => self.sessions.side_branches(actor, session.id, &results).await?,
        };
        let reader = actor.user_id();
        let mut others: Vec<Uuid> = shown
            .iter()
            .filter(|m| matches!(m.role, Role::User | Role::Assistant))
            .filter_map(|m| m.author_id)
            .filter(|id| *id != reader)
            .collect();
        others.sort_unstable();
        others.dedup();
        let authors = crate::domain::accounts::names(&self.db, &others).await?;
        Ok(MessageExtras { calls, files, side_branches, authors })
    }
}
