//! `index_state`: how far the search index is known to be complete.
use sea_orm::entity::prelude::*;

/// One row of `index_state`.
#[sea_orm::model]
#[derive(Clone, Debug, PartialEq, Eq, DeriveEntityModel)]
#[sea_orm(table_name = "index_state")]
pub struct Model {
    #[sea_orm(primary_key, auto_increment = false)]
    pub name: String,
    pub watermark: DateTimeUtc,
}

impl ActiveModelBehavior for ActiveModel {}
