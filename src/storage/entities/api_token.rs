//! `api_tokens`: a user's API access tokens, stored only as SHA-256 hashes.
use sea_orm::entity::prelude::*;

/// One row of `api_tokens`.
#[sea_orm::model]
#[derive(Clone, Debug, PartialEq, Eq, DeriveEntityModel)]
#[sea_orm(table_name = "api_tokens")]
pub struct Model {
    #[sea_orm(primary_key, auto_increment = false)]
    pub id: Uuid,
    pub user_id: Uuid,
    pub name: String,
    pub prefix: String,
    #[sea_orm(unique)]
    pub token_hash: String,
    pub scope: String,
    pub expires_at: Option<DateTimeUtc>,
    pub last_used_at: Option<DateTimeUtc>,
    pub revoked_at: Option<DateTimeUtc>,
    pub created_at: DateTimeUtc,
}

impl ActiveModelBehavior for ActiveModel {}

impl From<Model> for crate::model::accounts::TokenRecord {
    fn from(m: Model) -> Self {
        Self {
            id: m.id,
            user_id: m.user_id,
            name: m.name,
            prefix: m.prefix,
            token_hash: m.token_hash,
            scope: m.scope,
            expires_at: m.expires_at,
            last_used_at: m.last_used_at,
            revoked_at: m.revoked_at,
            created_at: m.created_at,
        }
    }
}

impl From<crate::model::accounts::TokenRecord> for ActiveModel {
    fn from(m: crate::model::accounts::TokenRecord) -> Self {
        Self {
            id: sea_orm::ActiveValue::Set(m.id),
            user_id: sea_orm::ActiveValue::Set(m.user_id),
            name: sea_orm::ActiveValue::Set(m.name),
            prefix: sea_orm::ActiveValue::Set(m.prefix),
            token_hash: sea_orm::ActiveValue::Set(m.token_hash),
            scope: sea_orm::ActiveValue::Set(m.scope),
            expires_at: sea_orm::ActiveValue::Set(m.expires_at),
            last_used_at: sea_orm::ActiveValue::Set(m.last_used_at),
            revoked_at: sea_orm::ActiveValue::Set(m.revoked_at),
            created_at: sea_orm::ActiveValue::Set(m.created_at),
        }
    }
}
