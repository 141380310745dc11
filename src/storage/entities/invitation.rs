//! `invitations`: single-use, expiring invitations by email.
use sea_orm::entity::prelude::*;

/// One row of `invitations`.
#[sea_orm::model]
#[derive(Clone, Debug, PartialEq, Eq, DeriveEntityModel)]
#[sea_orm(table_name = "invitations")]
pub struct Model {
    #[sea_orm(primary_key, auto_increment = false)]
    pub id: Uuid,
    pub email: String,
    pub role: String,
    pub token_hash: String,
    pub invited_by: Option<Uuid>,
    pub created_at: DateTimeUtc,
    pub expires_at: DateTimeUtc,
    pub accepted_at: Option<DateTimeUtc>,
    pub accepted_by: Option<Uuid>,
}

impl ActiveModelBehavior for ActiveModel {}
