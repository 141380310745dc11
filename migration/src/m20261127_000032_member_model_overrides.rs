//! A member's word on what a model of their own endpoint (or of a provider they call with their
//! own key) can do, per key of theirs and model; `NULL` leaves the provider's or the catalog's.
//! Rows go with the key (`secret_id`), so a deleted endpoint leaves nothing behind.
use sea_orm_migration::{prelude::*, schema::*};

#[derive(DeriveMigrationName)]
pub struct Migration;

#[derive(DeriveIden)]
enum MemberModelOverrides {
    Table,
    SecretId,
    OwnerId,
    Model,
    Tools,
    Vision,
    Reasoning,
    ContextWindow,
    MaxOutput,
    InputPerMtok,
    OutputPerMtok,
    UpdatedAt,
}

#[derive(DeriveIden)]
enum VaultSecrets {
    Table,
    Id,
}

#[async_trait::async_trait]
impl MigrationTrait for Migration {
    async fn up(&self, manager: &SchemaManager) -> Result<(), DbErr> {
        manager
            .create_table(
                Table::create()
                    .table(MemberModelOverrides::Table)
                    .col(uuid(MemberModelOverrides::SecretId))
                    .col(uuid(MemberModelOverrides::OwnerId))
                    .col(string_len(MemberModelOverrides::Model, 200))
                    .col(boolean_null(MemberModelOverrides::Tools))
                    .col(boolean_null(MemberModelOverrides::Vision))
                    .col(boolean_null(MemberModelOverrides::Reasoning))
                    .col(big_integer_null(MemberModelOverrides::ContextWindow))
                    .col(big_integer_null(MemberModelOverrides::MaxOutput))
                    .col(double_null(MemberModelOverrides::InputPerMtok))
                    .col(double_null(MemberModelOverrides::OutputPerMtok))
                    .col(timestamp_with_time_zone(MemberModelOverrides::UpdatedAt))
                    .primary_key(
                        Index::create().col(MemberModelOverrides::SecretId).col(MemberModelOverrides::Model),
                    )
                    .foreign_key(
                        ForeignKey::create()
                            .name("fk_member_model_overrides_secret")
                            .from(MemberModelOverrides::Table, MemberModelOverrides::SecretId)
                            .to(VaultSecrets::Table, VaultSecrets::Id)
                            .on_delete(ForeignKeyAction::Cascade),
                    )
                    .to_owned(),
            )
            .await?;
        manager
            .create_index(
                Index::create()
                    .name("ix_member_model_overrides_owner")
                    .table(MemberModelOverrides::Table)
                    .col(MemberModelOverrides::OwnerId)
                    .to_owned(),
            )
            .await
    }

    async fn down(&self, manager: &SchemaManager) -> Result<(), DbErr> {
        manager.drop_table(Table::drop().table(MemberModelOverrides::Table).to_owned()).await
    }
}
