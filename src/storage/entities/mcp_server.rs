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
