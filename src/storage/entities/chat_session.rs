//! `sessions`: one conversation tree inside a workspace.
use sea_orm::entity::prelude::*;

/// One row of `sessions`.
#[sea_orm::model]
#[derive(Clone, Debug, PartialEq, Eq, DeriveEntityModel)]
#[sea_orm(table_name = "sessions")]
pub struct Model {
    #[sea_orm(primary_key, auto_increment = false)]
    pub id: Uuid,
    pub workspace_id: Uuid,
    pub owner_id: Uuid,
    pub title: String,
    pub title_user_set: bool,
    pub system_prompt: Option<String>,
    pub model: Option<String>,
    pub params: Json,
    pub approval_mode: Option<String>,
    pub exposed_roots: Json,
    pub active_root_id: Option<Uuid>,
    pub archived: bool,
    pub env_note: Option<String>,
    pub created_at: DateTimeUtc,
    pub updated_at: DateTimeUtc,
}

impl ActiveModelBehavior for ActiveModel {}
