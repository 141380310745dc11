//! `attachments`: a file on a message.
use sea_orm::entity::prelude::*;

/// One row of `attachments`.
#[sea_orm::model]
#[derive(Clone, Debug, PartialEq, Eq, DeriveEntityModel)]
#[sea_orm(table_name = "attachments")]
pub struct Model {
    #[sea_orm(primary_key, auto_increment = false)]
    pub id: Uuid,
    pub message_id: Uuid,
    pub session_id: Uuid,
    pub user_id: Uuid,
    pub hash: String,
    pub thumb_hash: Option<String>,
    pub file_name: String,
    pub size: i64,
    pub mime: String,
    pub width: Option<i32>,
    pub height: Option<i32>,
    pub position: i32,
    pub created_at: DateTimeUtc,
}

impl ActiveModelBehavior for ActiveModel {}

impl From<Model> for crate::model::files::Attachment {
    fn from(m: Model) -> Self {
        Self {
            id: m.id,
            message_id: m.message_id,
            session_id: m.session_id,
            user_id: m.user_id,
            hash: m.hash,
            thumb_hash: m.thumb_hash,
            file_name: m.file_name,
            size: m.size,
            mime: m.mime,
            width: m.width,
            height: m.height,
            position: m.position,
            created_at: m.created_at,
        }
    }
}
