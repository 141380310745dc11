//! `providers`: LLM providers managed from the admin console.
use sea_orm::entity::prelude::*;

/// One row of `providers`.
#[sea_orm::model]
#[derive(Clone, Debug, PartialEq, Eq, DeriveEntityModel)]
#[sea_orm(table_name = "providers")]
pub struct Model {
    #[sea_orm(primary_key, auto_increment = false)]
    pub id: Uuid,
    #[sea_orm(unique)]
    pub name: String,
    pub label: String,
    pub kind: String,
    pub base_url: String,
    pub enabled: bool,
    pub models: String,
    pub visibility: String,
    pub allowed_users: String,
    pub rpm: Option<i64>,
    pub tpm: Option<i64>,
    pub created_at: DateTimeUtc,
    pub updated_at: DateTimeUtc,
}

impl ActiveModelBehavior for ActiveModel {}

impl From<Model> for crate::model::providers::ManagedProvider {
    fn from(m: Model) -> Self {
        Self {
            id: m.id,
            name: m.name,
            label: m.label,
            kind: m.kind,
            base_url: m.base_url,
            enabled: m.enabled,
            models: m.models,
            visibility: m.visibility,
            allowed_users: m.allowed_users,
            rpm: m.rpm,
            tpm: m.tpm,
            created_at: m.created_at,
            updated_at: m.updated_at,
        }
    }
}
