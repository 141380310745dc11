//! Workspaces and chat sessions, always read through the acting user.

pub mod access;
pub mod activity;
pub mod prompt;
pub mod tree;

use serde::Serialize;
use uuid::Uuid;

use crate::domain::accounts::Actor;
use crate::domain::sessions::access::{ShareRole, session_as, workspace_as};
use crate::domain::sessions::tree::{Message, Role};
use crate::domain::{DomainError, DomainResult};
use crate::providers::types::GenParams;
use crate::storage::Db;
use crate::storage::repos::workspaces::{self as repo, SessionSettings, WorkspaceSettings};

mod branches;
mod library;
mod sidebar;
mod workspaces;
pub use branches::*;
pub use library::*;
pub use sidebar::*;
pub use workspaces::*;

pub use crate::model::sessions::{ChatSession, Workspace};

/// Workspaces, sessions and their trees, read and changed through the acting member: built once
/// in the app state (and by the run engine, transfers and deletions) around the database.
#[derive(Clone)]
pub struct Sessions {
    db: Db,
}

impl Sessions {
    /// The service over `db`.
    pub fn new(db: Db) -> Sessions {
        Sessions { db }
    }
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

/// Sessions shown per sidebar page.
pub const SIDEBAR_PAGE: u64 = 20;

/// Approval modes a workspace or session may choose.
pub const APPROVAL_MODES: [&str; 3] = ["suggest", "auto-edit", "full-auto"];

fn blank_to_none(s: &str) -> Option<&str> {
    let t = s.trim();
    (!t.is_empty()).then_some(t)
}

/// Longest accepted system prompt template, in characters.
pub const MAX_PROMPT_CHARS: usize = 20_000;

async fn check_prompt(prompt: Option<&str>) -> DomainResult<()> {
    if let Some(p) = prompt {
        if p.chars().count() > MAX_PROMPT_CHARS {
            return Err(DomainError::Invalid(format!(
                "The system prompt is longer than {MAX_PROMPT_CHARS} characters."
            )));
        }
        crate::domain::sessions::prompt::check(p).await.map_err(|e| DomainError::Invalid(e.to_string()))?;
    }
    Ok(())
}

/// What a session's settings form sends (missing fields read as blank).
#[derive(Debug, Clone, Default, serde::Deserialize)]
#[serde(default)]
pub struct SessionForm {
    /// System prompt template (blank: the workspace's).
    pub system_prompt: String,
    /// `provider/model` (blank: the workspace default).
    pub model: String,
    /// Temperature (blank: provider default).
    pub temperature: String,
    /// Max output tokens (blank: provider default).
    pub max_output_tokens: String,
    /// `low`, `medium`, `high` or blank.
    pub reasoning_effort: String,
    /// Thinking budget in tokens (blank: none).
    pub thinking_budget: String,
    /// Exposed folders, one per line, relative to the workspace folder.
    pub exposed_roots: String,
    /// Approval mode (blank: the workspace's).
    pub approval_mode: String,
}

fn parse_number<T: std::str::FromStr>(raw: &str, what: &str) -> DomainResult<Option<T>> {
    match blank_to_none(raw) {
        None => Ok(None),
        Some(v) => v.parse().map(Some).map_err(|_| DomainError::Invalid(format!("{what} must be a number."))),
    }
}

/// Generation parameters from the form, checked.
pub fn parse_params(form: &SessionForm) -> DomainResult<GenParams> {
    use crate::providers::types::ReasoningEffort;
    let temperature: Option<f32> = parse_number(&form.temperature, "Temperature")?;
    if temperature.is_some_and(|t| !(0.0..=2.0).contains(&t)) {
        return Err(DomainError::Invalid("Temperature must be between 0 and 2.".into()));
    }
    let max_output_tokens: Option<u32> = parse_number(&form.max_output_tokens, "Max output tokens")?;
    if max_output_tokens == Some(0) {
        return Err(DomainError::Invalid("Max output tokens must be at least 1.".into()));
    }
    let thinking_budget: Option<u32> = parse_number(&form.thinking_budget, "Thinking budget")?;
    let reasoning_effort = match form.reasoning_effort.trim() {
        "" => None,
        "low" => Some(ReasoningEffort::Low),
        "medium" => Some(ReasoningEffort::Medium),
        "high" => Some(ReasoningEffort::High),
        _ => return Err(DomainError::Invalid("Choose a reasoning effort from the list.".into())),
    };
    Ok(GenParams { temperature, max_output_tokens, reasoning_effort, thinking_budget, tool_choice: None })
}

/// Exposed folders from the form: relative, plain names, no `..`.
pub fn parse_roots(raw: &str) -> DomainResult<Vec<String>> {
    let mut out: Vec<String> = Vec::new();
    for line in raw.lines().map(str::trim).filter(|l| !l.is_empty()) {
        // An absolute host folder: allowed only where an admin allowed it (checked by the caller).
        if line.starts_with('/') {
            let clean = line.trim_end_matches('/');
            let ok = clean.len() > 1
                && clean.len() <= 4096
                && clean.split('/').skip(1).all(|seg| !seg.is_empty() && seg != "." && seg != "..")
                && !clean.chars().any(char::is_control);
            if !ok {
                return Err(DomainError::Invalid(format!("\"{line}\" is not a usable host folder path.")));
            }
            if !out.iter().any(|o| o == clean) {
                out.push(clean.to_string());
            }
            continue;
        }
        let clean = line.trim_matches('/');
        let ok = !clean.is_empty()
            && clean.len() <= 200
            && clean
                .split('/')
                .all(|seg| !seg.is_empty() && seg != "." && seg != ".." && !seg.contains('\\'))
            && !clean.chars().any(char::is_control);
        if !ok {
            return Err(DomainError::Invalid(format!(
                "\"{line}\" is not a folder inside the workspace: use a relative path without \"..\"."
            )));
        }
        if !out.iter().any(|o| o == clean) {
            out.push(clean.to_string());
        }
    }
    if out.len() > MAX_ROOTS {
        return Err(DomainError::Invalid(format!("A session exposes at most {MAX_ROOTS} folders.")));
    }
    Ok(out)
}

/// What the model is told when the exposed folders change.
pub fn roots_note(roots: &[String]) -> String {
    if roots.is_empty() {
        "The user changed the exposed folders: none is exposed now, so file and shell tools are off.".into()
    } else {
        format!(
            "The user changed the exposed folders. Exposed now: {}. Paths in file tools start with one of them.",
            roots.join(", ")
        )
    }
}

/// Refuses absolute folders that lie outside every host folder allowed for the workspace.
async fn check_host_roots(db: &Db, workspace_id: Uuid, roots: &[String]) -> DomainResult<()> {
    let host: Vec<&String> = roots.iter().filter(|r| r.starts_with('/')).collect();
    if host.is_empty() {
        return Ok(());
    }
    let allowed = crate::domain::agent::host_roots_of(db, workspace_id).await?;
    for root in host {
        let real = std::fs::canonicalize(root).ok();
        if !real.is_some_and(|r| allowed.iter().any(|a| r.starts_with(a))) {
            return Err(DomainError::Invalid(format!(
                "\"{root}\" is outside the workspace, and no admin allowed it for this workspace."
            )));
        }
    }
    Ok(())
}

/// Most folders one session exposes.
pub const MAX_ROOTS: usize = 20;

/// Whether this is the session's first exchange (one user message, one answer), the moment a
/// title is proposed.
pub fn is_first_exchange(path: &[Message]) -> bool {
    path.len() == 2 && path[0].role == Role::User && path[1].role == Role::Assistant
}

impl Sessions {
    /// Creates a workspace owned by the actor.
    pub async fn create_workspace(&self, actor: &Actor, name: &str) -> DomainResult<Workspace> {
        let db = &self.db;
        let name = clean_name(name, "workspace")?;
        Ok(repo::insert_workspace(db, actor.user_id(), &name).await?)
    }

    /// Creates a session in a workspace the actor owns or edits; it belongs to the workspace's
    /// owner like every session in it.
    pub async fn create_session(
        &self,
        actor: &Actor,
        workspace_id: Uuid,
        title: &str,
    ) -> DomainResult<ChatSession> {
        let db = &self.db;
        let title = clean_name(title, "session")?;
        let (workspace, _) = workspace_as(db, actor, workspace_id, ShareRole::Editor).await?;
        Ok(repo::insert_session(db, workspace.owner_id, workspace.id, &title).await?)
    }

    /// A workspace the actor owns (or holds the owner role in); one they only view or edit is
    /// `Forbidden`, anyone else's `NotFound`.
    pub async fn get_workspace(&self, actor: &Actor, workspace_id: Uuid) -> DomainResult<Workspace> {
        let db = &self.db;
        Ok(workspace_as(db, actor, workspace_id, ShareRole::Owner).await?.0)
    }

    /// A workspace the actor may at least view, with their role in it.
    pub async fn view_workspace(
        &self,
        actor: &Actor,
        workspace_id: Uuid,
    ) -> DomainResult<(Workspace, ShareRole)> {
        let db = &self.db;
        workspace_as(db, actor, workspace_id, ShareRole::Viewer).await
    }

    /// The actor's workspaces, oldest first.
    pub async fn list_workspaces(&self, actor: &Actor) -> DomainResult<Vec<Workspace>> {
        let db = &self.db;
        Ok(repo::list_workspaces(db, actor.user_id()).await?)
    }

    /// The actor's first workspace, created as "Personal" when there is none.
    pub async fn default_workspace(&self, actor: &Actor) -> DomainResult<Workspace> {
        let db = &self.db;
        match repo::list_workspaces(db, actor.user_id()).await?.into_iter().next() {
            Some(w) => Ok(w),
            None => self.create_workspace(actor, "Personal").await,
        }
    }

    /// The actor's sessions, most recently active first.
    pub async fn recent_sessions(&self, actor: &Actor, limit: u64) -> DomainResult<Vec<ChatSession>> {
        let db = &self.db;
        Ok(repo::recent_sessions(db, actor.user_id(), limit).await?)
    }

    /// A session the actor may change (send, branch, edit, regenerate, decide): theirs, or one in a
    /// workspace they edit. A viewer gets `Forbidden`, anyone else `NotFound`.
    pub async fn get_session(&self, actor: &Actor, session_id: Uuid) -> DomainResult<ChatSession> {
        let db = &self.db;
        Ok(session_as(db, actor, session_id, ShareRole::Editor).await?.0)
    }

    /// A session the actor may at least read (and follow live), with their role in it.
    pub async fn view_session(
        &self,
        actor: &Actor,
        session_id: Uuid,
    ) -> DomainResult<(ChatSession, ShareRole)> {
        let db = &self.db;
        session_as(db, actor, session_id, ShareRole::Viewer).await
    }

    /// A session the actor may delete things from: in a workspace they own.
    pub async fn own_session(&self, actor: &Actor, session_id: Uuid) -> DomainResult<ChatSession> {
        let db = &self.db;
        Ok(session_as(db, actor, session_id, ShareRole::Owner).await?.0)
    }

    /// Deletes a session with all its messages and runs (the workspace's owners only).
    pub async fn delete_session(&self, actor: &Actor, session_id: Uuid) -> DomainResult<()> {
        let db = &self.db;
        let session = self.own_session(actor, session_id).await?;
        repo::delete_session(db, session.owner_id, session.id).await?;
        Ok(())
    }

    /// Renames and/or archives one of the actor's sessions (the sessions API's patch); returns
    /// it as it now is.
    pub async fn change_session(
        &self,
        actor: &Actor,
        session_id: Uuid,
        title: Option<&str>,
        archived: Option<bool>,
    ) -> DomainResult<ChatSession> {
        if let Some(title) = title {
            self.rename_session(actor, session_id, title).await?;
        }
        if let Some(archived) = archived {
            self.set_archived(actor, session_id, archived).await?;
        }
        Ok(self.view_session(actor, session_id).await?.0)
    }

    /// Renames one of the actor's sessions (a name the user chose is kept from then on).
    pub async fn rename_session(
        &self,
        actor: &Actor,
        session_id: Uuid,
        title: &str,
    ) -> DomainResult<ChatSession> {
        let db = &self.db;
        let title = clean_name(title, "session")?;
        let session = self.get_session(actor, session_id).await?;
        repo::rename_session(db, session.owner_id, session.id, &title, true).await?;
        self.get_session(actor, session_id).await
    }

    /// Sets a title the model proposed, unless the user has named the session meanwhile.
    pub async fn propose_title(&self, actor: &Actor, session_id: Uuid, title: &str) -> DomainResult<bool> {
        let db = &self.db;
        let title = clean_name(title, "session")?;
        let session = self.get_session(actor, session_id).await?;
        Ok(repo::rename_session(db, session.owner_id, session.id, &title, false).await?)
    }

    /// Archives or restores one of the actor's sessions.
    pub async fn set_archived(&self, actor: &Actor, session_id: Uuid, archived: bool) -> DomainResult<()> {
        let db = &self.db;
        let session = self.get_session(actor, session_id).await?;
        repo::set_archived(db, session.owner_id, session.id, archived).await?;
        Ok(())
    }

    /// One page of a workspace's sessions, most recent first, and whether more follow.
    pub async fn workspace_sessions(
        &self,
        actor: &Actor,
        workspace_id: Uuid,
        archived: bool,
        page: u64,
    ) -> DomainResult<(Vec<ChatSession>, bool)> {
        let (workspace, _) = self.view_workspace(actor, workspace_id).await?;
        let offset = page.saturating_mul(SIDEBAR_PAGE);
        let mut sessions = repo::workspace_sessions(
            &self.db,
            workspace.owner_id,
            workspace.id,
            archived,
            offset,
            SIDEBAR_PAGE + 1,
        )
        .await?;
        let more = sessions.len() as u64 > SIDEBAR_PAGE;
        sessions.truncate(SIDEBAR_PAGE as usize);
        Ok((sessions, more))
    }

    /// Updates one of the actor's sessions' settings.
    pub async fn update_session(
        &self,
        actor: &Actor,
        session_id: Uuid,
        form: &SessionForm,
    ) -> DomainResult<ChatSession> {
        let db = &self.db;
        let session = self.get_session(actor, session_id).await?;
        let system_prompt = blank_to_none(&form.system_prompt);
        check_prompt(system_prompt).await?;
        let params = parse_params(form)?;
        let roots = parse_roots(&form.exposed_roots)?;
        check_host_roots(db, session.workspace_id, &roots).await?;
        let approval_mode = blank_to_none(&form.approval_mode);
        if approval_mode.is_some_and(|m| !APPROVAL_MODES.contains(&m)) {
            return Err(DomainError::Invalid("Choose an approval mode from the list.".into()));
        }
        // Before the first message the system prompt says which folders there are.
        let note =
            (roots != session.exposed_roots && session.active_root_id.is_some()).then(|| roots_note(&roots));
        let settings = SessionSettings {
            env_note: note.as_deref(),
            approval_mode,
            system_prompt,
            model: blank_to_none(&form.model),
            params: serde_json::to_value(&params).unwrap_or_default(),
            exposed_roots: &roots,
        };
        repo::update_session(db, session.owner_id, session.id, &settings).await?;
        let changed = serde_json::json!({
            "model": settings.model, "approval_mode": settings.approval_mode, "params": settings.params,
            "exposed_roots": roots, "system_prompt_changed": system_prompt != session.system_prompt.as_deref(),
        });
        activity::record(db, session.id, actor, "settings", changed).await;
        self.get_session(actor, session_id).await
    }

    /// `/expose path` (or `/unexpose path`) from the composer: adds (or removes) one exposed folder.
    /// Returns the session and what happened, in words.
    pub async fn change_root(
        &self,
        actor: &Actor,
        session_id: Uuid,
        path: &str,
        expose: bool,
    ) -> DomainResult<(ChatSession, String)> {
        let db = &self.db;
        let session = self.get_session(actor, session_id).await?;
        let wanted = parse_roots(path)?;
        if expose {
            check_host_roots(db, session.workspace_id, &wanted).await?;
        }
        let [root] = wanted.as_slice() else {
            return Err(DomainError::Invalid("Name one folder, e.g. /expose notes".into()));
        };
        let mut roots = session.exposed_roots.clone();
        let message = if expose {
            if roots.contains(root) {
                return Err(DomainError::Invalid(format!("\"{root}\" is already exposed.")));
            }
            if roots.len() >= MAX_ROOTS {
                return Err(DomainError::Invalid(format!("A session exposes at most {MAX_ROOTS} folders.")));
            }
            roots.push(root.clone());
            format!("Exposed \"{root}\": the agent may use it from your next message.")
        } else {
            if !roots.contains(root) {
                return Err(DomainError::Invalid(format!("\"{root}\" is not exposed.")));
            }
            roots.retain(|r| r != root);
            format!("\"{root}\" is no longer exposed.")
        };
        let note = session.active_root_id.map(|_| roots_note(&roots));
        repo::set_roots(db, session.owner_id, session.id, &roots, note.as_deref()).await?;
        Ok((self.get_session(actor, session_id).await?, message))
    }

    /// The session a composer submit with this client id created, if the actor made one.
    pub async fn session_by_client_id(&self, actor: &Actor, client_id: &str) -> DomainResult<Option<Uuid>> {
        let db = &self.db;
        Ok(repo::session_with_client_id(db, actor.user_id(), client_id).await?)
    }
}

#[cfg(test)]
mod tests;
