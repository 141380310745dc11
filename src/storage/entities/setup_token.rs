//! `setup_tokens`: the one-time link that makes the first administrator.
use sea_orm::entity::prelude::*;

/// One row of `setup_tokens`.
#[sea_orm::model]
#[derive(Clone, Debug, PartialEq, Eq, DeriveEntityModel)]
#[sea_orm(table_name = "setup_tokens")]
pub struct Model {
    #[sea_orm(primary_key, auto_increment = false)]
    pub id: String,
    pub created_at: DateTimeUtc,
    pub used_at: Option<DateTimeUtc>,
    pub used_by: Option<Uuid>,
}

impl ActiveModelBehavior for ActiveModel {}
