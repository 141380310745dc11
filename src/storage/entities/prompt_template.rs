//! `prompt_templates`: members' system prompt templates, each shareable with one group.
use sea_orm::entity::prelude::*;

/// One row of `prompt_templates`.
#[sea_orm::model]
#[derive(Clone, Debug, PartialEq, Eq, DeriveEntityModel)]
#[sea_orm(table_name = "prompt_templates")]
pub struct Model {
    #[sea_orm(primary_key, auto_increment = false)]
    pub id: Uuid,
    pub owner_id: Uuid,
    pub name: String,
    pub body: String,
    /// The group it is shared with (read-only for its members).
    pub group_id: Option<Uuid>,
    pub created_at: DateTimeUtc,
    pub updated_at: DateTimeUtc,
}

impl ActiveModelBehavior for ActiveModel {}

impl From<Model> for crate::model::sessions::PromptTemplateRecord {
    fn from(m: Model) -> Self {
        Self {
            id: m.id,
            owner_id: m.owner_id,
            name: m.name,
            body: m.body,
            group_id: m.group_id,
            created_at: m.created_at,
            updated_at: m.updated_at,
        }
    }
}

impl From<crate::model::sessions::PromptTemplateRecord> for ActiveModel {
    fn from(m: crate::model::sessions::PromptTemplateRecord) -> Self {
        Self {
            id: sea_orm::ActiveValue::Set(m.id),
            owner_id: sea_orm::ActiveValue::Set(m.owner_id),
            name: sea_orm::ActiveValue::Set(m.name),
            body: sea_orm::ActiveValue::Set(m.body),
            group_id: sea_orm::ActiveValue::Set(m.group_id),
            created_at: sea_orm::ActiveValue::Set(m.created_at),
            updated_at: sea_orm::ActiveValue::Set(m.updated_at),
        }
    }
}
