//! `vault_keys`: one data key per owner and version, wrapped under the master key.
use sea_orm::entity::prelude::*;

/// One row of `vault_keys`.
#[sea_orm::model]
#[derive(Clone, Debug, PartialEq, Eq, DeriveEntityModel)]
#[sea_orm(table_name = "vault_keys")]
pub struct Model {
    #[sea_orm(primary_key, auto_increment = false)]
    pub owner_id: Uuid,
    #[sea_orm(primary_key, auto_increment = false)]
    pub dek_version: i32,
    pub kek_id: String,
    pub nonce: Vec<u8>,
    pub wrapped: Vec<u8>,
    pub encryptions: i64,
    pub created_at: DateTimeUtc,
}

impl ActiveModelBehavior for ActiveModel {}
