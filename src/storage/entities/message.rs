//! `messages`: the nodes of a session's tree.
use sea_orm::entity::prelude::*;

/// One row of `messages`.
#[sea_orm::model]
#[derive(Clone, Debug, PartialEq, Eq, DeriveEntityModel)]
#[sea_orm(table_name = "messages")]
pub struct Model {
    #[sea_orm(primary_key, auto_increment = false)]
    pub id: Uuid,
    pub session_id: Uuid,
    pub parent_id: Option<Uuid>,
    pub chosen_child_id: Option<Uuid>,
    pub role: String,
    pub kind: String,
    pub parts: Json,
    pub model: Option<String>,
    pub provider: Option<String>,
    pub tokens_in: Option<i64>,
    pub tokens_out: Option<i64>,
    pub tokens_cached: Option<i64>,
    pub cost_micros: Option<i64>,
    pub status: String,
    pub client_id: Option<String>,
    pub error: Option<String>,
    pub usage_estimated: bool,
    pub author_id: Option<Uuid>,
    pub token_count: Option<i64>,
    pub created_at: DateTimeUtc,
    pub updated_at: DateTimeUtc,
}

impl ActiveModelBehavior for ActiveModel {}
