//! `share_link_blobs`: a file a share link shows (counted in the blob's references).
use sea_orm::entity::prelude::*;

/// One row of `share_link_blobs`.
#[sea_orm::model]
#[derive(Clone, Debug, PartialEq, Eq, DeriveEntityModel)]
#[sea_orm(table_name = "share_link_blobs")]
pub struct Model {
    #[sea_orm(primary_key, auto_increment = false)]
    pub link_id: Uuid,
    #[sea_orm(primary_key, auto_increment = false)]
    pub hash: String,
    pub thumb_hash: Option<String>,
}

impl ActiveModelBehavior for ActiveModel {}
