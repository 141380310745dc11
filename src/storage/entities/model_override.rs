//! `model_overrides`: an admin's word on what a model can do.
use sea_orm::entity::prelude::*;

/// One row of `model_overrides`.
#[sea_orm::model]
#[derive(Clone, Debug, PartialEq, DeriveEntityModel)]
#[sea_orm(table_name = "model_overrides")]
pub struct Model {
    #[sea_orm(primary_key, auto_increment = false)]
    pub provider: String,
    #[sea_orm(primary_key, auto_increment = false)]
    pub model: String,
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

impl From<Model> for crate::model::providers::ModelOverride {
    fn from(m: Model) -> Self {
        Self {
            provider: m.provider,
            model: m.model,
            stated: super::stated_columns!(m),
            updated_at: m.updated_at,
        }
    }
}
