//! `audit_log`: the append-only record of who did what to what, when and from where.
use sea_orm::entity::prelude::*;

/// One row of `audit_log`.
#[sea_orm::model]
#[derive(Clone, Debug, PartialEq, Eq, DeriveEntityModel)]
#[sea_orm(table_name = "audit_log")]
pub struct Model {
    #[sea_orm(primary_key, auto_increment = false)]
    pub id: Uuid,
    pub at: DateTimeUtc,
    pub actor_id: Option<Uuid>,
    pub actor: String,
    pub action: String,
    pub target: String,
    pub details: String,
    pub ip: Option<String>,
}

impl ActiveModelBehavior for ActiveModel {}

impl From<Model> for crate::model::records::AuditEntry {
    fn from(m: Model) -> Self {
        Self {
            id: m.id,
            at: m.at,
            actor_id: m.actor_id,
            actor: m.actor,
            action: m.action,
            target: m.target,
            details: m.details,
            ip: m.ip,
        }
    }
}
