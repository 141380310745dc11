//! `quotas`: token and spending limits, per user or the instance default.
use sea_orm::entity::prelude::*;

/// One row of `quotas`.
#[sea_orm::model]
#[derive(Clone, Debug, PartialEq, Eq, DeriveEntityModel)]
#[sea_orm(table_name = "quotas")]
pub struct Model {
    #[sea_orm(primary_key, auto_increment = false)]
    pub scope: String,
    pub tokens_day: Option<i64>,
    pub tokens_month: Option<i64>,
    pub micros_day: Option<i64>,
    pub micros_month: Option<i64>,
    pub updated_at: DateTimeUtc,
}

impl ActiveModelBehavior for ActiveModel {}
