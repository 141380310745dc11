//! Workspaces and chat sessions, always read through the acting user.

use serde::Serialize;
use uuid::Uuid;

use super::accounts::Actor;
use super::tree::{self, Message, MessageUsage};
use super::{DomainError, DomainResult};
use crate::storage::Db;
use crate::storage::repos::chat as repo;
use crate::storage::repos::messages;

/// A workspace as shown to its owner.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Workspace {
    /// Stable id.
    pub id: Uuid,
    /// Owner's user id.
    pub owner_id: Uuid,
    /// Display name.
    pub name: String,
    /// Default system prompt template for its sessions.
    pub system_prompt: Option<String>,
    /// Default `provider/model` for its sessions.
    pub default_model: Option<String>,
}

/// A chat session as shown to its owner.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct ChatSession {
    /// Stable id.
    pub id: Uuid,
    /// Containing workspace.
    pub workspace_id: Uuid,
    /// Owner's user id.
    pub owner_id: Uuid,
    /// Title shown in the sidebar.
    pub title: String,
    /// System prompt template; the workspace's applies when none.
    pub system_prompt: Option<String>,
    /// `provider/model`; the workspace's default applies when none.
    pub model: Option<String>,
    /// Generation settings as stored (see `providers::types::GenParams`).
    pub params: serde_json::Value,
    /// The first message of the active path.
    pub active_root_id: Option<Uuid>,
}

/// Longest accepted workspace or session name, in characters.
pub const MAX_NAME_CHARS: usize = 200;

fn clean_name(name: &str, what: &str) -> DomainResult<String> {
    let name = name.trim();
    if name.is_empty() {
        return Err(DomainError::Invalid(format!("The {what} needs a name.")));
    }
    if name.chars().count() > MAX_NAME_CHARS {
        return Err(DomainError::Invalid(format!(
            "The {what} name is longer than {MAX_NAME_CHARS} characters."
        )));
    }
    if name.chars().any(char::is_control) {
        return Err(DomainError::Invalid(format!("The {what} name contains control characters.")));
    }
    Ok(name.to_string())
}

/// Creates a workspace owned by the actor.
pub async fn create_workspace(db: &Db, actor: &Actor, name: &str) -> DomainResult<Workspace> {
    let name = clean_name(name, "workspace")?;
    Ok(repo::insert_workspace(db, actor.user_id, &name).await?)
}

/// Creates a session in one of the actor's workspaces.
pub async fn create_session(
    db: &Db,
    actor: &Actor,
    workspace_id: Uuid,
    title: &str,
) -> DomainResult<ChatSession> {
    let title = clean_name(title, "session")?;
    repo::find_workspace(db, actor.user_id, workspace_id).await?.ok_or(DomainError::NotFound)?;
    Ok(repo::insert_session(db, actor.user_id, workspace_id, &title).await?)
}

/// The actor's workspace with this id; someone else's is `NotFound`.
pub async fn get_workspace(db: &Db, actor: &Actor, workspace_id: Uuid) -> DomainResult<Workspace> {
    repo::find_workspace(db, actor.user_id, workspace_id).await?.ok_or(DomainError::NotFound)
}

/// The actor's workspaces, oldest first.
pub async fn list_workspaces(db: &Db, actor: &Actor) -> DomainResult<Vec<Workspace>> {
    Ok(repo::list_workspaces(db, actor.user_id).await?)
}

/// The actor's first workspace, created as "Personal" when there is none.
pub async fn default_workspace(db: &Db, actor: &Actor) -> DomainResult<Workspace> {
    match repo::list_workspaces(db, actor.user_id).await?.into_iter().next() {
        Some(w) => Ok(w),
        None => create_workspace(db, actor, "Personal").await,
    }
}

/// The actor's sessions, most recently active first.
pub async fn recent_sessions(db: &Db, actor: &Actor, limit: u64) -> DomainResult<Vec<ChatSession>> {
    Ok(repo::recent_sessions(db, actor.user_id, limit).await?)
}

/// A title from the first message: its first line, shortened at a word boundary.
pub fn title_from(text: &str) -> String {
    let line = text.lines().map(str::trim).find(|l| !l.is_empty()).unwrap_or("New session");
    if line.chars().count() <= 60 {
        return line.to_string();
    }
    let cut: String = line.chars().take(60).collect();
    let cut = match cut.rfind(' ') {
        Some(i) if i > 20 => &cut[..i],
        _ => cut.as_str(),
    };
    format!("{}…", cut.trim_end())
}

/// The actor's session with this id; someone else's is `NotFound`.
pub async fn get_session(db: &Db, actor: &Actor, session_id: Uuid) -> DomainResult<ChatSession> {
    repo::find_session(db, actor.user_id, session_id).await?.ok_or(DomainError::NotFound)
}

/// Deletes one of the actor's sessions with all its messages and runs.
pub async fn delete_session(db: &Db, actor: &Actor, session_id: Uuid) -> DomainResult<()> {
    let session = get_session(db, actor, session_id).await?;
    repo::delete_session(db, actor.user_id, session.id).await?;
    Ok(())
}

/// A session as its page shows it: the active path and the session's totals.
#[derive(Debug, Clone)]
pub struct Conversation {
    /// The session.
    pub session: ChatSession,
    /// Root first, following the chosen children.
    pub path: Vec<Message>,
    /// Tokens and cost of every answer in the session, on every branch.
    pub totals: MessageUsage,
}

/// The actor's session with its active path.
pub async fn conversation(db: &Db, actor: &Actor, session_id: Uuid) -> DomainResult<Conversation> {
    let session = get_session(db, actor, session_id).await?;
    let all = messages::session_messages(db, session.id).await?;
    let mut totals = MessageUsage { cost_micros: Some(0), ..MessageUsage::default() };
    for u in all.iter().filter_map(|m| m.usage) {
        totals.input += u.input;
        totals.output += u.output;
        totals.cached += u.cached;
        totals.estimated |= u.estimated;
        totals.cost_micros = totals.cost_micros.zip(u.cost_micros).map(|(a, b)| a + b);
    }
    let path = tree::active_path(&all, session.active_root_id);
    Ok(Conversation { session, path, totals })
}

/// One message of the actor's session.
pub async fn message(db: &Db, actor: &Actor, session_id: Uuid, message_id: Uuid) -> DomainResult<Message> {
    let session = get_session(db, actor, session_id).await?;
    messages::find_message(db, session.id, message_id).await?.ok_or(DomainError::NotFound)
}

/// The session a composer submit with this client id created, if the actor made one.
pub async fn session_by_client_id(db: &Db, actor: &Actor, client_id: &str) -> DomainResult<Option<Uuid>> {
    Ok(repo::session_with_client_id(db, actor.user_id, client_id).await?)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_are_trimmed_and_checked() {
        assert_eq!(clean_name("  Research ", "workspace").unwrap(), "Research");
        assert!(clean_name("   ", "workspace").is_err());
        assert!(clean_name(&"x".repeat(MAX_NAME_CHARS + 1), "workspace").is_err());
        assert!(clean_name("a\u{0}b", "workspace").is_err());
        assert!(clean_name(&"é".repeat(MAX_NAME_CHARS), "workspace").is_ok());
    }

    #[test]
    fn titles_come_from_the_first_line() {
        assert_eq!(title_from("\n  Hello there \nmore"), "Hello there");
        assert_eq!(title_from("   "), "New session");
        let long = "word ".repeat(30);
        let t = title_from(&long);
        assert!(t.ends_with('…') && t.chars().count() <= 61, "{t}");
    }
}
