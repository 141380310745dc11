//! Workspaces and chat sessions, always read through the acting user.

pub mod access;
pub mod activity;
pub mod prompt;
pub mod tree;

use serde::Serialize;
use uuid::Uuid;

use crate::domain::accounts::Actor;
use crate::domain::sessions::access::{ShareRole, session_as, workspace_as};
use crate::domain::sessions::tree::{Message, MessageUsage, OverviewRow, Role, Siblings, TreeIndex};
use crate::domain::{DomainError, DomainResult};
use crate::providers::types::GenParams;
use crate::storage::Db;
use crate::storage::repos::messages;
use crate::storage::repos::workspaces::{self as repo, SessionSettings, WorkspaceSettings};

mod library;
mod sidebar;
mod workspaces;
pub use library::*;
pub use sidebar::*;
pub use workspaces::*;

pub use crate::model::sessions::{ChatSession, Workspace};

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
    Ok(repo::insert_workspace(db, actor.user_id(), &name).await?)
}

/// Creates a session in a workspace the actor owns or edits; it belongs to the workspace's
/// owner like every session in it.
pub async fn create_session(
    db: &Db,
    actor: &Actor,
    workspace_id: Uuid,
    title: &str,
) -> DomainResult<ChatSession> {
    let title = clean_name(title, "session")?;
    let (workspace, _) = workspace_as(db, actor, workspace_id, ShareRole::Editor).await?;
    Ok(repo::insert_session(db, workspace.owner_id, workspace.id, &title).await?)
}

/// A workspace the actor owns (or holds the owner role in); one they only view or edit is
/// `Forbidden`, anyone else's `NotFound`.
pub async fn get_workspace(db: &Db, actor: &Actor, workspace_id: Uuid) -> DomainResult<Workspace> {
    Ok(workspace_as(db, actor, workspace_id, ShareRole::Owner).await?.0)
}

/// A workspace the actor may at least view, with their role in it.
pub async fn view_workspace(
    db: &Db,
    actor: &Actor,
    workspace_id: Uuid,
) -> DomainResult<(Workspace, ShareRole)> {
    workspace_as(db, actor, workspace_id, ShareRole::Viewer).await
}

/// The actor's workspaces, oldest first.
pub async fn list_workspaces(db: &Db, actor: &Actor) -> DomainResult<Vec<Workspace>> {
    Ok(repo::list_workspaces(db, actor.user_id()).await?)
}

/// The actor's first workspace, created as "Personal" when there is none.
pub async fn default_workspace(db: &Db, actor: &Actor) -> DomainResult<Workspace> {
    match repo::list_workspaces(db, actor.user_id()).await?.into_iter().next() {
        Some(w) => Ok(w),
        None => create_workspace(db, actor, "Personal").await,
    }
}

/// The actor's sessions, most recently active first.
pub async fn recent_sessions(db: &Db, actor: &Actor, limit: u64) -> DomainResult<Vec<ChatSession>> {
    Ok(repo::recent_sessions(db, actor.user_id(), limit).await?)
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

/// A session the actor may change (send, branch, edit, regenerate, decide): theirs, or one in a
/// workspace they edit. A viewer gets `Forbidden`, anyone else `NotFound`.
pub async fn get_session(db: &Db, actor: &Actor, session_id: Uuid) -> DomainResult<ChatSession> {
    Ok(session_as(db, actor, session_id, ShareRole::Editor).await?.0)
}

/// A session the actor may at least read (and follow live), with their role in it.
pub async fn view_session(
    db: &Db,
    actor: &Actor,
    session_id: Uuid,
) -> DomainResult<(ChatSession, ShareRole)> {
    session_as(db, actor, session_id, ShareRole::Viewer).await
}

/// A session the actor may delete things from: in a workspace they own.
pub async fn own_session(db: &Db, actor: &Actor, session_id: Uuid) -> DomainResult<ChatSession> {
    Ok(session_as(db, actor, session_id, ShareRole::Owner).await?.0)
}

/// Deletes a session with all its messages and runs (the workspace's owners only).
pub async fn delete_session(db: &Db, actor: &Actor, session_id: Uuid) -> DomainResult<()> {
    let session = own_session(db, actor, session_id).await?;
    repo::delete_session(db, session.owner_id, session.id).await?;
    Ok(())
}

/// A session as its page shows it: the active path and the session's totals.
#[derive(Debug, Clone)]
pub struct Conversation {
    /// The session.
    pub session: ChatSession,
    /// Root first, following the chosen children (see [`conversation_window`] for which
    /// messages carry their content).
    pub path: Vec<Message>,
    /// Each path message's place among its siblings, in path order.
    pub siblings: Vec<Siblings>,
    /// How many messages each path message's branch holds (itself and everything below).
    pub branch_sizes: Vec<usize>,
    /// How many messages the session holds on every branch.
    pub message_count: usize,
    /// Tokens and cost of every answer in the session, on every branch.
    pub totals: MessageUsage,
    /// What the actor may do in it (`Owner` in their own workspace).
    pub role: ShareRole,
}

/// The actor's session with its active path, every path message with its content.
pub async fn conversation(db: &Db, actor: &Actor, session_id: Uuid) -> DomainResult<Conversation> {
    conversation_window(db, actor, session_id, None, usize::MAX).await
}

/// The actor's session with its active path, where only the `window` path messages before
/// `before` (or the end) carry their content: the tree is walked on the messages' skeletons, so
/// a long session's page does not load every message's text.
pub async fn conversation_window(
    db: &Db,
    actor: &Actor,
    session_id: Uuid,
    before: Option<Uuid>,
    window: usize,
) -> DomainResult<Conversation> {
    let (session, role) = view_session(db, actor, session_id).await?;
    // Two independent reads, on two pooled connections at once.
    let (all, totals) = tokio::try_join!(
        messages::session_skeleton_at(db, session.id, session.updated_at),
        messages::session_usage_totals(db, session.id)
    )?;
    let index = TreeIndex::new(&all);
    let path_refs = index.active_path(session.active_root_id);
    let ids: Vec<Uuid> = path_refs.iter().map(|m| m.id).collect();
    let siblings = ids
        .iter()
        .map(|id| {
            index.siblings(*id).unwrap_or(Siblings { position: 1, count: 1, previous: None, next: None })
        })
        .collect();
    let sizes = index.branch_sizes();
    let branch_sizes = ids.iter().map(|id| sizes.get(id).copied().unwrap_or(1)).collect();
    let end = match before {
        Some(id) => ids.iter().position(|x| *x == id).ok_or(DomainError::NotFound)?,
        None => ids.len(),
    };
    let start = end.saturating_sub(window);
    let mut full: std::collections::HashMap<Uuid, Message> =
        messages::messages_by_ids(db, session.id, &ids[start..end])
            .await?
            .into_iter()
            .map(|m| (m.id, m))
            .collect();
    let path = path_refs.into_iter().map(|m| full.remove(&m.id).unwrap_or_else(|| m.clone())).collect();
    Ok(Conversation { session, path, siblings, branch_sizes, message_count: all.len(), totals, role })
}

/// The whole tree of one of the actor's sessions, compactly, with the active path marked.
pub async fn tree_overview(db: &Db, actor: &Actor, session_id: Uuid) -> DomainResult<Vec<OverviewRow>> {
    let (session, _) = view_session(db, actor, session_id).await?;
    let all = messages::session_messages(db, session.id).await?;
    let index = TreeIndex::new(&all);
    let ids: Vec<Uuid> = index.active_path(session.active_root_id).iter().map(|m| m.id).collect();
    Ok(index.overview(&ids))
}

/// Makes the path through `message_id` active: every message above it chooses the way to it,
/// and below it the path follows the choices already made.
pub async fn select_message(db: &Db, actor: &Actor, session_id: Uuid, message_id: Uuid) -> DomainResult<()> {
    select_through(db, actor, session_id, message_id, false).await
}

async fn select_through(
    db: &Db,
    actor: &Actor,
    session_id: Uuid,
    message_id: Uuid,
    end_here: bool,
) -> DomainResult<()> {
    let session = get_session(db, actor, session_id).await?;
    let all = messages::session_messages(db, session.id).await?;
    let index = TreeIndex::new(&all);
    index.get(message_id).ok_or(DomainError::NotFound)?;
    let path: Vec<Uuid> = index.path_to(message_id).iter().map(|m| m.id).collect();
    match end_here {
        true => messages::select_path_ending(db, session.id, &path).await?,
        false => messages::select_path(db, session.id, &path).await?,
    }
    let how = if end_here { "continue_from" } else { "select" };
    activity::record(
        db,
        session.id,
        actor,
        "branch",
        serde_json::json!({ "message_id": message_id, "how": how }),
    )
    .await;
    Ok(())
}

/// "Continue from here": the path through `message_id` becomes active and ends there, so the
/// next message goes below it as a new branch; what followed it stays, one sibling over.
pub async fn continue_from(db: &Db, actor: &Actor, session_id: Uuid, message_id: Uuid) -> DomainResult<()> {
    select_through(db, actor, session_id, message_id, true).await
}

/// Deletes a message and everything below it. The parent then follows its newest remaining
/// child. Refused while an answer in the session is being written.
pub async fn delete_branch(
    db: &Db,
    actor: &Actor,
    session_id: Uuid,
    message_id: Uuid,
    run_active: bool,
) -> DomainResult<u64> {
    let session = own_session(db, actor, session_id).await?;
    if run_active {
        return Err(DomainError::Conflict("Stop the answer being written before deleting messages.".into()));
    }
    let all = messages::session_messages(db, session.id).await?;
    let index = TreeIndex::new(&all);
    let target = index.get(message_id).ok_or(DomainError::NotFound)?;
    let doomed = index.subtree(message_id);
    let next_choice =
        index.children(target.parent_id).iter().rev().find(|m| m.id != message_id).map(|m| m.id);
    Ok(messages::delete_branch(db, session.id, &doomed, target.parent_id, next_choice).await?)
}

/// Renames one of the actor's sessions (a name the user chose is kept from then on).
pub async fn rename_session(
    db: &Db,
    actor: &Actor,
    session_id: Uuid,
    title: &str,
) -> DomainResult<ChatSession> {
    let title = clean_name(title, "session")?;
    let session = get_session(db, actor, session_id).await?;
    repo::rename_session(db, session.owner_id, session.id, &title, true).await?;
    get_session(db, actor, session_id).await
}

/// Sets a title the model proposed, unless the user has named the session meanwhile.
pub async fn propose_title(db: &Db, actor: &Actor, session_id: Uuid, title: &str) -> DomainResult<bool> {
    let title = clean_name(title, "session")?;
    let session = get_session(db, actor, session_id).await?;
    Ok(repo::rename_session(db, session.owner_id, session.id, &title, false).await?)
}

/// Archives or restores one of the actor's sessions.
pub async fn set_archived(db: &Db, actor: &Actor, session_id: Uuid, archived: bool) -> DomainResult<()> {
    let session = get_session(db, actor, session_id).await?;
    repo::set_archived(db, session.owner_id, session.id, archived).await?;
    Ok(())
}

/// Sessions shown per sidebar page.
pub const SIDEBAR_PAGE: u64 = 20;

/// One page of a workspace's sessions, most recent first, and whether more follow.
pub async fn workspace_sessions(
    db: &Db,
    actor: &Actor,
    workspace_id: Uuid,
    archived: bool,
    page: u64,
) -> DomainResult<(Vec<ChatSession>, bool)> {
    let (workspace, _) = view_workspace(db, actor, workspace_id).await?;
    let offset = page.saturating_mul(SIDEBAR_PAGE);
    let mut sessions =
        repo::workspace_sessions(db, workspace.owner_id, workspace.id, archived, offset, SIDEBAR_PAGE + 1)
            .await?;
    let more = sessions.len() as u64 > SIDEBAR_PAGE;
    sessions.truncate(SIDEBAR_PAGE as usize);
    Ok((sessions, more))
}

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

/// Updates one of the actor's sessions' settings.
pub async fn update_session(
    db: &Db,
    actor: &Actor,
    session_id: Uuid,
    form: &SessionForm,
) -> DomainResult<ChatSession> {
    let session = get_session(db, actor, session_id).await?;
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
    get_session(db, actor, session_id).await
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

/// `/expose path` (or `/unexpose path`) from the composer: adds (or removes) one exposed folder.
/// Returns the session and what happened, in words.
pub async fn change_root(
    db: &Db,
    actor: &Actor,
    session_id: Uuid,
    path: &str,
    expose: bool,
) -> DomainResult<(ChatSession, String)> {
    let session = get_session(db, actor, session_id).await?;
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
    Ok((get_session(db, actor, session_id).await?, message))
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

/// One message of the actor's session.
pub async fn message(db: &Db, actor: &Actor, session_id: Uuid, message_id: Uuid) -> DomainResult<Message> {
    let (session, _) = view_session(db, actor, session_id).await?;
    messages::find_message(db, session.id, message_id).await?.ok_or(DomainError::NotFound)
}

/// A message's replies (its children, oldest first): the branches below it.
pub async fn children(
    db: &Db,
    actor: &Actor,
    session_id: Uuid,
    message_id: Uuid,
) -> DomainResult<Vec<Message>> {
    let (session, _) = view_session(db, actor, session_id).await?;
    messages::find_message(db, session.id, message_id).await?.ok_or(DomainError::NotFound)?;
    let mut out = Vec::new();
    for id in messages::children_of(db, session.id, message_id).await? {
        out.extend(messages::find_message(db, session.id, id).await?);
    }
    Ok(out)
}

/// The messages of a side branch from `message_id` down its chosen children (a sub-agent's
/// work, say), at most `limit`.
pub async fn branch_from(
    db: &Db,
    actor: &Actor,
    session_id: Uuid,
    message_id: Uuid,
    limit: usize,
) -> DomainResult<Vec<Message>> {
    let (session, _) = view_session(db, actor, session_id).await?;
    let all = messages::session_messages(db, session.id).await?;
    let mut out = Vec::new();
    let mut next = all.iter().find(|m| m.id == message_id);
    if next.is_none() {
        return Err(DomainError::NotFound);
    }
    while let Some(m) = next {
        if out.len() >= limit {
            break;
        }
        out.push(m.clone());
        next = m.chosen_child_id.filter(|c| *c != m.id).and_then(|c| all.iter().find(|x| x.id == c));
    }
    Ok(out)
}

/// The first message of each branch below `parent` other than its chosen one.
pub async fn side_branches(
    db: &Db,
    actor: &Actor,
    session_id: Uuid,
    parent: &Message,
) -> DomainResult<Vec<Uuid>> {
    let (session, _) = view_session(db, actor, session_id).await?;
    Ok(messages::children_of(db, session.id, parent.id)
        .await?
        .into_iter()
        .filter(|id| Some(*id) != parent.chosen_child_id)
        .collect())
}

/// The session a composer submit with this client id created, if the actor made one.
pub async fn session_by_client_id(db: &Db, actor: &Actor, client_id: &str) -> DomainResult<Option<Uuid>> {
    Ok(repo::session_with_client_id(db, actor.user_id(), client_id).await?)
}

#[cfg(test)]
mod tests;
