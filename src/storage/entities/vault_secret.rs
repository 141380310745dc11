//! `vault_secrets`: encrypted secrets (provider keys), each bound to its owner, row and provider.
use sea_orm::entity::prelude::*;

/// One row of `vault_secrets`.
#[sea_orm::model]
#[derive(Clone, Debug, PartialEq, Eq, DeriveEntityModel)]
#[sea_orm(table_name = "vault_secrets")]
pub struct Model {
    #[sea_orm(primary_key, auto_increment = false)]
    pub id: Uuid,
    pub owner_id: Uuid,
    pub kind: String,
    pub label: String,
    pub provider: String,
    pub base_url: Option<String>,
    pub dek_version: i32,
    pub ciphertext: Vec<u8>,
    pub last4: String,
    pub created_at: DateTimeUtc,
    pub updated_at: DateTimeUtc,
}

impl ActiveModelBehavior for ActiveModel {}
