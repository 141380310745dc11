//! Host folders an admin allowed a workspace's sessions to expose to the agent.
use sea_orm_migration::{prelude::*, schema::*};

#[derive(DeriveMigrationName)]
pub struct Migration;

#[derive(DeriveIden)]
enum HostRoots {
    Table,
    Id,
    WorkspaceId,
    Path,
    CreatedBy,
    CreatedAt,
}

#[derive(DeriveIden)]
enum Workspaces {
    Table,
    Id,
}

#[async_trait::async_trait]
impl MigrationTrait for Migration {
    async fn up(&self, manager: &SchemaManager) -> Result<(), DbErr> {
        manager
            .create_table(
                Table::create()
                    .table(HostRoots::Table)
                    .col(pk_uuid(HostRoots::Id))
                    .col(uuid(HostRoots::WorkspaceId))
                    .col(text(HostRoots::Path))
                    .col(uuid_null(HostRoots::CreatedBy))
                    .col(timestamp_with_time_zone(HostRoots::CreatedAt))
                    .foreign_key(
                        ForeignKey::create()
                            .name("fk_host_roots_workspace")
                            .from(HostRoots::Table, HostRoots::WorkspaceId)
                            .to(Workspaces::Table, Workspaces::Id)
                            .on_delete(ForeignKeyAction::Cascade),
                    )
                    .to_owned(),
            )
            .await?;
        manager
            .create_index(
                Index::create()
                    .name("ix_host_roots_workspace")
                    .table(HostRoots::Table)
                    .col(HostRoots::WorkspaceId)
                    .to_owned(),
            )
            .await
    }

    async fn down(&self, manager: &SchemaManager) -> Result<(), DbErr> {
        manager.drop_table(Table::drop().table(HostRoots::Table).to_owned()).await
    }
}
