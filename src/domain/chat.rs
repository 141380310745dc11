//! Workspaces and chat sessions, always read through the acting user.

use serde::Serialize;
use uuid::Uuid;

use super::accounts::Actor;
use super::{DomainError, DomainResult};
use crate::storage::Db;
use crate::storage::repos::chat as repo;

/// A workspace as shown to its owner.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Workspace {
    /// Stable id.
    pub id: Uuid,
    /// Owner's user id.
    pub owner_id: Uuid,
    /// Display name.
    pub name: String,
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

/// The actor's session with this id; someone else's is `NotFound`.
pub async fn get_session(db: &Db, actor: &Actor, session_id: Uuid) -> DomainResult<ChatSession> {
    repo::find_session(db, actor.user_id, session_id).await?.ok_or(DomainError::NotFound)
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
}
