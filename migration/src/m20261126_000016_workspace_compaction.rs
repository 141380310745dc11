//! Each workspace's share of a model's context window past which a reply is preceded by an
//! automatic compression (null: the default, 0: never).
use sea_orm_migration::{prelude::*, schema::*};

#[derive(DeriveMigrationName)]
pub struct Migration;

#[derive(DeriveIden)]
enum Workspaces {
    Table,
    CompactAtPercent,
}

#[async_trait::async_trait]
impl MigrationTrait for Migration {
    async fn up(&self, manager: &SchemaManager) -> Result<(), DbErr> {
        manager
            .alter_table(
                Table::alter()
                    .table(Workspaces::Table)
                    .add_column(small_integer_null(Workspaces::CompactAtPercent))
                    .to_owned(),
            )
            .await
    }

    async fn down(&self, manager: &SchemaManager) -> Result<(), DbErr> {
        manager
            .alter_table(
                Table::alter().table(Workspaces::Table).drop_column(Workspaces::CompactAtPercent).to_owned(),
            )
            .await
    }
}
