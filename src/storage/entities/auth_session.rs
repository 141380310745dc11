//! `auth_sessions`: server-side browser sessions, keyed by the SHA-256 of the cookie token.
use sea_orm::entity::prelude::*;

/// One row of `auth_sessions`.
#[sea_orm::model]
#[derive(Clone, Debug, PartialEq, Eq, DeriveEntityModel)]
#[sea_orm(table_name = "auth_sessions")]
pub struct Model {
    #[sea_orm(primary_key, auto_increment = false)]
    pub id: String,
    pub user_id: Uuid,
    pub csrf_secret: String,
    pub created_at: DateTimeUtc,
    pub expires_at: DateTimeUtc,
    pub last_seen_at: DateTimeUtc,
    pub user_agent: Option<String>,
    pub ip: Option<String>,
}

impl ActiveModelBehavior for ActiveModel {}
