//! `usage`: one row per provider call, for totals, quotas and the admin console.
use sea_orm::entity::prelude::*;

/// One row of `usage`.
#[sea_orm::model]
#[derive(Clone, Debug, PartialEq, Eq, DeriveEntityModel)]
#[sea_orm(table_name = "usage")]
pub struct Model {
    #[sea_orm(primary_key, auto_increment = false)]
    pub id: Uuid,
    pub user_id: Option<Uuid>,
    pub session_id: Option<Uuid>,
    pub message_id: Option<Uuid>,
    pub provider: String,
    pub model: String,
    pub tokens_in: i64,
    pub tokens_out: i64,
    pub tokens_cached: i64,
    pub estimated: bool,
    pub cost_micros: Option<i64>,
    pub latency_ms: i64,
    pub via: String,
    pub created_at: DateTimeUtc,
}

impl ActiveModelBehavior for ActiveModel {}

impl From<Model> for crate::model::records::UsageRecord {
    fn from(m: Model) -> Self {
        Self {
            id: m.id,
            user_id: m.user_id,
            session_id: m.session_id,
            message_id: m.message_id,
            provider: m.provider,
            model: m.model,
            tokens_in: m.tokens_in,
            tokens_out: m.tokens_out,
            tokens_cached: m.tokens_cached,
            estimated: m.estimated,
            cost_micros: m.cost_micros,
            latency_ms: m.latency_ms,
            via: m.via,
            created_at: m.created_at,
        }
    }
}
