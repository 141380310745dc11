//! Receiving an upload. Its size and the member's storage quota are checked before the body is
//! read (from the declared length) and while it is read (a running count, reserved a step at a
//! time), and its bytes go to a temp file as they arrive: no upload is held whole in memory,
//! save an image read back to be resized (SECURITY.md 54).

use bytes::Bytes;
use futures_util::{Stream, StreamExt};
use uuid::Uuid;

use super::{FileSettings, FileView, Files, Reservation, blob_error, is_raster, readable_size};
use crate::blobs::{self, BlobStore, Kind};
use crate::domain::accounts::Actor;
use crate::domain::{DomainError, DomainResult};
use crate::storage::Db;
use crate::storage::repos::files::{self as repo, FileFacts, NewUpload};

/// Bytes reserved at a time while a body of undeclared length comes in.
const RESERVE_STEP: u64 = 1024 * 1024;

/// An upload as it arrives: its name (metadata only), the length its sender declared, if any,
/// and its body.
pub struct IncomingFile<'a, S> {
    /// The name it came with.
    pub name: &'a str,
    /// The declared length (`Content-Length`); checked before a byte of the body is read.
    pub declared: Option<u64>,
    /// The bytes, chunk by chunk.
    pub body: S,
}

impl Files {
    /// Stores bytes already in memory as an upload of the actor's (tests, imports).
    pub async fn upload(&self, actor: &Actor, file_name: &str, bytes: Vec<u8>) -> DomainResult<FileView> {
        let declared = Some(bytes.len() as u64);
        let body = futures_util::stream::iter([Ok::<_, std::convert::Infallible>(Bytes::from(bytes))]);
        self.receive(actor, IncomingFile { name: file_name, declared, body }).await
    }

    /// Stores an upload of the actor's: size and quota checked first and as the body comes in
    /// ([`DomainError::TooLarge`] when either is exceeded), type from the bytes, images resized
    /// (when enabled) with a thumbnail. Identical bytes are stored once; the upload is the actor's
    /// own reference either way, and the answer is the same.
    pub async fn receive<S, E>(&self, actor: &Actor, file: IncomingFile<'_, S>) -> DomainResult<FileView>
    where
        S: Stream<Item = Result<Bytes, E>>,
    {
        let db = &self.db;
        let store = &self.store;
        let settings = &self.settings;
        let max = settings.max_file_bytes;
        if file.declared.is_some_and(|declared| declared > max) {
            return Err(too_large(max));
        }
        let mut held = Held { settings, db, member: actor.user_id(), reservations: Vec::new(), bytes: 0 };
        held.grow_to(file.declared.unwrap_or(0), 0).await?;
        let mut staging = store.stage().await.map_err(blob_error)?;
        let mut body = std::pin::pin!(file.body);
        while let Some(chunk) = body.next().await {
            let chunk = chunk.map_err(|_| DomainError::Invalid("The upload was interrupted.".into()))?;
            let size = staging.size().saturating_add(chunk.len() as u64);
            if size > max {
                return Err(too_large(max));
            }
            if size > held.bytes {
                held.grow_to(size, RESERVE_STEP.min(max - size)).await?;
            }
            staging.write(&chunk).await.map_err(blob_error)?;
        }
        if staging.size() == 0 {
            return Err(DomainError::Invalid("The file is empty.".into()));
        }
        let staged = staging.finish().await.map_err(blob_error)?;
        let name = blobs::clean_file_name(file.name);
        let view = if staged.kind().is_raster_image() {
            let kind = staged.kind();
            let bytes = staged.into_bytes().await.map_err(blob_error)?;
            store_image(db, store, settings, actor, &name, bytes, kind).await?
        } else {
            // The row goes first: from then on it protects the hash from a collection that would
            // take a blob it thinks unreferenced, so the file cannot go between its write and its row.
            let (hash, size, kind) = (staged.hash().to_string(), staged.size(), staged.kind());
            let row = insert(db, actor, &name, (&hash, size, kind), None, None).await?;
            if let Err(e) = staged.commit().await {
                let _ = repo::delete_upload(db, actor.user_id(), row.id).await;
                return Err(blob_error(e));
            }
            row
        };
        held.release().await;
        Ok(view)
    }
}

/// Resizes an image, thumbnails it and stores both with the upload's row.
async fn store_image(
    db: &Db,
    store: &BlobStore,
    settings: &FileSettings,
    actor: &Actor,
    name: &str,
    bytes: Vec<u8>,
    kind: Kind,
) -> DomainResult<FileView> {
    let prepared = blobs::prepare_image(bytes, kind, &settings.images).await.map_err(blob_error)?;
    let dims = (
        i32::try_from(prepared.width).unwrap_or(i32::MAX),
        i32::try_from(prepared.height).unwrap_or(i32::MAX),
    );
    let main = prepared.main;
    let stored = store.put(&main).await.map_err(blob_error)?;
    let thumb = match &prepared.thumbnail {
        Some(t) => Some((store.put(t).await.map_err(blob_error)?, Kind::sniff(t))),
        None => None,
    };
    let thumb_row = thumb.as_ref().map(|(t, k)| (t.hash.as_str(), t.size, *k));
    let view =
        insert(db, actor, name, (&stored.hash, stored.size, prepared.main_kind), thumb_row, Some(dims))
            .await?;
    // A collection may have taken a file it thought unreferenced between our write and our row:
    // the row now protects it, so write it again if it went.
    if !store.exists(&stored.hash).await {
        store.put(&main).await.map_err(blob_error)?;
    }
    if let (Some((t, _)), Some(bytes)) = (&thumb, &prepared.thumbnail)
        && !store.exists(&t.hash).await
    {
        store.put(bytes).await.map_err(blob_error)?;
    }
    Ok(view)
}

/// Writes the upload's row (and its blobs' rows).
async fn insert(
    db: &Db,
    actor: &Actor,
    name: &str,
    (hash, size, kind): (&str, u64, Kind),
    thumb: Option<(&str, u64, Kind)>,
    dims: Option<(i32, i32)>,
) -> DomainResult<FileView> {
    let bytes = |n: u64| i64::try_from(n).unwrap_or(i64::MAX);
    let row = repo::insert_upload(
        db,
        &NewUpload {
            id: Uuid::now_v7(),
            file: FileFacts {
                user_id: actor.user_id(),
                hash,
                size: bytes(size),
                mime: kind.mime(),
                thumb: thumb.map(|(hash, size, kind)| (hash, bytes(size), kind.mime())),
                file_name: name,
                dims,
            },
        },
    )
    .await?;
    Ok(FileView {
        id: row.id,
        image: is_raster(&row.mime),
        hash: row.hash,
        thumb: row.thumb_hash,
        name: row.file_name,
        size: readable_size(row.size),
        mime: row.mime,
    })
}

/// The bytes reserved for one upload so far, taken a step at a time as its body grows; given
/// back once its row is stored (or when dropped, on failure).
struct Held<'a> {
    settings: &'a FileSettings,
    db: &'a Db,
    member: Uuid,
    reservations: Vec<Reservation>,
    bytes: u64,
}

impl Held<'_> {
    /// Holds at least `bytes`, and `ahead` more if they fit (so a body is not checked per chunk).
    async fn grow_to(&mut self, bytes: u64, ahead: u64) -> DomainResult<()> {
        let quota = self.settings.user_quota_bytes;
        let reservations = &self.settings.reservations;
        let mut last = None;
        for target in [bytes.saturating_add(ahead), bytes] {
            let more = target.saturating_sub(self.bytes);
            match reservations.reserve(self.db, self.member, more, quota).await {
                Ok(reservation) => {
                    self.reservations.push(reservation);
                    self.bytes = target;
                    return Ok(());
                }
                // Over the quota is a payload too large for this member, like a file over the limit.
                Err(DomainError::Invalid(m)) => last = Some(DomainError::TooLarge(m)),
                Err(e) => return Err(e),
            }
            if ahead == 0 {
                break;
            }
        }
        Err(last.unwrap_or_else(|| DomainError::TooLarge(String::new())))
    }

    async fn release(self) {
        for reservation in self.reservations {
            reservation.release().await;
        }
    }
}

fn too_large(max: u64) -> DomainError {
    DomainError::TooLarge(format!(
        "The file is larger than {}, the limit per file.",
        readable_size(i64::try_from(max).unwrap_or(i64::MAX))
    ))
}
