//! Host folders: server folders an admin allows for a workspace, checked when saved and at every
//! use; the data folder can never be one.

use super::*;
use crate::domain::authz::Admin;

/// A host folder an admin allowed, as the console lists it.
#[derive(Debug, Clone, Serialize)]
pub struct HostRootView {
    /// Row id.
    pub id: Uuid,
    /// The absolute folder.
    pub path: String,
    /// The workspace's name.
    pub workspace: String,
    /// Its owner's email.
    pub owner: String,
}

/// A workspace as the console's picker shows it.
#[derive(Debug, Clone, Serialize)]
pub struct WorkspaceChoice {
    /// Id.
    pub id: Uuid,
    /// "name (owner)".
    pub label: String,
}

async fn owner_email(db: &Db, id: Uuid) -> DomainResult<String> {
    Ok(crate::storage::repos::users::find(db, id).await?.map(|u| u.email).unwrap_or_default())
}

impl Agent {
    /// Every allowed host folder, and the workspaces one may be allowed for (admins only).
    pub async fn host_roots_console(
        &self,
        admin: &Admin,
    ) -> DomainResult<(Vec<HostRootView>, Vec<WorkspaceChoice>)> {
        let db = &self.db;
        let _actor = admin.actor();
        let mut rows = Vec::new();
        for r in repo::all_host_roots(db).await? {
            let ws = repo::any_workspace(db, r.workspace_id).await?;
            let (workspace, owner) = match ws {
                Some(w) => (w.name, owner_email(db, w.owner_id).await?),
                None => (String::new(), String::new()),
            };
            rows.push(HostRootView { id: r.id, path: r.path, workspace, owner });
        }
        let mut choices = Vec::new();
        for w in repo::all_workspaces(db).await? {
            choices.push(WorkspaceChoice {
                id: w.id,
                label: format!("{} ({})", w.name, owner_email(db, w.owner_id).await?),
            });
        }
        Ok((rows, choices))
    }

    /// Allows a host folder for a workspace (admins only; audited).
    pub async fn allow_host_root(
        &self,
        admin: &Admin,
        origin: &crate::domain::audit::Origin,
        data_dir: &Path,
        workspace_id: Uuid,
        path: &str,
    ) -> DomainResult<()> {
        let db = &self.db;
        let actor = admin.actor();
        let ws = repo::any_workspace(db, workspace_id)
            .await?
            .ok_or_else(|| DomainError::Invalid("Choose a workspace.".into()))?;
        let real = check_host_root(path, data_dir)?;
        let real = real.to_string_lossy().to_string();
        if repo::host_roots_of(db, ws.id).await?.contains(&real) {
            return Err(DomainError::Invalid(format!("{real} is already allowed there.")));
        }
        repo::insert_host_root(db, ws.id, &real, actor.user_id()).await?;
        crate::domain::audit::record(
            db,
            origin,
            "host_root.allow",
            &format!("workspace:{}", ws.id),
            json!({"path": real}),
        )
        .await
    }

    /// Withdraws an allowed host folder (admins only; audited). Sessions stop seeing it at once.
    pub async fn remove_host_root(
        &self,
        admin: &Admin,
        origin: &crate::domain::audit::Origin,
        id: Uuid,
    ) -> DomainResult<()> {
        let db = &self.db;
        let _actor = admin.actor();
        let row = repo::delete_host_root(db, id).await?.ok_or(DomainError::NotFound)?;
        crate::domain::audit::record(
            db,
            origin,
            "host_root.remove",
            &format!("workspace:{}", row.workspace_id),
            json!({"path": row.path}),
        )
        .await
    }
}

/// Checks a host folder an admin wants to allow: absolute, an existing directory, not the
/// root, and neither inside Arbor's data folder nor holding it. Returns its resolved form.
pub fn check_host_root(path: &str, data_dir: &Path) -> DomainResult<PathBuf> {
    let bad = |m: &str| Err(DomainError::Invalid(m.to_string()));
    let path = path.trim();
    if !path.starts_with('/') || path.chars().any(char::is_control) || path.len() > 4096 {
        return bad("Give an absolute folder path, e.g. /srv/projects.");
    }
    let Ok(real) = std::fs::canonicalize(path) else {
        return bad("That folder does not exist on the server.");
    };
    if !real.is_dir() {
        return bad("That is not a folder.");
    }
    if real.parent().is_none() {
        return bad("The whole file system cannot be exposed.");
    }
    let data = std::fs::canonicalize(data_dir).unwrap_or_else(|_| data_dir.to_path_buf());
    if real.starts_with(&data) || data.starts_with(&real) {
        return bad(
            "Arbor's data folder (database, keys, blobs) cannot be exposed, nor a folder holding it.",
        );
    }
    Ok(real)
}

/// The host folders allowed for a workspace.
pub async fn host_roots_of(db: &Db, workspace_id: Uuid) -> DomainResult<Vec<String>> {
    Ok(repo::host_roots_of(db, workspace_id).await?)
}
