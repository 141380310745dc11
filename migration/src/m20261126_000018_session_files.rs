//! Files a member pinned into a session's context, or dropped from it (the files the agent read
//! or wrote are found on the path itself; only the member's choices are kept here).
use sea_orm_migration::{prelude::*, schema::*};

#[derive(DeriveMigrationName)]
pub struct Migration;

#[derive(DeriveIden)]
enum SessionFiles {
    Table,
    SessionId,
    Path,
    State,
    UpdatedAt,
}

#[derive(DeriveIden)]
enum Sessions {
    Table,
    Id,
}

#[async_trait::async_trait]
impl MigrationTrait for Migration {
    async fn up(&self, manager: &SchemaManager) -> Result<(), DbErr> {
        manager
            .create_table(
                Table::create()
                    .table(SessionFiles::Table)
                    .col(uuid(SessionFiles::SessionId))
                    .col(string_len(SessionFiles::Path, 1024))
                    .col(string_len(SessionFiles::State, 16))
                    .col(timestamp_with_time_zone(SessionFiles::UpdatedAt))
                    .primary_key(Index::create().col(SessionFiles::SessionId).col(SessionFiles::Path))
                    .foreign_key(
                        ForeignKey::create()
                            .name("fk_session_files_session")
                            .from(SessionFiles::Table, SessionFiles::SessionId)
                            .to(Sessions::Table, Sessions::Id)
                            .on_delete(ForeignKeyAction::Cascade),
                    )
                    .to_owned(),
            )
            .await
    }

    async fn down(&self, manager: &SchemaManager) -> Result<(), DbErr> {
        manager.drop_table(Table::drop().table(SessionFiles::Table).to_owned()).await
    }
}
