//! `vault_meta`: the master key's id and canary (one row).
use sea_orm::entity::prelude::*;

/// The one row of `vault_meta`.
#[sea_orm::model]
#[derive(Clone, Debug, PartialEq, Eq, DeriveEntityModel)]
#[sea_orm(table_name = "vault_meta")]
pub struct Model {
    #[sea_orm(primary_key, auto_increment = false)]
    pub id: i32,
    pub kek_id: String,
    pub canary: Vec<u8>,
    pub created_at: DateTimeUtc,
}

impl ActiveModelBehavior for ActiveModel {}
