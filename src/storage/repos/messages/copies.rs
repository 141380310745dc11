//! A path copied from a share link into a new session.

use chrono::Utc;
use sea_orm::{ActiveModelTrait, Set};
use uuid::Uuid;

use super::{NewMessage, choose, insert_kind};
use crate::model::messages::{MessageKind, MessageStatus, Role};
use crate::providers::types::Part;
use crate::storage::{Db, StorageError, StorageResult};

/// Writes a share link's messages as the path of a new session (each the chosen child of the
/// one before), their files as attachments of `author`'s: one transaction.
pub async fn insert_copied_path(
    db: &Db,
    session_id: Uuid,
    author: Uuid,
    path: &[crate::model::teams::SnapshotMessage],
) -> StorageResult<()> {
    use crate::storage::entities::attachment;
    let txn = crate::storage::begin_write(db).await?;
    let mut parent: Option<Uuid> = None;
    let start = Utc::now();
    for (i, m) in path.iter().enumerate() {
        let id = Uuid::now_v7();
        let role = Role::parse(&m.role).ok_or_else(|| StorageError::Corrupt(format!("role {:?}", m.role)))?;
        let kind =
            MessageKind::parse(&m.kind).ok_or_else(|| StorageError::Corrupt(format!("kind {:?}", m.kind)))?;
        let parts: Vec<Part> = serde_json::from_value(m.parts.clone())
            .map_err(|e| StorageError::Corrupt(format!("parts: {e}")))?;
        let new = NewMessage {
            id,
            parent_id: parent,
            role,
            parts: &parts,
            model: m.model.as_deref(),
            status: MessageStatus::Complete,
            client_id: None,
            author_id: (role == Role::User).then_some(author),
        };
        // Strictly increasing times keep the copied order.
        let at = start + chrono::Duration::microseconds(i64::try_from(i).unwrap_or(i64::MAX));
        insert_kind(&txn, session_id, &new, kind, at).await?;
        choose(&txn, session_id, parent, id).await?;
        for (position, f) in m.files.iter().enumerate() {
            attachment::ActiveModel {
                id: Set(Uuid::now_v7()),
                message_id: Set(id),
                session_id: Set(session_id),
                user_id: Set(author),
                hash: Set(f.hash.clone()),
                thumb_hash: Set(f.thumb.clone()),
                file_name: Set(f.name.clone()),
                size: Set(f.size),
                mime: Set(f.mime.clone()),
                width: Set(None),
                height: Set(None),
                position: Set(i32::try_from(position).unwrap_or(i32::MAX)),
                created_at: Set(at),
            }
            .insert(&txn)
            .await?;
        }
        parent = Some(id);
    }
    txn.commit().await?;
    Ok(())
}
