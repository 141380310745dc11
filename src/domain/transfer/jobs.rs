//! Imports as background jobs: the registry the page reads progress from, and reading the
//! received file into a document (an Arbor archive, an Arbor document alone, or another
//! product's export).

use std::collections::HashMap;
use std::io::Read;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, PoisonError};

use chrono::{DateTime, Utc};
use serde::Serialize;
use uuid::Uuid;

use super::{ImportLimits, archive, foreign};
use crate::blobs::BlobStore;
use crate::model::transfer::{ARCHIVE_FORMAT, Archive, ArchivedWorkspace};
use crate::storage::repos::transfer::ImportCounts;

/// Finished jobs a member's list keeps.
const KEPT_PER_MEMBER: usize = 10;
/// Imports reading, checking or writing at once on this instance: each holds a document in
/// memory, so their number bounds what imports can take.
const AT_ONCE: usize = 2;

/// Where an import stands.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(tag = "state", rename_all = "snake_case")]
pub enum ImportState {
    /// Under way: the stage, and sessions written of all.
    Running {
        /// What it is doing.
        stage: String,
        /// Sessions written.
        done: usize,
        /// Sessions in all (0 until known).
        total: usize,
    },
    /// Finished: what it made.
    Done {
        /// Workspaces made.
        workspaces: usize,
        /// Sessions made.
        sessions: usize,
        /// Messages made.
        messages: usize,
        /// Files attached.
        files: usize,
        /// Prompt templates made.
        templates: usize,
    },
    /// Refused or failed; nothing was kept. The reason is safe to show.
    Failed {
        /// Why.
        reason: String,
    },
}

/// One import, as its page shows it.
#[derive(Debug, Clone, Serialize)]
pub struct ImportJob {
    /// Its id (the page polls it).
    pub id: Uuid,
    /// The uploaded file's name.
    pub name: String,
    /// When it started.
    pub started_at: DateTime<Utc>,
    /// The same, as shown (UTC, to the minute).
    pub started: String,
    /// Where it stands.
    #[serde(flatten)]
    pub state: ImportState,
    #[serde(skip)]
    owner: Uuid,
}

impl ImportJob {
    /// Whether it is still under way.
    pub fn running(&self) -> bool {
        matches!(self.state, ImportState::Running { .. })
    }
}

/// Every import this instance ran since it started, bounded per member.
#[derive(Clone)]
pub(super) struct Jobs {
    all: Arc<Mutex<Vec<ImportJob>>>,
    slots: Arc<tokio::sync::Semaphore>,
}

impl Default for Jobs {
    fn default() -> Self {
        Jobs { all: Arc::default(), slots: Arc::new(tokio::sync::Semaphore::new(AT_ONCE)) }
    }
}

impl Jobs {
    fn with<T>(&self, f: impl FnOnce(&mut Vec<ImportJob>) -> T) -> T {
        f(&mut self.all.lock().unwrap_or_else(PoisonError::into_inner))
    }

    pub(super) fn running(&self, owner: Uuid) -> bool {
        self.with(|all| all.iter().any(|j| j.owner == owner && j.running()))
    }

    /// A new job, unless one of the member's runs.
    pub(super) fn begin(&self, owner: Uuid, name: &str) -> Option<ImportJob> {
        self.with(|all| {
            if all.iter().any(|j| j.owner == owner && j.running()) {
                return None;
            }
            let now = Utc::now();
            let job = ImportJob {
                id: Uuid::now_v7(),
                name: name.to_string(),
                started_at: now,
                started: now.format("%Y-%m-%d %H:%M").to_string(),
                state: ImportState::Running { stage: "Waiting".into(), done: 0, total: 0 },
                owner,
            };
            all.push(job.clone());
            // The member's oldest finished jobs leave the list.
            let finished: Vec<Uuid> =
                all.iter().filter(|j| j.owner == owner && !j.running()).map(|j| j.id).collect();
            let extra = finished.len().saturating_sub(KEPT_PER_MEMBER);
            all.retain(|j| !finished[..extra].contains(&j.id));
            Some(job)
        })
    }

    pub(super) fn progress(&self, id: Uuid, stage: &str, done: usize, total: usize) {
        self.with(|all| {
            if let Some(j) = all.iter_mut().find(|j| j.id == id) {
                j.state = ImportState::Running { stage: stage.to_string(), done, total };
            }
        });
    }

    pub(super) fn finish(&self, id: Uuid, outcome: Result<ImportCounts, String>) {
        let state = match outcome {
            Ok(c) => ImportState::Done {
                workspaces: c.workspaces,
                sessions: c.sessions,
                messages: c.messages,
                files: c.files,
                templates: c.templates,
            },
            Err(reason) => ImportState::Failed { reason },
        };
        self.with(|all| {
            if let Some(j) = all.iter_mut().find(|j| j.id == id) {
                j.state = state;
            }
        });
    }

    pub(super) fn of(&self, owner: Uuid) -> Vec<ImportJob> {
        self.with(|all| all.iter().rev().filter(|j| j.owner == owner).cloned().collect())
    }

    pub(super) fn get(&self, owner: Uuid, id: Uuid) -> Option<ImportJob> {
        self.with(|all| all.iter().find(|j| j.owner == owner && j.id == id).cloned())
    }

    /// Waits for one of the instance's import slots.
    pub(super) async fn slot(&self) -> Option<tokio::sync::OwnedSemaphorePermit> {
        self.slots.clone().acquire_owned().await.ok()
    }
}

/// What the received file holds, by its first bytes.
enum Shape {
    Gzip,
    Json,
    Zip,
    Unknown,
}

fn shape(head: &[u8]) -> Shape {
    let text = head.strip_prefix(b"\xEF\xBB\xBF").unwrap_or(head);
    let first = text.iter().find(|b| !b.is_ascii_whitespace());
    if head.starts_with(&[0x1f, 0x8b]) {
        Shape::Gzip
    } else if head.starts_with(b"PK\x03\x04") {
        Shape::Zip
    } else if matches!(first, Some(b'{') | Some(b'[')) {
        Shape::Json
    } else {
        Shape::Unknown
    }
}

/// Reads the received file into a document and the files it carried (already in the store).
pub(super) async fn read_upload(
    path: &Path,
    store: &BlobStore,
    limits: ImportLimits,
    max_file: u64,
) -> Result<(Archive, HashMap<String, (u64, &'static str)>), String> {
    let (path, store): (PathBuf, BlobStore) = (path.to_path_buf(), store.clone());
    tokio::task::spawn_blocking(move || {
        let mut head = [0u8; 64];
        let n = std::fs::File::open(&path)
            .and_then(|mut f| f.read(&mut head))
            .map_err(|_| "The upload could not be read back.".to_string())?;
        match shape(&head[..n]) {
            Shape::Gzip => {
                let read = archive::read(&path, &store, limits.max_document, max_file)?;
                Ok((read.archive, read.files))
            }
            Shape::Json => Ok((read_json(&path, limits.max_document)?, HashMap::new())),
            Shape::Zip => {
                Err("This is a zip file. Unzip it and import the conversations.json (ChatGPT) or the \
                               JSON export inside."
                    .to_string())
            }
            Shape::Unknown => Err("This file is not an export Arbor reads: an Arbor archive (.tar.gz), \
                                   ChatGPT's conversations.json, or an Open WebUI chat export (.json)."
                .to_string()),
        }
    })
    .await
    .map_err(|_| "The import stopped unexpectedly.".to_string())?
}

/// A JSON document: Arbor's own, or another product's export.
fn read_json(path: &Path, max: u64) -> Result<Archive, String> {
    let size = std::fs::metadata(path).map(|m| m.len()).unwrap_or(0);
    if size > max {
        return Err(format!(
            "The JSON file is larger than {} MiB, the limit for a document.",
            max / (1024 * 1024)
        ));
    }
    let bytes = std::fs::read(path).map_err(|_| "The upload could not be read back.".to_string())?;
    let doc: serde_json::Value =
        serde_json::from_slice(&bytes).map_err(|e| format!("The file is not valid JSON: {e}."))?;
    drop(bytes);
    if doc.get("format").is_some() && doc.get("workspaces").is_some() {
        return serde_json::from_value(doc)
            .map_err(|e| format!("The file is not a valid Arbor export: {e}."));
    }
    let (sessions, source, name) = match foreign::detect(&doc) {
        Some(foreign::ForeignFormat::ChatGpt) => {
            (foreign::from_chatgpt(&doc)?, "chatgpt", "Imported from ChatGPT")
        }
        Some(foreign::ForeignFormat::OpenWebUi) => {
            (foreign::from_open_webui(&doc)?, "open-webui", "Imported from Open WebUI")
        }
        None => {
            return Err(
                "The JSON is neither an Arbor export, ChatGPT's conversations.json nor an Open WebUI \
                        chat export."
                    .to_string(),
            );
        }
    };
    Ok(Archive {
        format: ARCHIVE_FORMAT,
        source: source.into(),
        exported_at: None,
        workspaces: vec![ArchivedWorkspace { name: name.into(), sessions, ..ArchivedWorkspace::default() }],
        prompt_templates: Vec::new(),
    })
}
