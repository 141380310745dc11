//! `search_tombstones`: sessions and users deleted, for every instance's search index to forget.
use sea_orm::entity::prelude::*;

/// One row of `search_tombstones`: a session or a user (or both) whose documents go.
#[sea_orm::model]
#[derive(Clone, Debug, PartialEq, Eq, DeriveEntityModel)]
#[sea_orm(table_name = "search_tombstones")]
pub struct Model {
    /// A v7 id: ties on `created_at` are ordered by it.
    #[sea_orm(primary_key, auto_increment = false)]
    pub id: Uuid,
    pub session_id: Option<Uuid>,
    pub user_id: Option<Uuid>,
    pub created_at: DateTimeUtc,
}

impl ActiveModelBehavior for ActiveModel {}
