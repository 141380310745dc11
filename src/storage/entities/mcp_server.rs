//! `mcp_servers`: MCP servers the agent may use; instance-wide when `owner_id` is null.
use sea_orm::entity::prelude::*;

/// One row of `mcp_servers`.
#[sea_orm::model]
#[derive(Clone, Debug, PartialEq, Eq, DeriveEntityModel)]
#[sea_orm(table_name = "mcp_servers")]
pub struct Model {
    #[sea_orm(primary_key, auto_increment = false)]
    pub id: Uuid,
    pub owner_id: Option<Uuid>,
    pub name: String,
    pub transport: String,
    pub command: String,
    pub args: String,
    pub url: String,
    pub enabled: bool,
    pub secret_id: Option<Uuid>,
    pub secret_names: String,
    /// The group a member's own server is shared with: its members' agents get its tools.
    pub group_id: Option<Uuid>,
    /// The owner's workspace it is attached to: runs there get its tools, whoever starts them.
    pub workspace_id: Option<Uuid>,
    pub created_at: DateTimeUtc,
    pub updated_at: DateTimeUtc,
}

impl ActiveModelBehavior for ActiveModel {}

impl From<Model> for crate::model::mcp::McpServerRecord {
    fn from(m: Model) -> Self {
        Self {
            id: m.id,
            owner_id: m.owner_id,
            name: m.name,
            transport: m.transport,
            command: m.command,
            args: m.args,
            url: m.url,
            enabled: m.enabled,
            secret_id: m.secret_id,
            secret_names: m.secret_names,
            group_id: m.group_id,
            workspace_id: m.workspace_id,
            created_at: m.created_at,
            updated_at: m.updated_at,
        }
    }
}

impl From<crate::model::mcp::McpServerRecord> for ActiveModel {
    fn from(m: crate::model::mcp::McpServerRecord) -> Self {
        Self {
            id: sea_orm::ActiveValue::Set(m.id),
            owner_id: sea_orm::ActiveValue::Set(m.owner_id),
            name: sea_orm::ActiveValue::Set(m.name),
            transport: sea_orm::ActiveValue::Set(m.transport),
            command: sea_orm::ActiveValue::Set(m.command),
            args: sea_orm::ActiveValue::Set(m.args),
            url: sea_orm::ActiveValue::Set(m.url),
            enabled: sea_orm::ActiveValue::Set(m.enabled),
            secret_id: sea_orm::ActiveValue::Set(m.secret_id),
            secret_names: sea_orm::ActiveValue::Set(m.secret_names),
            group_id: sea_orm::ActiveValue::Set(m.group_id),
            workspace_id: sea_orm::ActiveValue::Set(m.workspace_id),
            created_at: sea_orm::ActiveValue::Set(m.created_at),
            updated_at: sea_orm::ActiveValue::Set(m.updated_at),
        }
    }
}
