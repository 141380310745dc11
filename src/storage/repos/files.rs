//! Queries over `blobs`, `uploads` and `attachments`. Reference counts are kept by triggers
//! (see the migration), so every statement here that adds or removes a reference changes the
//! count in its own transaction.

use chrono::Utc;
use sea_orm::sea_query::OnConflict;
use sea_orm::{
    ActiveModelTrait, ColumnTrait, ConnectionTrait, EntityTrait, QueryFilter, QueryOrder, QuerySelect, Set,
};
use uuid::Uuid;

use crate::model::files::Attachment;
use crate::model::files::Blob;
use crate::model::files::Upload;
use crate::storage::entities::{attachment, blob, upload};
use crate::storage::{Db, StorageResult};

/// A stored file's facts, as an upload and an attachment both keep them.
pub struct FileFacts<'a> {
    /// Whose file it is (whose storage it counts against).
    pub user_id: Uuid,
    /// The file's blob.
    pub hash: &'a str,
    /// Its size in bytes.
    pub size: i64,
    /// Its verified type.
    pub mime: &'a str,
    /// The thumbnail's blob, size and type, for images.
    pub thumb: Option<(&'a str, i64, &'a str)>,
    /// The name it was uploaded under or is shown under (metadata only).
    pub file_name: &'a str,
    /// Image dimensions.
    pub dims: Option<(i32, i32)>,
}

impl FileFacts<'_> {
    /// The blob rows of the file and its thumbnail, written when new.
    async fn ensure_blobs<C: ConnectionTrait>(&self, db: &C) -> StorageResult<()> {
        ensure_blob(db, self.hash, self.size, self.mime).await?;
        if let Some((hash, size, mime)) = self.thumb {
            ensure_blob(db, hash, size, mime).await?;
        }
        Ok(())
    }
}

/// A new upload: its id and its file.
pub struct NewUpload<'a> {
    /// Id chosen by the caller.
    pub id: Uuid,
    /// The file.
    pub file: FileFacts<'a>,
}

pub(crate) async fn ensure_blob<C: ConnectionTrait>(
    db: &C,
    hash: &str,
    size: i64,
    mime: &str,
) -> StorageResult<()> {
    blob::Entity::insert(blob::ActiveModel {
        hash: Set(hash.to_string()),
        size: Set(size),
        mime: Set(mime.to_string()),
        refcount: Set(0),
        created_at: Set(Utc::now()),
    })
    // A new reference renews the blob's grace period, so a collection racing this upload
    // leaves it alone.
    .on_conflict(OnConflict::column(blob::Column::Hash).update_column(blob::Column::CreatedAt).to_owned())
    .exec(db)
    .await?;
    Ok(())
}

/// In one transaction: the blob rows (if new) and the upload referencing them.
pub async fn insert_upload(db: &Db, u: &NewUpload<'_>) -> StorageResult<Upload> {
    let txn = crate::storage::begin_write(db).await?;
    let (id, u) = (u.id, &u.file);
    u.ensure_blobs(&txn).await?;
    let row = upload::ActiveModel {
        id: Set(id),
        user_id: Set(u.user_id),
        hash: Set(u.hash.to_string()),
        thumb_hash: Set(u.thumb.map(|(h, _, _)| h.to_string())),
        file_name: Set(u.file_name.to_string()),
        size: Set(u.size),
        mime: Set(u.mime.to_string()),
        width: Set(u.dims.map(|d| d.0)),
        height: Set(u.dims.map(|d| d.1)),
        created_at: Set(Utc::now()),
    }
    .insert(&txn)
    .await?;
    txn.commit().await?;
    Ok(row.into())
}

/// One of the user's uploads.
pub async fn find_upload(db: &Db, user_id: Uuid, id: Uuid) -> StorageResult<Option<Upload>> {
    Ok(upload::Entity::find_by_id(id)
        .filter(upload::Column::UserId.eq(user_id))
        .one(db)
        .await?
        .map(Into::into))
}

/// Removes one of the user's uploads; false when there was none.
pub async fn delete_upload(db: &Db, user_id: Uuid, id: Uuid) -> StorageResult<bool> {
    Ok(upload::Entity::delete_many()
        .filter(upload::Column::Id.eq(id))
        .filter(upload::Column::UserId.eq(user_id))
        .exec(db)
        .await?
        .rows_affected
        == 1)
}

/// Bytes the user's uploads and attachments take (each reference counts, shared or not).
pub async fn user_bytes(db: &Db, user_id: Uuid) -> StorageResult<i64> {
    let sum = |rows: Vec<i64>| rows.into_iter().sum::<i64>();
    let uploads: Vec<i64> = upload::Entity::find()
        .select_only()
        .column(upload::Column::Size)
        .filter(upload::Column::UserId.eq(user_id))
        .into_tuple()
        .all(db)
        .await?;
    let attached: Vec<i64> = attachment::Entity::find()
        .select_only()
        .column(attachment::Column::Size)
        .filter(attachment::Column::UserId.eq(user_id))
        .into_tuple()
        .all(db)
        .await?;
    Ok(sum(uploads) + sum(attached))
}

/// Turns the user's uploads into attachments of a message (in the caller's transaction).
/// Returns how many were moved; an upload that is not the user's is not moved.
pub async fn attach_uploads<C: ConnectionTrait>(
    db: &C,
    user_id: Uuid,
    session_id: Uuid,
    message_id: Uuid,
    uploads: &[Uuid],
) -> StorageResult<usize> {
    let mut moved = 0;
    for (position, id) in uploads.iter().enumerate() {
        let Some(u) =
            upload::Entity::find_by_id(*id).filter(upload::Column::UserId.eq(user_id)).one(db).await?
        else {
            continue;
        };
        attachment::ActiveModel {
            id: Set(Uuid::now_v7()),
            message_id: Set(message_id),
            session_id: Set(session_id),
            user_id: Set(user_id),
            hash: Set(u.hash.clone()),
            thumb_hash: Set(u.thumb_hash.clone()),
            file_name: Set(u.file_name.clone()),
            size: Set(u.size),
            mime: Set(u.mime.clone()),
            width: Set(u.width),
            height: Set(u.height),
            position: Set(i32::try_from(position).unwrap_or(i32::MAX)),
            created_at: Set(Utc::now()),
        }
        .insert(db)
        .await?;
        upload::Entity::delete_by_id(u.id).exec(db).await?;
        moved += 1;
    }
    Ok(moved)
}

/// The attachments of these messages, in order.
pub async fn attachments_of(db: &Db, message_ids: &[Uuid]) -> StorageResult<Vec<Attachment>> {
    if message_ids.is_empty() {
        return Ok(Vec::new());
    }
    let mut out = Vec::new();
    for chunk in message_ids.chunks(500) {
        out.extend(
            attachment::Entity::find()
                .filter(attachment::Column::MessageId.is_in(chunk.iter().copied()))
                .order_by_asc(attachment::Column::MessageId)
                .order_by_asc(attachment::Column::Position)
                .all(db)
                .await?
                .into_iter()
                .map(Attachment::from),
        );
    }
    Ok(out)
}

/// How the user may see a blob: the file name and type of one of their references to it (or
/// to it as a thumbnail). None: they have none, whatever the hash.
pub async fn visible_blob(
    db: &Db,
    user_id: Uuid,
    shared_workspaces: &[Uuid],
    hash: &str,
) -> StorageResult<Option<(String, String)>> {
    use crate::storage::entities::chat_session;
    let by_hash = |h: &str| {
        sea_orm::Condition::any().add(attachment::Column::Hash.eq(h)).add(attachment::Column::ThumbHash.eq(h))
    };
    // The person's own files, and the files of sessions in workspaces shared with them.
    let shared_sessions = sea_orm::sea_query::Query::select()
        .column(chat_session::Column::Id)
        .from(chat_session::Entity)
        .and_where(chat_session::Column::WorkspaceId.is_in(shared_workspaces.iter().copied()))
        .to_owned();
    let whose = sea_orm::Condition::any()
        .add(attachment::Column::UserId.eq(user_id))
        .add(attachment::Column::SessionId.in_subquery(shared_sessions));
    if let Some(a) = attachment::Entity::find().filter(whose).filter(by_hash(hash)).one(db).await? {
        let thumb = a.hash != hash;
        return Ok(Some((a.file_name, if thumb { String::new() } else { a.mime })));
    }
    let upload = upload::Entity::find()
        .filter(upload::Column::UserId.eq(user_id))
        .filter(
            sea_orm::Condition::any()
                .add(upload::Column::Hash.eq(hash))
                .add(upload::Column::ThumbHash.eq(hash)),
        )
        .one(db)
        .await?;
    Ok(upload.map(|u| {
        let thumb = u.hash != hash;
        (u.file_name, if thumb { String::new() } else { u.mime })
    }))
}

/// Uploads never sent, older than `before` (they are dropped by collection).
pub async fn delete_stale_uploads(db: &Db, before: chrono::DateTime<Utc>) -> StorageResult<u64> {
    Ok(upload::Entity::delete_many()
        .filter(upload::Column::CreatedAt.lt(before))
        .exec(db)
        .await?
        .rows_affected)
}

/// Blobs nothing refers to any more, created before `before`.
pub async fn unreferenced(db: &Db, before: chrono::DateTime<Utc>) -> StorageResult<Vec<String>> {
    Ok(blob::Entity::find()
        .select_only()
        .column(blob::Column::Hash)
        .filter(blob::Column::Refcount.lte(0))
        .filter(blob::Column::CreatedAt.lt(before))
        .into_tuple()
        .all(db)
        .await?)
}

/// Deletes a blob's row if still unreferenced and older than `before`; true when deleted (its
/// file may then go).
pub async fn delete_blob_row(db: &Db, hash: &str, before: chrono::DateTime<Utc>) -> StorageResult<bool> {
    Ok(blob::Entity::delete_many()
        .filter(blob::Column::Hash.eq(hash))
        .filter(blob::Column::Refcount.lte(0))
        .filter(blob::Column::CreatedAt.lt(before))
        .exec(db)
        .await?
        .rows_affected
        == 1)
}

/// Whether a blob has a row.
pub async fn blob_known(db: &Db, hash: &str) -> StorageResult<bool> {
    Ok(blob::Entity::find_by_id(hash.to_string()).one(db).await?.is_some())
}

/// A blob's row.
pub async fn blob_row(db: &Db, hash: &str) -> StorageResult<Option<Blob>> {
    Ok(blob::Entity::find_by_id(hash.to_string()).one(db).await?.map(Into::into))
}

/// A file a run made (a generated image), to attach to one of its messages.
pub struct NewAttachment<'a> {
    /// The message that shows it.
    pub message_id: Uuid,
    /// The message's session.
    pub session_id: Uuid,
    /// The file.
    pub file: FileFacts<'a>,
}

/// In one transaction: the blob rows (if new) and the attachments, each after those its
/// message has already.
pub async fn insert_attachments(db: &Db, rows: &[NewAttachment<'_>]) -> StorageResult<Vec<Attachment>> {
    use sea_orm::PaginatorTrait;
    let txn = crate::storage::begin_write(db).await?;
    let mut out = Vec::with_capacity(rows.len());
    for new in rows {
        let a = &new.file;
        a.ensure_blobs(&txn).await?;
        let position = attachment::Entity::find()
            .filter(attachment::Column::MessageId.eq(new.message_id))
            .count(&txn)
            .await?;
        let row = attachment::ActiveModel {
            id: Set(Uuid::now_v7()),
            message_id: Set(new.message_id),
            session_id: Set(new.session_id),
            user_id: Set(a.user_id),
            hash: Set(a.hash.to_string()),
            thumb_hash: Set(a.thumb.map(|(h, _, _)| h.to_string())),
            file_name: Set(a.file_name.to_string()),
            size: Set(a.size),
            mime: Set(a.mime.to_string()),
            width: Set(a.dims.map(|d| d.0)),
            height: Set(a.dims.map(|d| d.1)),
            position: Set(i32::try_from(position).unwrap_or(i32::MAX)),
            created_at: Set(Utc::now()),
        }
        .insert(&txn)
        .await?;
        out.push(row.into());
    }
    txn.commit().await?;
    Ok(out)
}

/// The latest 1,000 attachments of a session's messages (every branch), newest first.
pub async fn attachments_in_session(db: &Db, session_id: Uuid) -> StorageResult<Vec<Attachment>> {
    Ok(attachment::Entity::find()
        .filter(attachment::Column::SessionId.eq(session_id))
        .order_by_desc(attachment::Column::CreatedAt)
        .order_by_desc(attachment::Column::Position)
        .limit(1000)
        .all(db)
        .await?
        .into_iter()
        .map(Into::into)
        .collect())
}
