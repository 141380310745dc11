//! Attachments by session: a submit asks whether its session has any file at all (in the same
//! statement as its other checks), so that a reply in a session without files reads none.
use sea_orm_migration::prelude::*;

#[derive(DeriveMigrationName)]
pub struct Migration;

#[derive(DeriveIden)]
enum Attachments {
    Table,
    SessionId,
}

const NAME: &str = "ix_attachments_session";

#[async_trait::async_trait]
impl MigrationTrait for Migration {
    async fn up(&self, manager: &SchemaManager) -> Result<(), DbErr> {
        manager
            .create_index(
                Index::create().name(NAME).table(Attachments::Table).col(Attachments::SessionId).to_owned(),
            )
            .await
    }

    async fn down(&self, manager: &SchemaManager) -> Result<(), DbErr> {
        manager.drop_index(Index::drop().name(NAME).table(Attachments::Table).to_owned()).await
    }
}
