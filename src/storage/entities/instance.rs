//! `instances`: the Arbor processes serving one database, each with the lease it renews.
use sea_orm::entity::prelude::*;

/// One row of `instances`.
#[sea_orm::model]
#[derive(Clone, Debug, PartialEq, Eq, DeriveEntityModel)]
#[sea_orm(table_name = "instances")]
pub struct Model {
    #[sea_orm(primary_key, auto_increment = false)]
    pub id: Uuid,
    pub started_at: DateTimeUtc,
    pub renewed_at: DateTimeUtc,
    pub version: String,
}

impl ActiveModelBehavior for ActiveModel {}
