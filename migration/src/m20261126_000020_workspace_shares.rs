//! Shared workspaces: a workspace's owner shares it with a person or a group as viewer, editor
//! or owner (exactly one of `user_id` and `group_id` is set; each is unique per workspace), and
//! every message records who wrote it (`author_id`: the person who asked, or who started the run
//! that answered; none on messages older than this change).
use sea_orm_migration::{prelude::*, schema::*};

#[derive(DeriveMigrationName)]
pub struct Migration;

#[derive(DeriveIden)]
enum WorkspaceShares {
    Table,
    Id,
    WorkspaceId,
    UserId,
    GroupId,
    Role,
    SharedBy,
    CreatedAt,
}

#[derive(DeriveIden)]
enum Workspaces {
    Table,
    Id,
}

#[derive(DeriveIden)]
enum Users {
    Table,
    Id,
}

#[derive(DeriveIden)]
enum Groups {
    Table,
    Id,
}

#[derive(DeriveIden)]
enum Messages {
    Table,
    AuthorId,
}

#[async_trait::async_trait]
impl MigrationTrait for Migration {
    async fn up(&self, manager: &SchemaManager) -> Result<(), DbErr> {
        manager
            .create_table(
                Table::create()
                    .table(WorkspaceShares::Table)
                    .col(uuid(WorkspaceShares::Id).primary_key())
                    .col(uuid(WorkspaceShares::WorkspaceId))
                    .col(uuid_null(WorkspaceShares::UserId))
                    .col(uuid_null(WorkspaceShares::GroupId))
                    .col(string_len(WorkspaceShares::Role, 16))
                    .col(uuid_null(WorkspaceShares::SharedBy))
                    .col(timestamp_with_time_zone(WorkspaceShares::CreatedAt))
                    .foreign_key(
                        ForeignKey::create()
                            .name("fk_workspace_shares_workspace")
                            .from(WorkspaceShares::Table, WorkspaceShares::WorkspaceId)
                            .to(Workspaces::Table, Workspaces::Id)
                            .on_delete(ForeignKeyAction::Cascade),
                    )
                    .foreign_key(
                        ForeignKey::create()
                            .name("fk_workspace_shares_user")
                            .from(WorkspaceShares::Table, WorkspaceShares::UserId)
                            .to(Users::Table, Users::Id)
                            .on_delete(ForeignKeyAction::Cascade),
                    )
                    .foreign_key(
                        ForeignKey::create()
                            .name("fk_workspace_shares_group")
                            .from(WorkspaceShares::Table, WorkspaceShares::GroupId)
                            .to(Groups::Table, Groups::Id)
                            .on_delete(ForeignKeyAction::Cascade),
                    )
                    .foreign_key(
                        ForeignKey::create()
                            .name("fk_workspace_shares_shared_by")
                            .from(WorkspaceShares::Table, WorkspaceShares::SharedBy)
                            .to(Users::Table, Users::Id)
                            .on_delete(ForeignKeyAction::SetNull),
                    )
                    .to_owned(),
            )
            .await?;
        for (name, col) in [
            ("ux_workspace_shares_user", WorkspaceShares::UserId),
            ("ux_workspace_shares_group", WorkspaceShares::GroupId),
        ] {
            manager
                .create_index(
                    Index::create()
                        .name(name)
                        .table(WorkspaceShares::Table)
                        .col(col)
                        .col(WorkspaceShares::WorkspaceId)
                        .unique()
                        .to_owned(),
                )
                .await?;
        }
        manager
            .alter_table(
                Table::alter().table(Messages::Table).add_column(uuid_null(Messages::AuthorId)).to_owned(),
            )
            .await
    }

    async fn down(&self, manager: &SchemaManager) -> Result<(), DbErr> {
        manager
            .alter_table(Table::alter().table(Messages::Table).drop_column(Messages::AuthorId).to_owned())
            .await?;
        manager.drop_table(Table::drop().table(WorkspaceShares::Table).to_owned()).await
    }
}
