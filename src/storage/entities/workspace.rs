//! `workspaces`: a user's containers of sessions with their defaults.
use sea_orm::entity::prelude::*;

/// One row of `workspaces`.
#[sea_orm::model]
#[derive(Clone, Debug, PartialEq, Eq, DeriveEntityModel)]
#[sea_orm(table_name = "workspaces")]
pub struct Model {
    #[sea_orm(primary_key, auto_increment = false)]
    pub id: Uuid,
    pub owner_id: Uuid,
    pub name: String,
    pub system_prompt: Option<String>,
    pub default_model: Option<String>,
    pub approval_mode: String,
    pub infer_titles: bool,
    pub compact_at_percent: Option<i16>,
    pub settings: Json,
    /// A provider key of the owner's vault that runs in the workspace use, whoever starts them.
    pub key_secret_id: Option<Uuid>,
    pub created_at: DateTimeUtc,
    pub updated_at: DateTimeUtc,
}

impl ActiveModelBehavior for ActiveModel {}
