//! Images a model made, and images sent to one: a generated image is checked like an upload
//! (its bytes, the per-file limit, the member's storage quota), stored once per content and
//! attached to the message that shows it; the images of a thread are found again by name, id
//! or hash to be edited.

use uuid::Uuid;

use super::{FileView, Files, blob_error, view_of};
use crate::blobs::{self, BlobStore, Kind};
use crate::domain::{DomainError, DomainResult};
use crate::model::files::Attachment;
use crate::providers::images::{GeneratedImage, InputImage};
use crate::storage::repos::files::{self as repo, FileFacts, NewAttachment};

impl Files {
    /// Refuses to make images for a member whose files already fill their storage (before the
    /// provider is paid for images that could not be kept).
    pub async fn room_for_images(&self, member: Uuid) -> DomainResult<()> {
        let (db, settings) = (&self.db, &self.settings);
        settings.reservations.check(db, member, 1, settings.user_quota_bytes).await
    }
}

/// Where generated images go: whose they are and the message that shows them.
#[derive(Debug, Clone, Copy)]
pub struct Destination {
    /// Whose storage they count against.
    pub member: Uuid,
    /// The message's session.
    pub session_id: Uuid,
    /// The message.
    pub message_id: Uuid,
}

impl Files {
    /// Stores generated images and attaches them to the message, all or none: the per-file
    /// limit and the member's quota are checked for all of them before anything is written, each
    /// image is decoded (a corrupt one is refused) and thumbnailed, and the rows are written in
    /// one transaction.
    pub async fn attach_generated(
        &self,
        to: Destination,
        images: Vec<GeneratedImage>,
    ) -> DomainResult<Vec<FileView>> {
        let (db, store, settings) = (&self.db, &self.store, &self.settings);
        if let Some(big) = images.iter().find(|i| i.bytes.len() as u64 > settings.max_file_bytes) {
            return Err(DomainError::Invalid(format!(
                "The image made is larger than {} (the limit per file): {} bytes.",
                super::readable_size(i64::try_from(settings.max_file_bytes).unwrap_or(i64::MAX)),
                big.bytes.len()
            )));
        }
        let total: u64 = images.iter().map(|i| i.bytes.len() as u64).sum();
        let reservation =
            settings.reservations.reserve(db, to.member, total, settings.user_quota_bytes).await?;
        struct Stored {
            hash: String,
            size: i64,
            kind: Kind,
            thumb: Option<(String, i64, Kind)>,
            dims: (i32, i32),
            name: String,
            bytes: Vec<u8>,
            thumb_bytes: Option<Vec<u8>>,
        }
        let mut stored = Vec::with_capacity(images.len());
        for image in images {
            let kind = Kind::sniff(&image.bytes);
            let prepared =
                blobs::prepare_image(image.bytes, kind, &settings.images).await.map_err(blob_error)?;
            let main = store.put(&prepared.main).await.map_err(blob_error)?;
            let thumb = match &prepared.thumbnail {
                Some(t) => {
                    let put = store.put(t).await.map_err(blob_error)?;
                    Some((put.hash, i64::try_from(put.size).unwrap_or(i64::MAX), Kind::sniff(t)))
                }
                None => None,
            };
            let extension = match prepared.main_kind {
                Kind::Jpeg => "jpg",
                Kind::Gif => "gif",
                Kind::Webp => "webp",
                _ => "png",
            };
            stored.push(Stored {
                name: format!("image-{}.{extension}", main.hash.get(..8).unwrap_or("made")),
                size: i64::try_from(main.size).unwrap_or(i64::MAX),
                hash: main.hash,
                kind: prepared.main_kind,
                thumb,
                dims: (
                    i32::try_from(prepared.width).unwrap_or(i32::MAX),
                    i32::try_from(prepared.height).unwrap_or(i32::MAX),
                ),
                bytes: prepared.main,
                thumb_bytes: prepared.thumbnail,
            });
        }
        let rows: Vec<NewAttachment<'_>> = stored
            .iter()
            .map(|s| NewAttachment {
                message_id: to.message_id,
                session_id: to.session_id,
                file: FileFacts {
                    user_id: to.member,
                    hash: &s.hash,
                    size: s.size,
                    mime: s.kind.mime(),
                    thumb: s.thumb.as_ref().map(|(h, n, k)| (h.as_str(), *n, k.mime())),
                    file_name: &s.name,
                    dims: Some(s.dims),
                },
            })
            .collect();
        let written = repo::insert_attachments(db, &rows).await?;
        reservation.release().await;
        // A collection may have taken a blob it thought unreferenced between our write and our
        // rows: the rows now protect it, so write it again if it went.
        for s in &stored {
            if !store.exists(&s.hash).await {
                store.put(&s.bytes).await.map_err(blob_error)?;
            }
            if let (Some((hash, _, _)), Some(bytes)) = (&s.thumb, &s.thumb_bytes)
                && !store.exists(hash).await
            {
                store.put(bytes).await.map_err(blob_error)?;
            }
        }
        Ok(written.into_iter().map(view_of).collect())
    }
}

/// An image of the thread, as a model may be told of it.
fn describe(a: &Attachment) -> String {
    format!("{} (id {})", a.file_name, a.id)
}

fn is_image(a: &Attachment) -> bool {
    matches!(a.mime.as_str(), "image/png" | "image/jpeg" | "image/gif" | "image/webp")
}

impl Files {
    /// The images of a session named by `refs` (a file name, an attachment id, a blob hash, or
    /// `last` for the newest image), read for an edit. What cannot be found is an error for the
    /// model that lists the images there are.
    pub async fn thread_images(&self, session_id: Uuid, refs: &[String]) -> Result<Vec<InputImage>, String> {
        let (db, store) = (&self.db, &self.store);
        if refs.is_empty() {
            return Ok(Vec::new());
        }
        let unreadable = || "The conversation's images could not be read.".to_string();
        let all = repo::attachments_in_session(db, session_id).await.map_err(|_| unreadable())?;
        let images: Vec<&Attachment> = all.iter().filter(|a| is_image(a)).collect();
        let mut out = Vec::with_capacity(refs.len());
        for wanted in refs {
            let wanted = wanted.trim();
            let found = if wanted.eq_ignore_ascii_case("last") {
                images.first()
            } else {
                images.iter().find(|a| {
                    a.file_name == wanted || a.id.to_string() == wanted || a.hash.eq_ignore_ascii_case(wanted)
                })
            };
            let Some(a) = found else {
                let known: Vec<String> = images.iter().take(20).map(|a| describe(a)).collect();
                return Err(if known.is_empty() {
                    format!("There is no image {wanted:?}: this conversation has no images yet.")
                } else {
                    format!("There is no image {wanted:?}. The conversation's images: {}.", known.join(", "))
                });
            };
            out.push(read_input(store, a).await.map_err(|_| unreadable())?);
        }
        Ok(out)
    }
}

impl Files {
    /// The images attached to messages, read to be sent with an image call.
    pub async fn message_images(&self, message_ids: &[Uuid]) -> DomainResult<Vec<InputImage>> {
        let (db, store) = (&self.db, &self.store);
        let mut out = Vec::new();
        for a in repo::attachments_of(db, message_ids).await?.iter().filter(|a| is_image(a)) {
            out.push(read_input(store, a).await?);
        }
        Ok(out)
    }
}

async fn read_input(store: &BlobStore, a: &Attachment) -> DomainResult<InputImage> {
    let bytes = store.read(&a.hash).await.map_err(blob_error)?;
    // The type is the bytes' own, never the row's word.
    let mime = Kind::sniff(&bytes).mime().to_string();
    Ok(InputImage { mime, bytes, name: a.file_name.clone() })
}
