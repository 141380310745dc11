//! Every message keeps its size in tokens: the provider's count where it reported one, otherwise
//! Arbor's own (a BPE tokenizer), so the context gauge and compaction read sizes instead of
//! tokenizing a whole session on every page. Null for messages written before this and for
//! answers still streaming.
use sea_orm_migration::{prelude::*, schema::*};

#[derive(DeriveMigrationName)]
pub struct Migration;

#[derive(DeriveIden)]
enum Messages {
    Table,
    TokenCount,
}

#[async_trait::async_trait]
impl MigrationTrait for Migration {
    async fn up(&self, manager: &SchemaManager) -> Result<(), DbErr> {
        manager
            .alter_table(
                Table::alter()
                    .table(Messages::Table)
                    .add_column(big_integer_null(Messages::TokenCount))
                    .to_owned(),
            )
            .await
    }

    async fn down(&self, manager: &SchemaManager) -> Result<(), DbErr> {
        manager
            .alter_table(Table::alter().table(Messages::Table).drop_column(Messages::TokenCount).to_owned())
            .await
    }
}
