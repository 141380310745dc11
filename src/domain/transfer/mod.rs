//! Export and import: a member's sessions (every branch, tool calls and decisions, settings),
//! workspaces and prompt templates as one archive, and the chat exports people bring from other
//! products (ChatGPT's `conversations.json`, Open WebUI's chat export).
//!
//! An export is written to a scratch file and streamed to the browser. An import is received to
//! a scratch file, then runs as a background job whose progress the page shows: read, checked
//! whole (`check.rs`), bounded by the member's storage quota, and written in one transaction, so
//! a bad file leaves nothing behind (files it stored stay unreferenced and are collected).

pub mod archive;
pub mod check;
pub mod foreign;
mod jobs;

use std::path::{Path, PathBuf};
use std::sync::Arc;

use uuid::Uuid;

use crate::blobs::BlobStore;
use crate::domain::audit::{self, Origin};
use crate::domain::authz::{Actor, Admin};
use crate::domain::files::FileSettings;
use crate::domain::search::SearchService;
use crate::domain::sessions;
use crate::domain::{DomainError, DomainResult};
use crate::storage::Db;
use crate::storage::repos::transfer::{self as repo, ExportScope};

pub use jobs::{ImportJob, ImportState};

/// What to export.
#[derive(Debug, Clone, Copy)]
pub enum ExportWhat {
    /// One session the actor may read.
    Session(Uuid),
    /// One workspace the actor owns.
    Workspace(Uuid),
    /// Everything the actor owns, with their prompt templates.
    Everything,
}

/// A finished export: an open file whose name is already gone from the disk, so it vanishes
/// when the download ends, however it ends.
pub struct ExportFile {
    /// The name offered to the browser.
    pub file_name: String,
    /// The archive, positioned at its start.
    pub file: std::fs::File,
    /// Its size in bytes.
    pub size: u64,
}

/// Bounds of imports, from the configuration.
#[derive(Debug, Clone, Copy)]
pub struct ImportLimits {
    /// Largest file accepted, bytes.
    pub max_upload: u64,
    /// Largest document (`arbor-export.json`, `conversations.json`), bytes.
    pub max_document: u64,
}

/// The export and import service, built once in the app state.
#[derive(Clone)]
pub struct Transfers {
    db: Db,
    sessions: crate::domain::sessions::Sessions,
    store: BlobStore,
    files: FileSettings,
    search: Arc<SearchService>,
    scratch: PathBuf,
    limits: ImportLimits,
    jobs: jobs::Jobs,
}

impl Transfers {
    /// The service, keeping its scratch files in `scratch` (emptied now: a restart ends every
    /// job).
    pub fn new(
        db: Db,
        store: BlobStore,
        files: FileSettings,
        search: Arc<SearchService>,
        scratch: PathBuf,
        limits: ImportLimits,
    ) -> std::io::Result<Transfers> {
        if scratch.exists() {
            std::fs::remove_dir_all(&scratch)?;
        }
        std::fs::create_dir_all(&scratch)?;
        Ok(Transfers {
            sessions: crate::domain::sessions::Sessions::new(db.clone()),
            db,
            store,
            files,
            search,
            scratch,
            limits,
            jobs: jobs::Jobs::default(),
        })
    }

    /// The largest import accepted, bytes.
    pub fn max_upload(&self) -> u64 {
        self.limits.max_upload
    }

    fn scratch_file(&self) -> PathBuf {
        self.scratch.join(Uuid::now_v7().to_string())
    }

    /// Exports what the actor asked for.
    pub async fn export(&self, actor: &Actor, what: ExportWhat) -> DomainResult<ExportFile> {
        let (scope, name) = match what {
            ExportWhat::Session(id) => {
                let (session, _) = self.sessions.view_session(actor, id).await?;
                (ExportScope::Session(id), session.title)
            }
            ExportWhat::Workspace(id) => {
                (ExportScope::Workspace(id), self.sessions.get_workspace(actor, id).await?.name)
            }
            ExportWhat::Everything => (ExportScope::Owner(actor.user_id()), "everything".to_string()),
        };
        self.write(scope, &name).await
    }

    /// Everything a member owns, for a data-protection request; audited.
    pub async fn export_member(
        &self,
        _admin: &Admin,
        origin: &Origin,
        member: Uuid,
    ) -> DomainResult<ExportFile> {
        let person =
            crate::storage::repos::users::find(&self.db, member).await?.ok_or(DomainError::NotFound)?;
        audit::record(
            &self.db,
            origin,
            "user.export",
            &format!("user:{member}"),
            serde_json::json!({ "email": person.email }),
        )
        .await?;
        self.write(ExportScope::Owner(member), &person.email).await
    }

    async fn write(&self, scope: ExportScope, name: &str) -> DomainResult<ExportFile> {
        let source = format!("arbor {}", env!("CARGO_PKG_VERSION"));
        let archive = repo::read(&self.db, scope, &source).await?.ok_or(DomainError::NotFound)?;
        let path = self.scratch_file();
        let store = self.store.clone();
        let file = tokio::task::spawn_blocking(move || -> std::io::Result<std::fs::File> {
            let written = archive::write(&archive, &store, &path);
            let opened = written.and_then(|()| std::fs::File::open(&path));
            // Gone from the directory at once; the open handle keeps the bytes until dropped.
            let _ = std::fs::remove_file(&path);
            opened
        })
        .await
        .map_err(|e| DomainError::Storage(crate::storage::StorageError::Corrupt(e.to_string())))?
        .map_err(|e| {
            tracing::warn!(error = %e, "an export could not be written");
            DomainError::Upstream("The export could not be written; try again.".into())
        })?;
        let size = file.metadata().map(|m| m.len()).unwrap_or(0);
        Ok(ExportFile { file_name: download_name(name), file, size })
    }

    /// The actor's imports, newest first.
    pub fn my_imports(&self, actor: &Actor) -> Vec<ImportJob> {
        self.jobs.of(actor.user_id())
    }

    /// One of the actor's imports.
    pub fn my_import(&self, actor: &Actor, id: Uuid) -> DomainResult<ImportJob> {
        self.jobs.get(actor.user_id(), id).ok_or(DomainError::NotFound)
    }

    /// Where an upload for the actor's next import is received; refused while one of theirs
    /// runs, or when the declared size is over the limit.
    pub fn prepare_import(&self, actor: &Actor, declared: Option<u64>) -> DomainResult<PathBuf> {
        if self.jobs.running(actor.user_id()) {
            return Err(DomainError::Limited(
                "An import of yours is still running: wait for it to finish.".into(),
                5,
            ));
        }
        if declared.is_some_and(|d| d > self.limits.max_upload) {
            return Err(too_large(self.limits.max_upload));
        }
        Ok(self.scratch_file())
    }

    /// Starts importing the received file at `path` (taken over: it is removed when the job
    /// ends), into `workspace` when given (one the actor owns) or as new workspaces.
    pub async fn start_import(
        &self,
        actor: &Actor,
        origin: &Origin,
        path: PathBuf,
        name: &str,
        workspace: Option<Uuid>,
    ) -> DomainResult<ImportJob> {
        if let Some(id) = workspace
            && let Err(e) = self.sessions.get_workspace(actor, id).await
        {
            let _ = tokio::fs::remove_file(&path).await;
            return Err(e);
        }
        let job = self.jobs.begin(actor.user_id(), &check::clean_title(name, "import"));
        let Some(job) = job else {
            let _ = tokio::fs::remove_file(&path).await;
            return Err(DomainError::Limited(
                "An import of yours is still running: wait for it to finish.".into(),
                5,
            ));
        };
        let service = self.clone();
        let (owner, origin, id) = (actor.user_id(), origin.clone(), job.id);
        tokio::spawn(async move {
            let outcome = service.run_import(owner, &origin, id, &path, workspace).await;
            let _ = tokio::fs::remove_file(&path).await;
            service.jobs.finish(id, outcome);
        });
        Ok(job)
    }

    async fn run_import(
        &self,
        owner: Uuid,
        origin: &Origin,
        job: Uuid,
        path: &Path,
        workspace: Option<Uuid>,
    ) -> Result<repo::ImportCounts, String> {
        let _slot = self.jobs.slot().await;
        self.jobs.progress(job, "Reading", 0, 0);
        let (mut archive, files) =
            jobs::read_upload(path, &self.store, self.limits, self.files.max_file_bytes).await?;
        self.jobs.progress(job, "Checking", 0, 0);
        let held: std::collections::HashSet<String> = files.keys().cloned().collect();
        let archive_checked = tokio::task::spawn_blocking(move || {
            check::check_and_renumber(&mut archive, &held).map(|()| archive)
        })
        .await
        .map_err(|_| "The import stopped unexpectedly.".to_string())?;
        let mut archive = archive_checked?;
        let templates =
            crate::storage::repos::prompt_templates::count_owned(&self.db, owner).await.map_err(hidden)?;
        let room = sessions::MAX_TEMPLATES.saturating_sub(templates);
        if archive.prompt_templates.len() as u64 > room {
            return Err(format!(
                "The export holds {} prompt templates; you have room for {room} more (at most {} each).",
                archive.prompt_templates.len(),
                sessions::MAX_TEMPLATES
            ));
        }
        // Files count against the member's storage, as if uploaded one by one.
        let bytes = check::settle_files(&mut archive, &files);
        let blobs: Vec<repo::BlobFacts> = files
            .iter()
            .map(|(hash, (size, mime))| {
                (hash.clone(), i64::try_from(*size).unwrap_or(i64::MAX), (*mime).to_string())
            })
            .collect();
        let reservation = self
            .files
            .reservations
            .reserve(&self.db, owner, bytes, self.files.user_quota_bytes)
            .await
            .map_err(|e| match e {
                DomainError::Invalid(m) | DomainError::Limited(m, _) => m,
                other => hidden(other),
            })?;
        let sessions: usize = archive.workspaces.iter().map(|w| w.sessions.len()).sum();
        self.jobs.progress(job, "Writing", 0, sessions);
        let jobs = self.jobs.clone();
        let progress = move |done: usize| jobs.progress(job, "Writing", done, sessions);
        let target = repo::ImportTarget { owner, workspace };
        let written = repo::write(&self.db, target, &archive, &blobs, &progress).await;
        reservation.release().await;
        let counts = written.map_err(hidden)?;
        self.search.nudge();
        let details = serde_json::json!({
            "source": archive.source, "workspaces": counts.workspaces, "sessions": counts.sessions,
            "messages": counts.messages, "files": counts.files,
        });
        if let Err(e) =
            audit::record(&self.db, origin, "data.import", &format!("user:{owner}"), details).await
        {
            tracing::warn!(error = %e, "an import could not be audited");
        }
        Ok(counts)
    }
}

/// Storage failures are logged, and the member told only that it failed.
fn hidden(e: impl std::fmt::Display) -> String {
    tracing::warn!(error = %e, "an import failed");
    "The import could not be saved; nothing of it was kept. Try again.".into()
}

/// The refusal of an upload over the limit.
pub fn too_large(max: u64) -> DomainError {
    DomainError::Invalid(format!(
        "The file is larger than {} MiB, the largest import accepted.",
        max / (1024 * 1024)
    ))
}

/// A file name for the browser: the thing's name, kept to safe characters.
fn download_name(name: &str) -> String {
    let stem: String = name
        .chars()
        .map(|c| if c.is_ascii_alphanumeric() || c == '-' || c == '_' { c } else { '-' })
        .take(60)
        .collect();
    let stem = stem.trim_matches('-');
    let stem = if stem.is_empty() { "export" } else { stem };
    format!("arbor-{stem}-{}.tar.gz", chrono::Utc::now().format("%Y%m%d"))
}
