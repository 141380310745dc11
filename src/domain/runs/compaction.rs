//! Managing a long session's context: `/compress` (the model summarises the path into a
//! summary node), automatic compaction before a reply that would not fit, and `/clear` and
//! `/clearblobs` (boundaries written without a model call). Every boundary is a message on the
//! path: the context renderer starts at the nearest one, and what it replaced stays in the tree,
//! visible and searchable; choosing the branch before it undoes it.

use std::time::Duration;

use tokio::time::Instant;
use uuid::Uuid;

use super::stream::{SideCallError, side_call};
use super::{RunEngine, busy, context};
use crate::domain::accounts::Actor;
use crate::domain::providers::ResolvedModel;
use crate::domain::runs::context::{ContextInput, Mode};
use crate::domain::sessions::ChatSession;
use crate::domain::sessions::tree::{self, Message, MessageKind, MessageStatus, MessageUsage, Role};
use crate::domain::{DomainError, DomainResult};
use crate::events::RunPublisher;
use crate::providers::types::{ChatMessage, ChatRole, GenParams, Part};
use crate::storage::repos::messages::{self as repo, NewMessage};
use crate::tools::ToolOutput;

/// What the summary call is told.
const SUMMARY_SYSTEM: &str = "You compress a conversation between a user and an AI assistant (who may \
use tools) so that it can go on from your summary alone. The messages you summarise will not be shown \
again.";

/// What the summary call asks for, after the conversation.
const SUMMARY_INSTRUCTION: &str = "Write a summary of the conversation above, to continue it from this \
summary alone. Use these headings: Goals; Decisions made; Files and their state (paths, what changed); \
Facts and results (names, numbers, commands, errors, identifiers, exactly); Open questions; Next steps. \
Be complete about facts and brief about everything else. Answer with the summary alone.";

/// Longest focus a `/compress` may carry, in characters.
pub const MAX_FOCUS_CHARS: usize = 2_000;
/// Tokens the summary may take.
const SUMMARY_MAX_TOKENS: u32 = 4_096;
/// How long a summary call may take.
const SUMMARY_TIMEOUT: Duration = Duration::from_secs(180);
/// Characters of summary kept at most (a model that ignores the token limit is cut here).
const SUMMARY_MAX_CHARS: usize = 64_000;

/// Characters `read_tool_result` returns at once.
const READ_SLICE_CHARS: usize = 40_000;

/// The default share of a model's window past which a reply is preceded by a compression.
pub const DEFAULT_COMPACT_AT_PERCENT: u8 = 80;

/// What a summary is asked to cover.
#[derive(Debug, Clone, Copy)]
pub(super) enum SummaryAsk<'a> {
    /// The whole context (`/compress`), giving most room to the focus if any.
    Context { focus: &'a str },
    /// A finished task, for the conversation outside it.
    Task { goal: &'a str, instruction: &'a str },
}

/// What `/compress`, `/clear` and `/clearblobs` wrote.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Boundary {
    /// The new message.
    pub message_id: Uuid,
    /// What it is.
    pub kind: MessageKind,
}

/// Holds a session against replies while a boundary is written (released on drop).
pub(super) struct Hold(Option<RunPublisher>);

impl Drop for Hold {
    fn drop(&mut self) {
        if let Some(p) = self.0.take() {
            p.abandon();
        }
    }
}

/// A composer command about the context: `/compress [focus]`, `/clear`, `/clearblobs`,
/// `/task <goal>`, `/finish [summary]`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ContextCommand<'a> {
    /// Summarise the path, optionally with a focus.
    Compress(&'a str),
    /// Start a fresh context.
    Clear,
    /// Stop sending the files attached so far.
    ClearFiles,
    /// Start a task with this goal (see `runs::tasks`).
    Task(&'a str),
    /// Finish the innermost open task, with this summary or (empty) one the model writes.
    Finish(&'a str),
}

impl<'a> ContextCommand<'a> {
    /// The command a composer message is, if it is one.
    pub fn parse(message: &'a str) -> Option<ContextCommand<'a>> {
        let m = message.trim();
        let (word, rest) = m.split_once(char::is_whitespace).map_or((m, ""), |(w, r)| (w, r.trim()));
        match word {
            "/compress" => Some(ContextCommand::Compress(rest)),
            "/clear" if rest.is_empty() => Some(ContextCommand::Clear),
            "/clearblobs" if rest.is_empty() => Some(ContextCommand::ClearFiles),
            "/task" => Some(ContextCommand::Task(rest)),
            "/finish" => Some(ContextCommand::Finish(rest)),
            _ => None,
        }
    }
}

/// Up to `max` characters of `text` from `offset`, headed by where they lie.
pub(super) fn slice_for_model(text: &str, offset: usize, max: usize) -> String {
    let total = text.chars().count();
    let slice: String = text.chars().skip(offset).take(max).collect();
    let end = offset.saturating_add(slice.chars().count()).min(total);
    let more = if end < total { format!("; call again with offset {end} for more") } else { String::new() };
    format!("[characters {}–{end} of {total}{more}]\n{slice}", offset.min(total))
}

impl RunEngine {
    /// Carries out a context command at the end of the session's active path (`/task`, which
    /// starts a reply, is [`Self::start_task`]).
    pub async fn context_command(
        &self,
        actor: &Actor,
        session_id: Uuid,
        command: ContextCommand<'_>,
    ) -> DomainResult<Boundary> {
        match command {
            ContextCommand::Finish(summary) => return self.finish_task(actor, session_id, summary).await,
            ContextCommand::Task(_) => {
                return Err(DomainError::Invalid("A task starts with a message: send /task <goal>.".into()));
            }
            _ => {}
        }
        let session = self.sessions.get_session(actor, session_id).await?;
        self.not_paused(session.id).await?;
        let _hold = self.hold(actor, session.id)?;
        let all = repo::session_messages(&self.db, session.id).await?;
        let path = tree::active_path(&all, session.active_root_id);
        let (kind, text, model, usage) = match command {
            ContextCommand::Compress(focus) => {
                if focus.chars().count() > MAX_FOCUS_CHARS {
                    return Err(DomainError::Invalid(format!(
                        "The focus is longer than {MAX_FOCUS_CHARS} characters."
                    )));
                }
                let reference = self.pick_model(actor, &session, None).await?;
                let resolved = self.admit(actor, &session, &reference).await?;
                let id = Uuid::now_v7();
                let ask = SummaryAsk::Context { focus };
                let (summary, usage) = self.summarise(actor, &session, &path, &resolved, ask, id).await?;
                return self
                    .write_boundary(
                        &session,
                        &path,
                        (id, MessageKind::Summary),
                        &summary,
                        Some(&reference),
                        usage,
                    )
                    .await;
            }
            ContextCommand::Clear => (MessageKind::Clear, "The context was cleared here.", None, None),
            ContextCommand::ClearFiles => {
                (MessageKind::ClearFiles, "Files attached before this point are no longer sent.", None, None)
            }
            // Handled above.
            ContextCommand::Task(_) | ContextCommand::Finish(_) => return Err(DomainError::NotFound),
        };
        if path.is_empty() {
            return Err(DomainError::Invalid("The session is empty: there is nothing to clear yet.".into()));
        }
        self.write_boundary(&session, &path, (Uuid::now_v7(), kind), text, model, usage).await
    }

    /// Before a reply: when the path's context would pass the workspace's share of the model's
    /// window, the path is compressed first and the reply goes below the summary. Returns the
    /// summary written (its parent is the old leaf), or none. A failed compression is logged
    /// and the reply goes ahead uncompressed (the provider says whether it fits).
    pub(super) async fn compact_if_needed(
        &self,
        actor: &Actor,
        session: &ChatSession,
        path: &[Message],
        resolved: &ResolvedModel,
        incoming_chars: usize,
    ) -> Option<Message> {
        let (workspace, _) = self.sessions.view_workspace(actor, session.workspace_id).await.ok()?;
        let percent = workspace.compact_at_percent.unwrap_or(DEFAULT_COMPACT_AT_PERCENT);
        // An image model reads only the question (and cannot write a summary).
        if percent == 0 || path.is_empty() || resolved.info.image_output {
            return None;
        }
        let request = context::render(&ContextInput {
            system: None,
            path,
            model_reference: &resolved.reference(),
            model_id: &resolved.model,
            kind: resolved.kind,
            params: GenParams::default(),
            mode: Mode::Answer,
            attachments: None,
            files: &[],
        });
        let tokens = context::estimate_tokens(context::request_chars(&request) + incoming_chars);
        let limit = u64::from(resolved.info.context_window) * u64::from(percent) / 100;
        if tokens <= limit {
            return None;
        }
        tracing::info!(session = %session.id, tokens, limit, "compressing the context before a reply");
        let id = Uuid::now_v7();
        let (summary, usage) = match self
            .summarise(actor, session, path, resolved, SummaryAsk::Context { focus: "" }, id)
            .await
        {
            Ok(s) => s,
            Err(e) => {
                tracing::warn!(session = %session.id, error = %e, "automatic compaction failed; replying uncompressed");
                return None;
            }
        };
        let text = format!(
            "(Compressed automatically: the conversation had reached about {tokens} tokens of the model's \
             {}-token window.)\n\n{summary}",
            resolved.info.context_window
        );
        let reference = resolved.reference();
        let leaf = path.last()?;
        let written = self
            .write_boundary(session, path, (id, MessageKind::Summary), &text, Some(&reference), usage)
            .await;
        match written {
            Ok(_) => Some(Message {
                id,
                session_id: session.id,
                parent_id: Some(leaf.id),
                chosen_child_id: None,
                role: Role::System,
                kind: MessageKind::Summary,
                parts: vec![Part::Text { text }],
                model: Some(reference),
                status: MessageStatus::Complete,
                error: None,
                usage,
                tokens: None,
                client_id: None,
                author_id: None,
                created_at: chrono::Utc::now(),
            }),
            Err(e) => {
                tracing::warn!(session = %session.id, error = %e, "the automatic summary could not be kept");
                None
            }
        }
    }

    /// `read_tool_result`: a slice of an earlier tool result of this session, whole.
    pub(super) async fn read_tool_result(
        &self,
        session_id: Uuid,
        arguments: &serde_json::Value,
    ) -> ToolOutput {
        let Some(call_id) = arguments.get("call_id").and_then(serde_json::Value::as_str) else {
            return ToolOutput::error("read_tool_result needs \"call_id\": the id of the tool call.");
        };
        let offset = arguments.get("offset").and_then(serde_json::Value::as_u64).unwrap_or(0);
        let offset = usize::try_from(offset).unwrap_or(usize::MAX);
        let messages = match repo::session_messages(&self.db, session_id).await {
            Ok(m) => m,
            Err(e) => return ToolOutput::error(format!("The conversation could not be read: {e}")),
        };
        let found =
            messages.iter().filter(|m| m.role == Role::Tool).flat_map(|m| &m.parts).find_map(|p| match p {
                Part::ToolResult { call_id: id, content, .. } if id == call_id => Some(content),
                _ => None,
            });
        let Some(content) = found else {
            return ToolOutput::error(format!(
                "No tool call with id {call_id:?} has a result in this conversation."
            ));
        };
        ToolOutput::ok(slice_for_model(content, offset, READ_SLICE_CHARS))
    }

    /// Keeps the session from starting a reply while a boundary is written.
    pub(super) fn hold(&self, actor: &Actor, session_id: Uuid) -> DomainResult<Hold> {
        match self.registry.begin_owned(actor.user_id(), session_id, Uuid::now_v7(), None) {
            Ok(p) => Ok(Hold(Some(p))),
            Err(crate::events::BeginError::AlreadyRunning) => Err(busy()),
            Err(e) => Err(super::begin_refused(e)),
        }
    }

    /// The model's summary of `path` from its context's start, with the usage of the call
    /// (recorded against `summary_id`). Nothing is written when the call fails.
    pub(super) async fn summarise(
        &self,
        actor: &Actor,
        session: &ChatSession,
        path: &[Message],
        resolved: &ResolvedModel,
        ask: SummaryAsk<'_>,
        summary_id: Uuid,
    ) -> DomainResult<(String, Option<MessageUsage>)> {
        let window = context::window(path);
        let has_words = path.iter().enumerate().any(|(i, m)| {
            window.sends(i) && matches!(m.role, Role::User | Role::Assistant) && !m.text().trim().is_empty()
        });
        if !has_words {
            return Err(DomainError::Invalid(
                "There is nothing to compress yet: the context has no messages since its start.".into(),
            ));
        }
        let mut request = context::render(&ContextInput {
            system: None,
            path,
            model_reference: &resolved.reference(),
            model_id: &resolved.model,
            kind: resolved.kind,
            params: GenParams { max_output_tokens: Some(SUMMARY_MAX_TOKENS), ..GenParams::default() },
            mode: Mode::Answer,
            attachments: None,
            files: &[],
        });
        request.system = Some(SUMMARY_SYSTEM.into());
        let ask = match ask {
            SummaryAsk::Context { focus: "" } => SUMMARY_INSTRUCTION.to_string(),
            SummaryAsk::Context { focus } => {
                format!("{SUMMARY_INSTRUCTION}\n\nGive most room to this, in the user's words: {focus}")
            }
            SummaryAsk::Task { goal, instruction } => format!("{instruction}\n\nThe task's goal: {goal}"),
        };
        let part = Part::Text { text: ask };
        match request.messages.last_mut() {
            Some(last) if last.role == ChatRole::User => last.parts.push(part),
            _ => request.messages.push(ChatMessage { role: ChatRole::User, parts: vec![part] }),
        }
        let started = Instant::now();
        let (text, usage) = match side_call(resolved, &request, SUMMARY_MAX_CHARS, SUMMARY_TIMEOUT).await {
            Ok(done) => done,
            Err(SideCallError::Failed(message)) => {
                return Err(DomainError::Upstream(format!(
                    "The model could not write the summary ({message}); nothing was changed."
                )));
            }
            Err(SideCallError::TimedOut) => {
                return Err(DomainError::Upstream(
                    "The model took too long to write the summary; nothing was changed.".into(),
                ));
            }
        };
        // Without the provider's figures: estimated, and marked so (as for a reply).
        let usage = match usage {
            Some(u) => MessageUsage::priced(&u, &resolved.info, false),
            None => {
                let estimate = crate::providers::types::Usage {
                    input_tokens: context::estimate_tokens(context::request_chars(&request)),
                    output_tokens: context::estimate_tokens(text.len()),
                    ..Default::default()
                };
                MessageUsage::priced(&estimate, &resolved.info, true)
            }
        };
        self.record_call(actor.user_id(), (session.id, summary_id), resolved, usage, started).await;
        let usage = Some(usage);
        let text: String = text.trim().chars().take(SUMMARY_MAX_CHARS).collect();
        if text.is_empty() {
            return Err(DomainError::Upstream(
                "The model wrote an empty summary; nothing was changed.".into(),
            ));
        }
        Ok((text, usage))
    }

    /// Writes a boundary below the path's last message, as its chosen child.
    pub(super) async fn write_boundary(
        &self,
        session: &ChatSession,
        path: &[Message],
        (id, kind): (Uuid, MessageKind),
        text: &str,
        model: Option<&str>,
        usage: Option<MessageUsage>,
    ) -> DomainResult<Boundary> {
        let parts = vec![Part::Text { text: text.to_string() }];
        let message = NewMessage {
            id,
            parent_id: path.last().map(|m| m.id),
            role: Role::System,
            parts: &parts,
            model,
            status: MessageStatus::Complete,
            client_id: None,
            author_id: None,
        };
        if !repo::insert_boundary(&self.db, session.id, &message, kind, usage).await? {
            return Err(DomainError::Conflict(
                "The session changed meanwhile (a branch was added or chosen): nothing was written; try again."
                    .into(),
            ));
        }
        Ok(Boundary { message_id: id, kind })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn slices_say_where_they_lie() {
        assert_eq!(
            slice_for_model("abcdef", 0, 4),
            "[characters 0–4 of 6; call again with offset 4 for more]\nabcd"
        );
        assert_eq!(slice_for_model("abcdef", 4, 4), "[characters 4–6 of 6]\nef");
        assert_eq!(slice_for_model("ab", usize::MAX, 4), "[characters 2–2 of 2]\n");
    }

    #[test]
    fn context_commands_are_recognised_and_nothing_else() {
        assert_eq!(ContextCommand::parse("/compress"), Some(ContextCommand::Compress("")));
        assert_eq!(
            ContextCommand::parse("  /compress   the API design  "),
            Some(ContextCommand::Compress("the API design"))
        );
        assert_eq!(ContextCommand::parse("/clear"), Some(ContextCommand::Clear));
        assert_eq!(ContextCommand::parse(" /clearblobs "), Some(ContextCommand::ClearFiles));
        assert_eq!(
            ContextCommand::parse("/task  port the parser "),
            Some(ContextCommand::Task("port the parser"))
        );
        assert_eq!(ContextCommand::parse("/finish"), Some(ContextCommand::Finish("")));
        for other in [
            "/clear everything",
            "/compressed",
            "/clearblobsx",
            "compress",
            "/expose x",
            "hello /clear",
            "/tasks",
        ] {
            assert_eq!(ContextCommand::parse(other), None, "{other}");
        }
    }
}
