//! An email a provider did not verify is kept apart from the account's email (SECURITY.md 56):
//! `users.email` holds only addresses that were checked, so lookups and links can trust it.
use sea_orm_migration::{prelude::*, schema::*};

#[derive(DeriveMigrationName)]
pub struct Migration;

#[derive(DeriveIden)]
enum Users {
    Table,
    UnverifiedEmail,
}

#[async_trait::async_trait]
impl MigrationTrait for Migration {
    async fn up(&self, manager: &SchemaManager) -> Result<(), DbErr> {
        manager
            .alter_table(
                Table::alter().table(Users::Table).add_column(string_null(Users::UnverifiedEmail)).to_owned(),
            )
            .await
    }

    async fn down(&self, manager: &SchemaManager) -> Result<(), DbErr> {
        manager
            .alter_table(Table::alter().table(Users::Table).drop_column(Users::UnverifiedEmail).to_owned())
            .await
    }
}
