//! A member's own MCP server may be attached to one of their workspaces (`workspace_id`): runs
//! in it get its tools whoever starts them (an editor the workspace is shared with, too),
//! called with the owner's stored headers.
use sea_orm_migration::{prelude::*, schema::*};

#[derive(DeriveMigrationName)]
pub struct Migration;

#[derive(DeriveIden)]
enum McpServers {
    Table,
    WorkspaceId,
}

#[async_trait::async_trait]
impl MigrationTrait for Migration {
    async fn up(&self, manager: &SchemaManager) -> Result<(), DbErr> {
        manager
            .alter_table(
                Table::alter()
                    .table(McpServers::Table)
                    .add_column(uuid_null(McpServers::WorkspaceId))
                    .to_owned(),
            )
            .await?;
        manager
            .create_index(
                Index::create()
                    .name("idx_mcp_servers_workspace")
                    .table(McpServers::Table)
                    .col(McpServers::WorkspaceId)
                    .to_owned(),
            )
            .await
    }

    async fn down(&self, manager: &SchemaManager) -> Result<(), DbErr> {
        manager
            .drop_index(Index::drop().name("idx_mcp_servers_workspace").table(McpServers::Table).to_owned())
            .await?;
        manager
            .alter_table(
                Table::alter().table(McpServers::Table).drop_column(McpServers::WorkspaceId).to_owned(),
            )
            .await
    }
}
