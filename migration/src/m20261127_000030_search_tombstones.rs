//! Search tombstones: each Arbor instance keeps its own search index, fed from the database; a
//! deleted session or user is written here so that every instance's feeder drops its documents,
//! not only the index of the instance that deleted it. Rows are pruned after a few days.
use sea_orm_migration::{prelude::*, schema::*};

#[derive(DeriveMigrationName)]
pub struct Migration;

#[derive(DeriveIden)]
enum SearchTombstones {
    Table,
    Id,
    SessionId,
    UserId,
    CreatedAt,
}

#[async_trait::async_trait]
impl MigrationTrait for Migration {
    async fn up(&self, manager: &SchemaManager) -> Result<(), DbErr> {
        manager
            .create_table(
                Table::create()
                    .table(SearchTombstones::Table)
                    .col(uuid(SearchTombstones::Id).primary_key())
                    // No foreign keys: the session or user is gone when its tombstone is read.
                    .col(uuid_null(SearchTombstones::SessionId))
                    .col(uuid_null(SearchTombstones::UserId))
                    .col(timestamp_with_time_zone(SearchTombstones::CreatedAt))
                    .to_owned(),
            )
            .await?;
        manager
            .create_index(
                Index::create()
                    .name("ix_search_tombstones_created_at")
                    .table(SearchTombstones::Table)
                    .col(SearchTombstones::CreatedAt)
                    .col(SearchTombstones::Id)
                    .to_owned(),
            )
            .await?;
        Ok(())
    }

    async fn down(&self, manager: &SchemaManager) -> Result<(), DbErr> {
        manager.drop_table(Table::drop().table(SearchTombstones::Table).to_owned()).await
    }
}
