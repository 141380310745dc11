//! `tool_calls`: every tool call a run proposed, with the decision taken on it.
use sea_orm::entity::prelude::*;

/// One row of `tool_calls`.
#[sea_orm::model]
#[derive(Clone, Debug, PartialEq, Eq, DeriveEntityModel)]
#[sea_orm(table_name = "tool_calls")]
pub struct Model {
    #[sea_orm(primary_key, auto_increment = false)]
    pub id: Uuid,
    pub run_id: Uuid,
    pub session_id: Uuid,
    pub owner_id: Uuid,
    pub message_id: Uuid,
    pub call_id: String,
    pub position: i32,
    pub tool_name: String,
    pub arguments: String,
    pub args_hash: String,
    pub tool_digest: String,
    /// The tool's description as offered (capped), for the dialog.
    pub tool_description: Option<String>,
    pub risk: String,
    pub status: String,
    pub decision: Option<String>,
    pub decided_by: Option<Uuid>,
    pub decided_at: Option<DateTimeUtc>,
    pub explanation: Option<String>,
    pub diff: Option<String>,
    pub result_message_id: Option<Uuid>,
    pub created_at: DateTimeUtc,
    pub updated_at: DateTimeUtc,
}

impl ActiveModelBehavior for ActiveModel {}

impl From<Model> for crate::model::agent::ToolCall {
    fn from(m: Model) -> Self {
        Self {
            id: m.id,
            run_id: m.run_id,
            session_id: m.session_id,
            owner_id: m.owner_id,
            message_id: m.message_id,
            call_id: m.call_id,
            position: m.position,
            tool_name: m.tool_name,
            arguments: m.arguments,
            args_hash: m.args_hash,
            tool_digest: m.tool_digest,
            tool_description: m.tool_description,
            risk: m.risk,
            status: m.status,
            decision: m.decision,
            decided_by: m.decided_by,
            decided_at: m.decided_at,
            explanation: m.explanation,
            diff: m.diff,
            result_message_id: m.result_message_id,
            created_at: m.created_at,
            updated_at: m.updated_at,
        }
    }
}
