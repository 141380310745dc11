//! `groups`: named sets of people, made by hand or synced from the identity provider.
use sea_orm::entity::prelude::*;

/// One row of `groups`.
#[sea_orm::model]
#[derive(Clone, Debug, PartialEq, Eq, DeriveEntityModel)]
#[sea_orm(table_name = "groups")]
pub struct Model {
    #[sea_orm(primary_key, auto_increment = false)]
    pub id: Uuid,
    pub name: String,
    pub name_key: String,
    pub managed_by_idp: bool,
    /// The identity provider's id for the group (SCIM `externalId`).
    pub external_id: Option<String>,
    /// Made by directory provisioning (SCIM).
    pub scim: bool,
    /// The role its members get at their first sign-in: `member` or `admin`.
    pub default_role: String,
    /// The least-asking approval mode its members may use; `None`: the instance's.
    pub loosest_approval_mode: Option<String>,
    pub created_at: DateTimeUtc,
}

impl ActiveModelBehavior for ActiveModel {}
