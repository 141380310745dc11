//! `share_links`: a read-only snapshot of one path of a session, opened by a token.
use sea_orm::entity::prelude::*;

/// One row of `share_links`.
#[sea_orm::model]
#[derive(Clone, Debug, PartialEq, DeriveEntityModel)]
#[sea_orm(table_name = "share_links")]
pub struct Model {
    #[sea_orm(primary_key, auto_increment = false)]
    pub id: Uuid,
    pub token_hash: String,
    pub session_id: Uuid,
    pub created_by: Uuid,
    pub title: String,
    pub snapshot: Json,
    pub message_count: i32,
    pub public: bool,
    pub expires_at: Option<DateTimeUtc>,
    pub created_at: DateTimeUtc,
}

impl ActiveModelBehavior for ActiveModel {}
