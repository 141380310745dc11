//! `users`: people who can sign in.
use sea_orm::entity::prelude::*;

/// One row of `users`.
#[sea_orm::model]
#[derive(Clone, Debug, PartialEq, Eq, DeriveEntityModel)]
#[sea_orm(table_name = "users")]
pub struct Model {
    #[sea_orm(primary_key, auto_increment = false)]
    pub id: Uuid,
    pub email: String,
    pub display_name: String,
    pub role: String,
    pub status: String,
    pub oidc_issuer: Option<String>,
    pub oidc_subject: Option<String>,
    pub password_hash: Option<String>,
    pub last_login_at: Option<DateTimeUtc>,
    pub default_model: Option<String>,
    /// An email the identity provider sent without verifying it: shown as such, never looked up.
    pub unverified_email: Option<String>,
    /// `system`, `light` or `dark`.
    pub theme: String,
    /// The identity provider's id for the person (SCIM `externalId`).
    pub external_id: Option<String>,
    /// Made by directory provisioning (SCIM).
    pub scim: bool,
    /// Deleted by directory provisioning: disabled, kept, and no longer seen by SCIM.
    pub scim_deleted: bool,
    pub created_at: DateTimeUtc,
    pub updated_at: DateTimeUtc,
}

impl ActiveModelBehavior for ActiveModel {}
