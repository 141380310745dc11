//! Responses kept for the Responses API (`store`, the default): `previous_response_id` continues
//! from one, and `GET`/`DELETE /v1/responses/{id}` read and remove it. Each row holds only its
//! own turn (the new input and the answer); a chain is joined by walking `previous_id`.
use sea_orm_migration::{prelude::*, schema::*};

#[derive(DeriveMigrationName)]
pub struct Migration;

#[derive(DeriveIden)]
enum StoredResponses {
    Table,
    Id,
    UserId,
    PreviousId,
    System,
    Turn,
    Body,
    CreatedAt,
}

#[derive(DeriveIden)]
enum Users {
    Table,
    Id,
}

#[async_trait::async_trait]
impl MigrationTrait for Migration {
    async fn up(&self, manager: &SchemaManager) -> Result<(), DbErr> {
        manager
            .create_table(
                Table::create()
                    .table(StoredResponses::Table)
                    .col(string_len(StoredResponses::Id, 64).primary_key())
                    .col(uuid(StoredResponses::UserId))
                    .col(string_len_null(StoredResponses::PreviousId, 64))
                    .col(text_null(StoredResponses::System))
                    .col(text(StoredResponses::Turn))
                    .col(text(StoredResponses::Body))
                    .col(timestamp_with_time_zone(StoredResponses::CreatedAt))
                    .foreign_key(
                        ForeignKey::create()
                            .name("fk_stored_responses_user")
                            .from(StoredResponses::Table, StoredResponses::UserId)
                            .to(Users::Table, Users::Id)
                            .on_delete(ForeignKeyAction::Cascade),
                    )
                    .to_owned(),
            )
            .await?;
        manager
            .create_index(
                Index::create()
                    .name("ix_stored_responses_user_created")
                    .table(StoredResponses::Table)
                    .col(StoredResponses::UserId)
                    .col(StoredResponses::CreatedAt)
                    .to_owned(),
            )
            .await
    }

    async fn down(&self, manager: &SchemaManager) -> Result<(), DbErr> {
        manager.drop_table(Table::drop().table(StoredResponses::Table).to_owned()).await
    }
}
