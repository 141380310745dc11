//! A workspace's settings, what it holds, and deleting it.

use super::Sessions;
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

/// What deleting a workspace would remove.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub struct WorkspaceContents {
    /// Sessions in it.
    pub sessions: u64,
    /// Messages in those sessions.
    pub messages: u64,
}

impl Sessions {
    /// Updates one of the actor's workspaces.
    pub async fn update_workspace(
        &self,
        actor: &Actor,
        workspace_id: Uuid,
        form: &WorkspaceForm,
    ) -> DomainResult<Workspace> {
        let db = &self.db;
        let workspace = self.get_workspace(actor, workspace_id).await?;
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
        self.get_workspace(actor, workspace_id).await
    }

    /// Counts what a workspace holds.
    pub async fn workspace_contents(
        &self,
        actor: &Actor,
        workspace_id: Uuid,
    ) -> DomainResult<WorkspaceContents> {
        let db = &self.db;
        let (workspace, _) = self.view_workspace(actor, workspace_id).await?;
        let (sessions, messages) = repo::workspace_counts(db, workspace.owner_id, workspace.id).await?;
        Ok(WorkspaceContents { sessions, messages })
    }

    /// Ids of every session in one of the actor's workspaces, archived ones included.
    pub async fn workspace_session_ids(&self, actor: &Actor, workspace_id: Uuid) -> DomainResult<Vec<Uuid>> {
        let db = &self.db;
        let workspace = self.get_workspace(actor, workspace_id).await?;
        Ok(repo::workspace_session_ids(db, workspace.owner_id, workspace.id).await?)
    }

    /// Deletes one of the actor's workspaces with everything in it.
    pub async fn delete_workspace(&self, actor: &Actor, workspace_id: Uuid) -> DomainResult<()> {
        let db = &self.db;
        let workspace = self.get_workspace(actor, workspace_id).await?;
        // Owners by share manage it; only the person whose workspace it is may delete it.
        if workspace.owner_id != actor.user_id() {
            return Err(DomainError::Forbidden);
        }
        repo::delete_workspace(db, workspace.owner_id, workspace.id).await?;
        Ok(())
    }

    /// Attaches one of the actor's own provider keys (`key`: its id; blank: none) to a workspace
    /// that is theirs, so that runs in it use that key for its provider whoever starts them
    /// (an editor it is shared with spends the owner's key). Only the person whose workspace it is
    /// may, even a co-owner may not: the key is theirs. Audited.
    pub async fn attach_key(
        &self,
        actor: &Actor,
        origin: &crate::domain::audit::Origin,
        workspace_id: Uuid,
        key: &str,
    ) -> DomainResult<Workspace> {
        let db = &self.db;
        use crate::vault::Vault;
        use crate::vault::store::SecretKind;
        let (workspace, _) = workspace_as(db, actor, workspace_id, ShareRole::Owner).await?;
        if workspace.owner_id != actor.user_id() {
            return Err(DomainError::Forbidden);
        }
        let chosen = match key.trim() {
            "" => None,
            raw => {
                let keys = Vault::list_secrets(db, actor.user_id(), SecretKind::ProviderKey).await?;
                let found = Uuid::parse_str(raw).ok().and_then(|id| keys.into_iter().find(|k| k.id == id));
                Some(found.ok_or_else(|| DomainError::Invalid("Choose one of your keys.".into()))?)
            }
        };
        repo::set_workspace_key(db, actor.user_id(), workspace.id, chosen.as_ref().map(|k| k.id)).await?;
        let (action, details) = match &chosen {
            Some(k) => (
                "workspace.key.attach",
                serde_json::json!({ "workspace_id": workspace.id, "provider": k.provider, "key": k.label, "last4": k.last4 }),
            ),
            None => ("workspace.key.detach", serde_json::json!({ "workspace_id": workspace.id })),
        };
        crate::domain::audit::record(db, origin, action, &format!("workspace:{}", workspace.name), details)
            .await?;
        Ok(Workspace { key_secret_id: chosen.map(|k| k.id), ..workspace })
    }

    /// The key attached to a workspace, as runs in it use it: `None` when none is, or when its
    /// owner has since deleted it from their vault.
    pub async fn attached_key(
        &self,
        workspace: &Workspace,
    ) -> DomainResult<Option<crate::vault::store::SecretMeta>> {
        let db = &self.db;
        let Some(id) = workspace.key_secret_id else { return Ok(None) };
        match crate::vault::Vault::secret_meta(db, workspace.owner_id, id).await {
            Ok(meta) => Ok(Some(meta)),
            Err(crate::vault::store::StoreError::NotFound) => Ok(None),
            Err(e) => Err(e.into()),
        }
    }
}
