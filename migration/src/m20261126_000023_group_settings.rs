//! What a group grants beyond access: the role its members get at their first sign-in
//! (`default_role`, `member` unless an admin says `admin`) and the least-asking approval mode
//! its members may use (`loosest_approval_mode`; none: the instance's).
use sea_orm_migration::{prelude::*, schema::*};

#[derive(DeriveMigrationName)]
pub struct Migration;

#[derive(DeriveIden)]
enum Groups {
    Table,
    DefaultRole,
    LoosestApprovalMode,
}

#[async_trait::async_trait]
impl MigrationTrait for Migration {
    async fn up(&self, manager: &SchemaManager) -> Result<(), DbErr> {
        // SQLite adds one column per statement.
        for col in [
            string_len(Groups::DefaultRole, 16).default("member").to_owned(),
            string_len_null(Groups::LoosestApprovalMode, 16),
        ] {
            manager.alter_table(Table::alter().table(Groups::Table).add_column(col).to_owned()).await?;
        }
        Ok(())
    }

    async fn down(&self, manager: &SchemaManager) -> Result<(), DbErr> {
        for col in [Groups::DefaultRole, Groups::LoosestApprovalMode] {
            manager.alter_table(Table::alter().table(Groups::Table).drop_column(col).to_owned()).await?;
        }
        Ok(())
    }
}
