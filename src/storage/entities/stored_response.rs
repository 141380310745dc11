//! `stored_responses`: Responses API answers kept for `previous_response_id` and `GET`.
use sea_orm::entity::prelude::*;

/// One row of `stored_responses`.
#[sea_orm::model]
#[derive(Clone, Debug, PartialEq, Eq, DeriveEntityModel)]
#[sea_orm(table_name = "stored_responses")]
pub struct Model {
    #[sea_orm(primary_key, auto_increment = false)]
    pub id: String,
    pub user_id: Uuid,
    pub previous_id: Option<String>,
    pub system: Option<String>,
    /// This turn's messages (its new input, then the answer) as JSON.
    pub turn: String,
    /// The response object as returned, as JSON.
    pub body: String,
    pub created_at: DateTimeUtc,
}

impl ActiveModelBehavior for ActiveModel {}
