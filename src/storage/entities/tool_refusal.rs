//! `tool_refusals`: `provider/model` references whose provider refused tool definitions.
use sea_orm::entity::prelude::*;

/// One row of `tool_refusals`.
#[sea_orm::model]
#[derive(Clone, Debug, PartialEq, Eq, DeriveEntityModel)]
#[sea_orm(table_name = "tool_refusals")]
pub struct Model {
    #[sea_orm(primary_key, auto_increment = false)]
    pub reference: String,
    pub refused_at: DateTimeUtc,
}

impl ActiveModelBehavior for ActiveModel {}
