//! `provider_keys`: a shared key of a provider and its health; the ciphertext is in
//! `vault_secrets`.
use sea_orm::entity::prelude::*;

/// One row of `provider_keys`.
#[sea_orm::model]
#[derive(Clone, Debug, PartialEq, Eq, DeriveEntityModel)]
#[sea_orm(table_name = "provider_keys")]
pub struct Model {
    #[sea_orm(primary_key, auto_increment = false)]
    pub id: Uuid,
    pub provider_id: Uuid,
    pub label: String,
    pub last4: String,
    pub failures: i32,
    pub cooldown_until: Option<DateTimeUtc>,
    pub last_used_at: Option<DateTimeUtc>,
    pub created_at: DateTimeUtc,
}

impl ActiveModelBehavior for ActiveModel {}
