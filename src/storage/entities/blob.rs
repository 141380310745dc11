//! `blobs`: one stored file per content hash, with how many references name it.
use sea_orm::entity::prelude::*;

/// One row of `blobs`.
#[sea_orm::model]
#[derive(Clone, Debug, PartialEq, Eq, DeriveEntityModel)]
#[sea_orm(table_name = "blobs")]
pub struct Model {
    #[sea_orm(primary_key, auto_increment = false)]
    pub hash: String,
    pub size: i64,
    pub mime: String,
    pub refcount: i32,
    pub created_at: DateTimeUtc,
}

impl ActiveModelBehavior for ActiveModel {}

impl From<Model> for crate::model::files::Blob {
    fn from(m: Model) -> Self {
        Self { hash: m.hash, size: m.size, mime: m.mime, refcount: m.refcount, created_at: m.created_at }
    }
}
