//! A call's tool description as the model was offered it, so the confirmation dialog shows what
//! the tool says it does (for an MCP tool, in its server's words) beside its exact arguments, and
//! a re-approval after a server changed the description shows the new text.
use sea_orm_migration::{prelude::*, schema::*};

#[derive(DeriveMigrationName)]
pub struct Migration;

#[derive(DeriveIden)]
enum ToolCalls {
    Table,
    ToolDescription,
}

#[async_trait::async_trait]
impl MigrationTrait for Migration {
    async fn up(&self, manager: &SchemaManager) -> Result<(), DbErr> {
        manager
            .alter_table(
                Table::alter()
                    .table(ToolCalls::Table)
                    .add_column(text_null(ToolCalls::ToolDescription))
                    .to_owned(),
            )
            .await
    }

    async fn down(&self, manager: &SchemaManager) -> Result<(), DbErr> {
        manager
            .alter_table(
                Table::alter().table(ToolCalls::Table).drop_column(ToolCalls::ToolDescription).to_owned(),
            )
            .await
    }
}
