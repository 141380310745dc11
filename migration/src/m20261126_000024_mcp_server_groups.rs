//! A member's own MCP server may be shared with one of their groups (`group_id`): its members'
//! agents get its tools, called with the owner's stored headers, which only the owner sees.
use sea_orm_migration::{prelude::*, schema::*};

#[derive(DeriveMigrationName)]
pub struct Migration;

#[derive(DeriveIden)]
enum McpServers {
    Table,
    GroupId,
}

#[async_trait::async_trait]
impl MigrationTrait for Migration {
    async fn up(&self, manager: &SchemaManager) -> Result<(), DbErr> {
        manager
            .alter_table(
                Table::alter().table(McpServers::Table).add_column(uuid_null(McpServers::GroupId)).to_owned(),
            )
            .await?;
        manager
            .create_index(
                Index::create()
                    .name("idx_mcp_servers_group")
                    .table(McpServers::Table)
                    .col(McpServers::GroupId)
                    .to_owned(),
            )
            .await
    }

    async fn down(&self, manager: &SchemaManager) -> Result<(), DbErr> {
        manager
            .drop_index(Index::drop().name("idx_mcp_servers_group").table(McpServers::Table).to_owned())
            .await?;
        manager
            .alter_table(Table::alter().table(McpServers::Table).drop_column(McpServers::GroupId).to_owned())
            .await
    }
}
