//! Attachments: uploads checked by their bytes, stored once per content, referenced per user,
//! served only to people holding a reference, sent to providers as parts the model takes, and
//! collected when nothing refers to them any more.

use std::collections::HashMap;
use std::time::Duration;

use base64::Engine as _;
use serde::Serialize;
use uuid::Uuid;

use crate::blobs::{self, BlobError, BlobStore, ImageLimits, Kind};
use crate::domain::accounts::Actor;
use crate::domain::{DomainError, DomainResult};
use crate::model::files::Attachment;
use crate::providers::types::Part;
use crate::storage::Db;
use crate::storage::repos::files as repo;

mod generated;
mod reservations;
mod upload;
pub use generated::Destination;
pub use reservations::{Reservation, Reservations};
pub use upload::IncomingFile;

/// Upload limits and image handling.
#[derive(Debug, Clone)]
pub struct FileSettings {
    /// Largest file accepted, bytes.
    pub max_file_bytes: u64,
    /// What one person's files may take in all, bytes.
    pub user_quota_bytes: u64,
    /// Resizing and thumbnails.
    pub images: ImageLimits,
    /// Uploads never sent are dropped after this long.
    pub upload_ttl: Duration,
    /// Unreferenced blobs younger than this are kept (an upload may be on its way).
    pub gc_grace: Duration,
    /// Bytes promised to uploads being processed.
    pub reservations: Reservations,
}

impl Default for FileSettings {
    fn default() -> Self {
        FileSettings {
            max_file_bytes: 20 * 1024 * 1024,
            user_quota_bytes: 1024 * 1024 * 1024,
            images: ImageLimits::default(),
            upload_ttl: Duration::from_secs(24 * 3600),
            gc_grace: Duration::from_secs(3600),
            reservations: Reservations::default(),
        }
    }
}

/// Attachments as a service: the database, the blob store and the limits, built once in the app
/// state. Members upload, discard and fetch through it; deletions and `arbor blobs gc` collect.
#[derive(Clone)]
pub struct Files {
    db: Db,
    store: BlobStore,
    settings: FileSettings,
}

impl Files {
    /// The service over this database and blob store, with these limits.
    pub fn new(db: Db, store: BlobStore, settings: FileSettings) -> Files {
        Files { db, store, settings }
    }

    /// The upload limits and image handling.
    pub fn settings(&self) -> &FileSettings {
        &self.settings
    }
}

/// A file as the composer and messages show it.
#[derive(Debug, Clone, Serialize)]
pub struct FileView {
    /// The upload's id (uploads) or the attachment's (messages).
    pub id: Uuid,
    /// The blob.
    pub hash: String,
    /// Its thumbnail, for images.
    pub thumb: Option<String>,
    /// The name it came with (escaped by templates).
    pub name: String,
    /// Verified type.
    pub mime: String,
    /// Size, readable.
    pub size: String,
    /// Whether it shows as an image.
    pub image: bool,
}

/// A size as people read it (B, KiB, MiB).
pub fn readable_size(bytes: i64) -> String {
    let b = bytes.max(0) as f64;
    if b < 1024.0 {
        format!("{bytes} B")
    } else if b < 1024.0 * 1024.0 {
        format!("{:.0} KB", b / 1024.0)
    } else {
        format!("{:.1} MB", b / (1024.0 * 1024.0))
    }
}

fn is_raster(mime: &str) -> bool {
    matches!(mime, "image/png" | "image/jpeg" | "image/gif" | "image/webp")
}

fn blob_error(e: BlobError) -> DomainError {
    match e {
        BlobError::NotFound | BlobError::BadHash => DomainError::NotFound,
        BlobError::Io(io) => {
            DomainError::Storage(crate::storage::StorageError::Corrupt(format!("blob store: {io}")))
        }
        other => DomainError::Invalid(format!("The file was refused: {other}.")),
    }
}

impl Files {
    /// The attachments of messages, by message id, as views (the caller has the messages: it
    /// read them as the actor).
    pub async fn views_of(&self, message_ids: &[Uuid]) -> DomainResult<HashMap<Uuid, Vec<FileView>>> {
        let mut out: HashMap<Uuid, Vec<FileView>> = HashMap::new();
        for a in repo::attachments_of(&self.db, message_ids).await? {
            out.entry(a.message_id).or_default().push(view_of(a));
        }
        Ok(out)
    }

    /// Removes one of the actor's unsent uploads.
    pub async fn discard_upload(&self, actor: &Actor, id: Uuid) -> DomainResult<()> {
        if repo::delete_upload(&self.db, actor.user_id(), id).await? {
            Ok(())
        } else {
            Err(DomainError::NotFound)
        }
    }

    /// A blob the actor holds a reference to; anything else, whatever the hash, is "not found".
    pub async fn serve(&self, actor: &Actor, hash: &str) -> DomainResult<Served> {
        let db = &self.db;
        if !blobs::valid_hash(hash) {
            return Err(DomainError::Invalid("That is not a file id.".into()));
        }
        let shared = crate::domain::sessions::access::shared_workspace_ids(db, actor.user_id()).await?;
        let Some((name, _)) = repo::visible_blob(db, actor.user_id(), &shared, hash).await? else {
            return Err(DomainError::NotFound);
        };
        let bytes = self.store.read(hash).await.map_err(blob_error)?;
        // The type is decided again from the bytes served, never from what was claimed.
        let kind = Kind::sniff(&bytes);
        Ok(Served { bytes, name, kind })
    }

    /// Drops stale uploads, then removes blobs nothing refers to (and files no row knows), all
    /// older than the grace period.
    pub async fn collect(&self) -> DomainResult<Collected> {
        let store = &self.store;
        let settings = &self.settings;
        collect_with(&self.db, store, settings, true).await
    }

    /// What a deletion needs: the unreferenced blobs' rows and files, without walking the whole
    /// store for stray files (that is for `arbor blobs gc`).
    pub async fn collect_unreferenced(&self) -> DomainResult<Collected> {
        let store = &self.store;
        let settings = &self.settings;
        collect_with(&self.db, store, settings, false).await
    }
}

/// A blob as it is served: its bytes, the name of the actor's reference, and whether it is a
/// verified raster image (shown inline; anything else is downloaded).
pub struct Served {
    /// The bytes.
    pub bytes: Vec<u8>,
    /// The file name to offer.
    pub name: String,
    /// The verified type.
    pub kind: Kind,
}

/// A blob whose right to be seen the caller established (a share link that shows it).
pub async fn serve_shown(store: &BlobStore, hash: &str, name: &str) -> DomainResult<Served> {
    let bytes = store.read(hash).await.map_err(blob_error)?;
    let kind = Kind::sniff(&bytes);
    Ok(Served { bytes, name: name.to_string(), kind })
}

/// The files of these messages as a share link keeps them, by message.
pub async fn attachments_for_snapshot(
    db: &Db,
    message_ids: &[Uuid],
) -> DomainResult<HashMap<Uuid, Vec<crate::model::teams::SnapshotFile>>> {
    let mut out: HashMap<Uuid, Vec<crate::model::teams::SnapshotFile>> = HashMap::new();
    for a in repo::attachments_of(db, message_ids).await? {
        out.entry(a.message_id).or_default().push(crate::model::teams::SnapshotFile {
            hash: a.hash,
            thumb: a.thumb_hash,
            name: a.file_name,
            mime: a.mime,
            size: a.size,
        });
    }
    Ok(out)
}

/// A file a share link keeps, as the templates show it under message `id`.
pub fn snapshot_view(id: Uuid, f: &crate::model::teams::SnapshotFile) -> FileView {
    FileView {
        id,
        image: is_raster(&f.mime),
        hash: f.hash.clone(),
        thumb: f.thumb.clone(),
        name: f.name.clone(),
        size: readable_size(f.size),
        mime: f.mime.clone(),
    }
}

fn view_of(a: Attachment) -> FileView {
    FileView {
        id: a.id,
        image: is_raster(&a.mime),
        hash: a.hash,
        thumb: a.thumb_hash,
        name: a.file_name,
        size: readable_size(a.size),
        mime: a.mime,
    }
}

/// Longest text of an attached text file sent to a model, in bytes.
const MAX_TEXT_PART: usize = 100 * 1024;

impl Files {
    /// The parts a model gets for messages' attachments: images as image parts when the model
    /// sees images, PDFs as document parts when its API reads them, text files as text, anything
    /// else as a short note that a file was attached.
    ///
    /// One read serves both halves of a request's files: `asked` (the user messages, whose
    /// files become parts) and `answered` (answers, whose files an image model made: returned
    /// as views, for naming them to the model).
    pub async fn provider_parts(
        &self,
        asked: &[Uuid],
        answered: &[Uuid],
        vision: bool,
        documents: bool,
    ) -> DomainResult<(HashMap<Uuid, Vec<Part>>, HashMap<Uuid, Vec<FileView>>)> {
        let store = &self.store;
        let ids: Vec<Uuid> = asked.iter().chain(answered).copied().collect();
        let asked: std::collections::HashSet<Uuid> = asked.iter().copied().collect();
        let mut out: HashMap<Uuid, Vec<Part>> = HashMap::new();
        let mut made: HashMap<Uuid, Vec<FileView>> = HashMap::new();
        for a in repo::attachments_of(&self.db, &ids).await? {
            if !asked.contains(&a.message_id) {
                made.entry(a.message_id).or_default().push(view_of(a));
                continue;
            }
            let note = Part::Text {
                text: format!("[Attached file: {} ({}, {})]", a.file_name, a.mime, readable_size(a.size)),
            };
            let part = if is_raster(&a.mime) && vision {
                match store.read(&a.hash).await {
                    Ok(bytes) => Part::Image {
                        mime: Kind::sniff(&bytes).mime().to_string(),
                        data_base64: base64::engine::general_purpose::STANDARD.encode(&bytes),
                    },
                    Err(e) => {
                        tracing::warn!(error = %e, "an attached image could not be read");
                        note
                    }
                }
            } else if a.mime == "application/pdf" && documents {
                match store.read(&a.hash).await {
                    Ok(bytes) => Part::Document {
                        mime: "application/pdf".into(),
                        data_base64: base64::engine::general_purpose::STANDARD.encode(&bytes),
                        name: a.file_name.clone(),
                    },
                    Err(_) => note,
                }
            } else if a.mime.starts_with("text/plain") {
                match store.read(&a.hash).await {
                    Ok(bytes) => {
                        let text =
                            String::from_utf8_lossy(&bytes[..bytes.len().min(MAX_TEXT_PART)]).to_string();
                        Part::Text { text: format!("[Attached file: {}]\n{text}", a.file_name) }
                    }
                    Err(_) => note,
                }
            } else {
                note
            };
            out.entry(a.message_id).or_default().push(part);
        }
        Ok((out, made))
    }
}

/// What a collection removed.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize)]
pub struct Collected {
    /// Uploads never sent, dropped.
    pub stale_uploads: u64,
    /// Blobs removed (rows and files).
    pub blobs: u64,
    /// Files on disk without a row, removed.
    pub orphan_files: u64,
}

async fn collect_with(
    db: &Db,
    store: &BlobStore,
    settings: &FileSettings,
    scan_files: bool,
) -> DomainResult<Collected> {
    let now = chrono::Utc::now();
    let ttl = chrono::Duration::from_std(settings.upload_ttl).unwrap_or_else(|_| chrono::Duration::days(1));
    let grace = chrono::Duration::from_std(settings.gc_grace).unwrap_or_else(|_| chrono::Duration::hours(1));
    let mut done =
        Collected { stale_uploads: repo::delete_stale_uploads(db, now - ttl).await?, ..Default::default() };
    for hash in repo::unreferenced(db, now - grace).await? {
        if repo::delete_blob_row(db, &hash, now - grace).await? {
            store.delete(&hash).await.map_err(blob_error)?;
            done.blobs += 1;
        }
    }
    if !scan_files {
        return Ok(done);
    }
    for hash in store.list().await.map_err(blob_error)? {
        if repo::blob_known(db, &hash).await? {
            continue;
        }
        // A file written moments ago may belong to an upload whose row is being written.
        let young = store
            .path_of(&hash)
            .ok()
            .and_then(|p| std::fs::metadata(p).ok())
            .and_then(|m| m.modified().ok())
            .and_then(|t| t.elapsed().ok())
            .is_none_or(|age| age < settings.gc_grace);
        if !young {
            store.delete(&hash).await.map_err(blob_error)?;
            done.orphan_files += 1;
        }
    }
    Ok(done)
}

/// The actor's uploads, by id, that may go on a message; an id that is not theirs is refused
/// (nothing is written).
pub async fn check_uploads(db: &Db, actor: &Actor, ids: &[Uuid]) -> DomainResult<()> {
    if ids.len() > 20 {
        return Err(DomainError::Invalid("A message takes at most 20 files.".into()));
    }
    for id in ids {
        if repo::find_upload(db, actor.user_id(), *id).await?.is_none() {
            return Err(DomainError::Invalid(
                "A file of this message is gone: remove it and attach it again.".into(),
            ));
        }
    }
    Ok(())
}

/// Parses the composer's comma-separated upload ids.
pub fn parse_upload_ids(raw: &str) -> DomainResult<Vec<Uuid>> {
    raw.split(',')
        .map(str::trim)
        .filter(|s| !s.is_empty())
        .map(|s| {
            Uuid::parse_str(s)
                .map_err(|_| DomainError::Invalid("The form is out of date: reload the page.".into()))
        })
        .collect()
}

impl Files {
    /// A blob an agent may `recall`: one the user holds a reference to, as text for the model.
    pub async fn recall(&self, user_id: Uuid, hash: &str) -> Result<String, String> {
        let (db, store) = (&self.db, &self.store);
        if !blobs::valid_hash(hash) {
            return Err("recall needs a file's hash: 64 hexadecimal characters.".into());
        }
        let unreadable = "The file could not be read.";
        let shared = crate::domain::sessions::access::shared_workspace_ids(db, user_id)
            .await
            .map_err(|_| unreadable.to_string())?;
        let Some((name, _)) =
            repo::visible_blob(db, user_id, &shared, hash).await.map_err(|_| unreadable.to_string())?
        else {
            return Err("There is no such file among yours.".into());
        };
        let bytes = store.read(hash).await.map_err(|_| "There is no such file among yours.".to_string())?;
        let kind = Kind::sniff(&bytes);
        if kind == Kind::Text {
            let text = String::from_utf8_lossy(&bytes[..bytes.len().min(MAX_TEXT_PART)]).to_string();
            Ok(format!("{name} ({} bytes):\n{text}", bytes.len()))
        } else {
            Ok(format!("{name} is {} ({} bytes); its content is not text.", kind.mime(), bytes.len()))
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn upload_ids_are_parsed_strictly() {
        let id = Uuid::now_v7();
        assert_eq!(parse_upload_ids(&format!(" {id}, ")).unwrap(), vec![id]);
        assert!(parse_upload_ids("").unwrap().is_empty());
        assert!(parse_upload_ids("../etc").is_err());
    }

    #[test]
    fn sizes_read_well() {
        assert_eq!(readable_size(12), "12 B");
        assert_eq!(readable_size(2048), "2 KB");
        assert_eq!(readable_size(3 * 1024 * 1024 + 1), "3.0 MB");
    }
}
