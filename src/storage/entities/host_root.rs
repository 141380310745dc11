//! `host_roots`: host folders an admin allowed a workspace's sessions to expose.
use sea_orm::entity::prelude::*;

/// One row of `host_roots`.
#[sea_orm::model]
#[derive(Clone, Debug, PartialEq, Eq, DeriveEntityModel)]
#[sea_orm(table_name = "host_roots")]
pub struct Model {
    #[sea_orm(primary_key, auto_increment = false)]
    pub id: Uuid,
    pub workspace_id: Uuid,
    pub path: String,
    pub created_by: Option<Uuid>,
    pub created_at: DateTimeUtc,
}

impl ActiveModelBehavior for ActiveModel {}

impl From<Model> for crate::model::agent::HostRoot {
    fn from(m: Model) -> Self {
        Self {
            id: m.id,
            workspace_id: m.workspace_id,
            path: m.path,
            created_by: m.created_by,
            created_at: m.created_at,
        }
    }
}
