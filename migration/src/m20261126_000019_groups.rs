//! Groups of people: made by hand in the admin console or synced from the identity provider's
//! groups claim (`managed_by_idp`: a sign-in replaces its memberships; hand-made groups are left
//! alone). `name_key` is the name folded to lower case, unique, so "Engineering" and
//! "engineering" are one group.
use sea_orm_migration::{prelude::*, schema::*};

#[derive(DeriveMigrationName)]
pub struct Migration;

#[derive(DeriveIden)]
enum Groups {
    Table,
    Id,
    Name,
    NameKey,
    ManagedByIdp,
    CreatedAt,
}

#[derive(DeriveIden)]
enum GroupMembers {
    Table,
    GroupId,
    UserId,
    AddedAt,
}

#[derive(DeriveIden)]
enum Users {
    Table,
    Id,
}

#[async_trait::async_trait]
impl MigrationTrait for Migration {
    async fn up(&self, manager: &SchemaManager) -> Result<(), DbErr> {
        manager
            .create_table(
                Table::create()
                    .table(Groups::Table)
                    .col(uuid(Groups::Id).primary_key())
                    .col(string_len(Groups::Name, 100))
                    .col(string_len(Groups::NameKey, 100).unique_key())
                    .col(boolean(Groups::ManagedByIdp))
                    .col(timestamp_with_time_zone(Groups::CreatedAt))
                    .to_owned(),
            )
            .await?;
        manager
            .create_table(
                Table::create()
                    .table(GroupMembers::Table)
                    .col(uuid(GroupMembers::GroupId))
                    .col(uuid(GroupMembers::UserId))
                    .col(timestamp_with_time_zone(GroupMembers::AddedAt))
                    .primary_key(Index::create().col(GroupMembers::GroupId).col(GroupMembers::UserId))
                    .foreign_key(
                        ForeignKey::create()
                            .name("fk_group_members_group")
                            .from(GroupMembers::Table, GroupMembers::GroupId)
                            .to(Groups::Table, Groups::Id)
                            .on_delete(ForeignKeyAction::Cascade),
                    )
                    .foreign_key(
                        ForeignKey::create()
                            .name("fk_group_members_user")
                            .from(GroupMembers::Table, GroupMembers::UserId)
                            .to(Users::Table, Users::Id)
                            .on_delete(ForeignKeyAction::Cascade),
                    )
                    .to_owned(),
            )
            .await?;
        manager
            .create_index(
                Index::create()
                    .name("ix_group_members_user")
                    .table(GroupMembers::Table)
                    .col(GroupMembers::UserId)
                    .to_owned(),
            )
            .await
    }

    async fn down(&self, manager: &SchemaManager) -> Result<(), DbErr> {
        manager.drop_table(Table::drop().table(GroupMembers::Table).to_owned()).await?;
        manager.drop_table(Table::drop().table(Groups::Table).to_owned()).await
    }
}
