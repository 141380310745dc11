//! The key vault: the master key's id and canary, one wrapped data key per owner, and the
//! encrypted secrets (provider keys for now).
use sea_orm_migration::{prelude::*, schema::*};

#[derive(DeriveMigrationName)]
pub struct Migration;

#[derive(DeriveIden)]
enum VaultMeta {
    Table,
    Id,
    KekId,
    Canary,
    CreatedAt,
}

#[derive(DeriveIden)]
enum VaultKeys {
    Table,
    OwnerId,
    DekVersion,
    KekId,
    Nonce,
    Wrapped,
    Encryptions,
    CreatedAt,
}

#[derive(DeriveIden)]
enum VaultSecrets {
    Table,
    Id,
    OwnerId,
    Kind,
    Label,
    Provider,
    BaseUrl,
    DekVersion,
    Ciphertext,
    Last4,
    CreatedAt,
    UpdatedAt,
}

#[async_trait::async_trait]
impl MigrationTrait for Migration {
    async fn up(&self, manager: &SchemaManager) -> Result<(), DbErr> {
        manager
            .create_table(
                Table::create()
                    .table(VaultMeta::Table)
                    .col(integer(VaultMeta::Id).primary_key())
                    .col(string_len(VaultMeta::KekId, 32))
                    .col(binary(VaultMeta::Canary))
                    .col(timestamp_with_time_zone(VaultMeta::CreatedAt))
                    .to_owned(),
            )
            .await?;
        // Owners are users, or the nil id for the organisation's shared keys, so no foreign key:
        // deleting a user deletes their rows in the same transaction.
        manager
            .create_table(
                Table::create()
                    .table(VaultKeys::Table)
                    .col(uuid(VaultKeys::OwnerId))
                    .col(integer(VaultKeys::DekVersion))
                    .col(string_len(VaultKeys::KekId, 32))
                    .col(binary(VaultKeys::Nonce))
                    .col(binary(VaultKeys::Wrapped))
                    .col(big_integer(VaultKeys::Encryptions).default(0))
                    .col(timestamp_with_time_zone(VaultKeys::CreatedAt))
                    .primary_key(Index::create().col(VaultKeys::OwnerId).col(VaultKeys::DekVersion))
                    .to_owned(),
            )
            .await?;
        manager
            .create_index(
                Index::create()
                    .name("ix_vault_keys_kek")
                    .table(VaultKeys::Table)
                    .col(VaultKeys::KekId)
                    .to_owned(),
            )
            .await?;
        manager
            .create_table(
                Table::create()
                    .table(VaultSecrets::Table)
                    .col(pk_uuid(VaultSecrets::Id))
                    .col(uuid(VaultSecrets::OwnerId))
                    .col(string_len(VaultSecrets::Kind, 32))
                    .col(string(VaultSecrets::Label))
                    .col(string_len(VaultSecrets::Provider, 64))
                    .col(string_null(VaultSecrets::BaseUrl))
                    .col(integer(VaultSecrets::DekVersion))
                    .col(binary(VaultSecrets::Ciphertext))
                    .col(string_len(VaultSecrets::Last4, 8))
                    .col(timestamp_with_time_zone(VaultSecrets::CreatedAt))
                    .col(timestamp_with_time_zone(VaultSecrets::UpdatedAt))
                    .to_owned(),
            )
            .await?;
        manager
            .create_index(
                Index::create()
                    .name("ix_vault_secrets_owner")
                    .table(VaultSecrets::Table)
                    .col(VaultSecrets::OwnerId)
                    .to_owned(),
            )
            .await
    }

    async fn down(&self, manager: &SchemaManager) -> Result<(), DbErr> {
        manager.drop_table(Table::drop().table(VaultSecrets::Table).to_owned()).await?;
        manager.drop_table(Table::drop().table(VaultKeys::Table).to_owned()).await?;
        manager.drop_table(Table::drop().table(VaultMeta::Table).to_owned()).await
    }
}
