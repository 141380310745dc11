//! Models whose provider refused tool definitions (a 400 naming tools): remembered across
//! restarts, until an admin asks the providers again.
use sea_orm_migration::{prelude::*, schema::*};

#[derive(DeriveMigrationName)]
pub struct Migration;

#[derive(DeriveIden)]
enum ToolRefusals {
    Table,
    Reference,
    RefusedAt,
}

#[async_trait::async_trait]
impl MigrationTrait for Migration {
    async fn up(&self, manager: &SchemaManager) -> Result<(), DbErr> {
        manager
            .create_table(
                Table::create()
                    .table(ToolRefusals::Table)
                    .col(string_len(ToolRefusals::Reference, 300).primary_key())
                    .col(timestamp_with_time_zone(ToolRefusals::RefusedAt))
                    .to_owned(),
            )
            .await
    }

    async fn down(&self, manager: &SchemaManager) -> Result<(), DbErr> {
        manager.drop_table(Table::drop().table(ToolRefusals::Table).to_owned()).await
    }
}
