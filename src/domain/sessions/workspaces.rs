//! A workspace's settings, what it holds, and deleting it.

use super::*;

/// What a workspace's settings form sends.
#[derive(Debug, Clone, Default)]
pub struct WorkspaceForm {
    /// Name.
    pub name: String,
    /// Default system prompt template (blank: none).
    pub system_prompt: String,
    /// Default model (blank: the instance default).
    pub default_model: String,
    /// Approval mode.
    pub approval_mode: String,
    /// Whether titles are proposed by the model.
    pub infer_titles: bool,
    /// Automatic compression threshold in percent of the model's window; blank for the
    /// default, 0 for never.
    pub compact_at_percent: String,
}

/// Updates one of the actor's workspaces.
pub async fn update_workspace(
    db: &Db,
    actor: &Actor,
    workspace_id: Uuid,
    form: &WorkspaceForm,
) -> DomainResult<Workspace> {
    let workspace = get_workspace(db, actor, workspace_id).await?;
    let name = clean_name(&form.name, "workspace")?;
    if !APPROVAL_MODES.contains(&form.approval_mode.as_str()) {
        return Err(DomainError::Invalid("Choose an approval mode from the list.".into()));
    }
    let system_prompt = blank_to_none(&form.system_prompt);
    check_prompt(system_prompt).await?;
    let compact_at_percent = match blank_to_none(&form.compact_at_percent) {
        None => None,
        Some(p) => match p.trim_end_matches('%').trim().parse::<u8>() {
            Ok(n @ (0 | 10..=95)) => Some(n),
            _ => {
                return Err(DomainError::Invalid(
                    "Compress at: a share of the window from 10 to 95 (percent), 0 for never, or blank for the default."
                        .into(),
                ));
            }
        },
    };
    let settings = WorkspaceSettings {
        name: &name,
        system_prompt,
        default_model: blank_to_none(&form.default_model),
        approval_mode: &form.approval_mode,
        infer_titles: form.infer_titles,
        compact_at_percent,
    };
    repo::update_workspace(db, workspace.owner_id, workspace.id, &settings).await?;
    get_workspace(db, actor, workspace_id).await
}

/// What deleting a workspace would remove.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub struct WorkspaceContents {
    /// Sessions in it.
    pub sessions: u64,
    /// Messages in those sessions.
    pub messages: u64,
}

/// Counts what a workspace holds.
pub async fn workspace_contents(
    db: &Db,
    actor: &Actor,
    workspace_id: Uuid,
) -> DomainResult<WorkspaceContents> {
    let (workspace, _) = view_workspace(db, actor, workspace_id).await?;
    let (sessions, messages) = repo::workspace_counts(db, workspace.owner_id, workspace.id).await?;
    Ok(WorkspaceContents { sessions, messages })
}

/// Ids of every session in one of the actor's workspaces, archived ones included.
pub async fn workspace_session_ids(db: &Db, actor: &Actor, workspace_id: Uuid) -> DomainResult<Vec<Uuid>> {
    let workspace = get_workspace(db, actor, workspace_id).await?;
    Ok(repo::workspace_session_ids(db, workspace.owner_id, workspace.id).await?)
}

/// Deletes one of the actor's workspaces with everything in it.
pub async fn delete_workspace(db: &Db, actor: &Actor, workspace_id: Uuid) -> DomainResult<()> {
    let workspace = get_workspace(db, actor, workspace_id).await?;
    // Owners by share manage it; only the person whose workspace it is may delete it.
    if workspace.owner_id != actor.user_id() {
        return Err(DomainError::Forbidden);
    }
    repo::delete_workspace(db, workspace.owner_id, workspace.id).await?;
    Ok(())
}
