//! `todos`: a session's todo list, written by the `write_todo` tool.
use sea_orm::entity::prelude::*;

/// One row of `todos`.
#[sea_orm::model]
#[derive(Clone, Debug, PartialEq, Eq, DeriveEntityModel)]
#[sea_orm(table_name = "todos")]
pub struct Model {
    #[sea_orm(primary_key, auto_increment = false)]
    pub id: Uuid,
    pub session_id: Uuid,
    pub position: i32,
    pub text: String,
    pub status: String,
    pub updated_at: DateTimeUtc,
}

impl ActiveModelBehavior for ActiveModel {}

impl From<Model> for crate::model::agent::TodoRecord {
    fn from(m: Model) -> Self {
        Self {
            id: m.id,
            session_id: m.session_id,
            position: m.position,
            text: m.text,
            status: m.status,
            updated_at: m.updated_at,
        }
    }
}
