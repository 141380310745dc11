//! `session_events`: settings changes and branch switches of a session, for its activity log.
use sea_orm::entity::prelude::*;

/// One row of `session_events`.
#[sea_orm::model]
#[derive(Clone, Debug, PartialEq, Eq, DeriveEntityModel)]
#[sea_orm(table_name = "session_events")]
pub struct Model {
    #[sea_orm(primary_key, auto_increment = false)]
    pub id: Uuid,
    pub session_id: Uuid,
    /// Who did it.
    pub actor_id: Option<Uuid>,
    /// `settings` or `branch`.
    pub kind: String,
    /// What changed.
    pub details: Json,
    pub at: DateTimeUtc,
}

impl ActiveModelBehavior for ActiveModel {}
