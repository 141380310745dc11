//! `member_model_overrides`: a member's word on what a model reached with one of their own
//! keys (their endpoint, or an official provider) can do.
use sea_orm::entity::prelude::*;

/// One row of `member_model_overrides`.
#[sea_orm::model]
#[derive(Clone, Debug, PartialEq, DeriveEntityModel)]
#[sea_orm(table_name = "member_model_overrides")]
pub struct Model {
    #[sea_orm(primary_key, auto_increment = false)]
    pub secret_id: Uuid,
    #[sea_orm(primary_key, auto_increment = false)]
    pub model: String,
    pub owner_id: Uuid,
    pub tools: Option<bool>,
    pub vision: Option<bool>,
    pub reasoning: Option<bool>,
    pub context_window: Option<i64>,
    pub max_output: Option<i64>,
    pub input_per_mtok: Option<f64>,
    pub output_per_mtok: Option<f64>,
    pub updated_at: DateTimeUtc,
}

impl ActiveModelBehavior for ActiveModel {}

impl From<Model> for crate::model::providers::MemberModelOverride {
    fn from(m: Model) -> Self {
        Self {
            secret_id: m.secret_id,
            model: m.model,
            owner_id: m.owner_id,
            stated: super::stated_columns!(m),
            updated_at: m.updated_at,
        }
    }
}
