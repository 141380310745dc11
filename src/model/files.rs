//! Files attached to messages.

use chrono::{DateTime, Utc};
use uuid::Uuid;

/// One file attached to one message (a reference to a blob by its hash).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Attachment {
    /// Stable id.
    pub id: Uuid,
    /// The message it is attached to.
    pub message_id: Uuid,
    /// That message's session.
    pub session_id: Uuid,
    /// Who attached it.
    pub user_id: Uuid,
    /// The blob's content hash.
    pub hash: String,
    /// The thumbnail's blob hash, for images that have one.
    pub thumb_hash: Option<String>,
    /// The name it was uploaded under (cleaned).
    pub file_name: String,
    /// Size in bytes.
    pub size: i64,
    /// Media type, from the bytes.
    pub mime: String,
    /// Pixel width, for images.
    pub width: Option<i32>,
    /// Pixel height, for images.
    pub height: Option<i32>,
    /// Its place among the message's files.
    pub position: i32,
    /// When it was attached.
    pub created_at: DateTime<Utc>,
}

/// A file uploaded and not yet attached to a message.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Upload {
    /// Stable id.
    pub id: Uuid,
    /// Who uploaded it.
    pub user_id: Uuid,
    /// The blob's content hash.
    pub hash: String,
    /// The thumbnail's blob hash, for images that have one.
    pub thumb_hash: Option<String>,
    /// The name it was uploaded under (cleaned).
    pub file_name: String,
    /// Size in bytes.
    pub size: i64,
    /// Media type, from the bytes.
    pub mime: String,
    /// Pixel width, for images.
    pub width: Option<i32>,
    /// Pixel height, for images.
    pub height: Option<i32>,
    /// Uploaded.
    pub created_at: DateTime<Utc>,
}

/// A stored blob: one file's bytes, shared by every reference to them.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Blob {
    /// Content hash (also its file name in the blob store).
    pub hash: String,
    /// Size in bytes.
    pub size: i64,
    /// Media type, from the bytes.
    pub mime: String,
    /// How many uploads and attachments refer to it.
    pub refcount: i32,
    /// First stored.
    pub created_at: DateTime<Utc>,
}
