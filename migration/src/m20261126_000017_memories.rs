//! What the agent remembers: one text per member (`scope` "member") and per workspace of theirs
//! (`scope` the workspace id), read and written with the memory tools and edited in settings.
use sea_orm_migration::{prelude::*, schema::*};

#[derive(DeriveMigrationName)]
pub struct Migration;

#[derive(DeriveIden)]
enum Memories {
    Table,
    OwnerId,
    Scope,
    Content,
    UpdatedAt,
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
                    .table(Memories::Table)
                    .col(uuid(Memories::OwnerId))
                    .col(string_len(Memories::Scope, 40))
                    .col(text(Memories::Content))
                    .col(timestamp_with_time_zone(Memories::UpdatedAt))
                    .primary_key(Index::create().col(Memories::OwnerId).col(Memories::Scope))
                    .foreign_key(
                        ForeignKey::create()
                            .name("fk_memories_owner")
                            .from(Memories::Table, Memories::OwnerId)
                            .to(Users::Table, Users::Id)
                            .on_delete(ForeignKeyAction::Cascade),
                    )
                    .to_owned(),
            )
            .await
    }

    async fn down(&self, manager: &SchemaManager) -> Result<(), DbErr> {
        manager.drop_table(Table::drop().table(Memories::Table).to_owned()).await
    }
}
