//! A workspace's owner may attach one of their own provider keys to it (`key_secret_id`, a
//! secret of the owner's vault): runs in the workspace use it for its provider, whoever starts
//! them. Without it, runs use their starter's keys only.
use sea_orm_migration::{prelude::*, schema::*};

#[derive(DeriveMigrationName)]
pub struct Migration;

#[derive(DeriveIden)]
enum Workspaces {
    Table,
    KeySecretId,
}

#[async_trait::async_trait]
impl MigrationTrait for Migration {
    async fn up(&self, manager: &SchemaManager) -> Result<(), DbErr> {
        manager
            .alter_table(
                Table::alter()
                    .table(Workspaces::Table)
                    .add_column(uuid_null(Workspaces::KeySecretId))
                    .to_owned(),
            )
            .await
    }

    async fn down(&self, manager: &SchemaManager) -> Result<(), DbErr> {
        manager
            .alter_table(
                Table::alter().table(Workspaces::Table).drop_column(Workspaces::KeySecretId).to_owned(),
            )
            .await
    }
}
