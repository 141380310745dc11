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

impl From<Model> for crate::model::providers::ProviderKey {
    fn from(m: Model) -> Self {
        Self {
            id: m.id,
            provider_id: m.provider_id,
            label: m.label,
            last4: m.last4,
            failures: m.failures,
            cooldown_until: m.cooldown_until,
            last_used_at: m.last_used_at,
            created_at: m.created_at,
        }
    }
}
