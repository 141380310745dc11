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

impl From<Model> for crate::model::records::StoredResponse {
    fn from(m: Model) -> Self {
        Self {
            id: m.id,
            user_id: m.user_id,
            previous_id: m.previous_id,
            system: m.system,
            turn: m.turn,
            body: m.body,
            created_at: m.created_at,
        }
    }
}
