//! `approval_rules`: "always" decisions, for one session or one workspace.
use sea_orm::entity::prelude::*;

/// One row of `approval_rules`.
#[sea_orm::model]
#[derive(Clone, Debug, PartialEq, Eq, DeriveEntityModel)]
#[sea_orm(table_name = "approval_rules")]
pub struct Model {
    #[sea_orm(primary_key, auto_increment = false)]
    pub id: Uuid,
    pub user_id: Uuid,
    pub scope: String,
    pub scope_id: Uuid,
    pub tool_name: String,
    pub pattern: String,
    pub tool_digest: String,
    pub created_at: DateTimeUtc,
}

impl ActiveModelBehavior for ActiveModel {}

impl From<Model> for crate::model::agent::ApprovalRule {
    fn from(m: Model) -> Self {
        Self {
            id: m.id,
            user_id: m.user_id,
            scope: m.scope,
            scope_id: m.scope_id,
            tool_name: m.tool_name,
            pattern: m.pattern,
            tool_digest: m.tool_digest,
            created_at: m.created_at,
        }
    }
}
