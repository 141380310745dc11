//! MCP servers: instance-wide ones configured by admins (owner null) and, later, members' own.
//! Their environment variables or HTTP headers are one encrypted secret in `vault_secrets`.
use sea_orm_migration::{prelude::*, schema::*};

#[derive(DeriveMigrationName)]
pub struct Migration;

#[derive(DeriveIden)]
enum McpServers {
    Table,
    Id,
    OwnerId,
    Name,
    Transport,
    Command,
    Args,
    Url,
    Enabled,
    SecretId,
    SecretNames,
    CreatedAt,
    UpdatedAt,
}

#[async_trait::async_trait]
impl MigrationTrait for Migration {
    async fn up(&self, manager: &SchemaManager) -> Result<(), DbErr> {
        manager
            .create_table(
                Table::create()
                    .table(McpServers::Table)
                    .col(pk_uuid(McpServers::Id))
                    .col(uuid_null(McpServers::OwnerId))
                    .col(string_len(McpServers::Name, 40))
                    .col(string_len(McpServers::Transport, 8))
                    .col(text(McpServers::Command))
                    .col(text(McpServers::Args))
                    .col(text(McpServers::Url))
                    .col(boolean(McpServers::Enabled).default(true))
                    .col(uuid_null(McpServers::SecretId))
                    .col(text(McpServers::SecretNames))
                    .col(timestamp_with_time_zone(McpServers::CreatedAt))
                    .col(timestamp_with_time_zone(McpServers::UpdatedAt))
                    .to_owned(),
            )
            .await?;
        manager
            .create_index(
                Index::create()
                    .name("ix_mcp_servers_owner_name")
                    .table(McpServers::Table)
                    .col(McpServers::OwnerId)
                    .col(McpServers::Name)
                    .to_owned(),
            )
            .await
    }

    async fn down(&self, manager: &SchemaManager) -> Result<(), DbErr> {
        manager.drop_table(Table::drop().table(McpServers::Table).to_owned()).await
    }
}
