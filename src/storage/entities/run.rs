//! `runs`: one agent run extending a session's leaf.
use sea_orm::entity::prelude::*;

/// One row of `runs`.
#[sea_orm::model]
#[derive(Clone, Debug, PartialEq, Eq, DeriveEntityModel)]
#[sea_orm(table_name = "runs")]
pub struct Model {
    #[sea_orm(primary_key, auto_increment = false)]
    pub id: Uuid,
    pub session_id: Uuid,
    pub owner_id: Uuid,
    pub leaf_message_id: Option<Uuid>,
    pub assistant_message_id: Option<Uuid>,
    pub status: String,
    pub iterations: i32,
    pub error: Option<String>,
    pub created_at: DateTimeUtc,
    pub updated_at: DateTimeUtc,
    pub finished_at: Option<DateTimeUtc>,
    /// The instance executing it (several instances on one database).
    pub instance_id: Option<Uuid>,
}

impl ActiveModelBehavior for ActiveModel {}

impl From<Model> for crate::model::agent::Run {
    fn from(m: Model) -> Self {
        Self {
            id: m.id,
            session_id: m.session_id,
            owner_id: m.owner_id,
            leaf_message_id: m.leaf_message_id,
            assistant_message_id: m.assistant_message_id,
            status: m.status,
            iterations: m.iterations,
            error: m.error,
            created_at: m.created_at,
            updated_at: m.updated_at,
            finished_at: m.finished_at,
            instance_id: m.instance_id,
        }
    }
}
