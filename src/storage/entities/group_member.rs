//! `group_members`: who is in which group.
use sea_orm::entity::prelude::*;

/// One row of `group_members`.
#[sea_orm::model]
#[derive(Clone, Debug, PartialEq, Eq, DeriveEntityModel)]
#[sea_orm(table_name = "group_members")]
pub struct Model {
    #[sea_orm(primary_key, auto_increment = false)]
    pub group_id: Uuid,
    #[sea_orm(primary_key, auto_increment = false)]
    pub user_id: Uuid,
    pub added_at: DateTimeUtc,
}

impl ActiveModelBehavior for ActiveModel {}
