//! Streaming replies: idempotent submits, error text and estimated usage on messages, one usage
//! row per provider call.
use sea_orm_migration::{prelude::*, schema::*};

#[derive(DeriveMigrationName)]
pub struct Migration;

#[derive(DeriveIden)]
enum Messages {
    Table,
    SessionId,
    ClientId,
    Error,
    UsageEstimated,
}

#[derive(DeriveIden)]
enum Usage {
    Table,
    Id,
    UserId,
    SessionId,
    MessageId,
    Provider,
    Model,
    TokensIn,
    TokensOut,
    TokensCached,
    Estimated,
    CostMicros,
    LatencyMs,
    Via,
    CreatedAt,
}

#[derive(DeriveIden)]
enum Users {
    Table,
    Id,
}

const CLIENT_ID_INDEX: &str = "ux_messages_session_client_id";

#[async_trait::async_trait]
impl MigrationTrait for Migration {
    async fn up(&self, manager: &SchemaManager) -> Result<(), DbErr> {
        // One column per statement: SQLite's ALTER TABLE adds one at a time.
        manager
            .alter_table(
                Table::alter()
                    .table(Messages::Table)
                    .add_column(string_len_null(Messages::ClientId, 64))
                    .to_owned(),
            )
            .await?;
        manager
            .alter_table(
                Table::alter().table(Messages::Table).add_column(text_null(Messages::Error)).to_owned(),
            )
            .await?;
        manager
            .alter_table(
                Table::alter()
                    .table(Messages::Table)
                    .add_column(boolean(Messages::UsageEstimated).default(false))
                    .to_owned(),
            )
            .await?;
        // A retried or double-clicked submit carries the same client id: one message, one run.
        manager
            .create_index(
                Index::create()
                    .name(CLIENT_ID_INDEX)
                    .table(Messages::Table)
                    .col(Messages::SessionId)
                    .col(Messages::ClientId)
                    .unique()
                    .to_owned(),
            )
            .await?;
        manager
            .create_table(
                Table::create()
                    .table(Usage::Table)
                    .col(pk_uuid(Usage::Id))
                    .col(uuid_null(Usage::UserId))
                    .col(uuid_null(Usage::SessionId))
                    .col(uuid_null(Usage::MessageId))
                    .col(string(Usage::Provider))
                    .col(string(Usage::Model))
                    .col(big_integer(Usage::TokensIn))
                    .col(big_integer(Usage::TokensOut))
                    .col(big_integer(Usage::TokensCached))
                    .col(boolean(Usage::Estimated))
                    .col(big_integer_null(Usage::CostMicros))
                    .col(big_integer(Usage::LatencyMs))
                    .col(string_len(Usage::Via, 8))
                    .col(timestamp_with_time_zone(Usage::CreatedAt))
                    .foreign_key(
                        ForeignKey::create()
                            .name("fk_usage_user")
                            .from(Usage::Table, Usage::UserId)
                            .to(Users::Table, Users::Id)
                            // Usage outlives a deleted user for the instance's totals.
                            .on_delete(ForeignKeyAction::SetNull),
                    )
                    .to_owned(),
            )
            .await?;
        manager
            .create_index(
                Index::create()
                    .name("ix_usage_user_created")
                    .table(Usage::Table)
                    .col(Usage::UserId)
                    .col(Usage::CreatedAt)
                    .to_owned(),
            )
            .await?;
        Ok(())
    }

    async fn down(&self, manager: &SchemaManager) -> Result<(), DbErr> {
        manager.drop_table(Table::drop().table(Usage::Table).to_owned()).await?;
        manager.drop_index(Index::drop().name(CLIENT_ID_INDEX).table(Messages::Table).to_owned()).await?;
        for col in [Messages::UsageEstimated, Messages::Error, Messages::ClientId] {
            manager.alter_table(Table::alter().table(Messages::Table).drop_column(col).to_owned()).await?;
        }
        Ok(())
    }
}
