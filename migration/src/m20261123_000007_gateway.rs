//! The gateway: per-user API access tokens (stored as hashes) and model aliases.
use sea_orm_migration::{prelude::*, schema::*};

#[derive(DeriveMigrationName)]
pub struct Migration;

#[derive(DeriveIden)]
enum ApiTokens {
    Table,
    Id,
    UserId,
    Name,
    Prefix,
    TokenHash,
    Scope,
    ExpiresAt,
    LastUsedAt,
    RevokedAt,
    CreatedAt,
}

#[derive(DeriveIden)]
enum ModelAliases {
    Table,
    UserId,
    Alias,
    Target,
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
                    .table(ApiTokens::Table)
                    .col(pk_uuid(ApiTokens::Id))
                    .col(uuid(ApiTokens::UserId))
                    .col(string_len(ApiTokens::Name, 80))
                    .col(string_len(ApiTokens::Prefix, 16))
                    .col(string_len_uniq(ApiTokens::TokenHash, 64))
                    .col(string_len(ApiTokens::Scope, 8))
                    .col(timestamp_with_time_zone_null(ApiTokens::ExpiresAt))
                    .col(timestamp_with_time_zone_null(ApiTokens::LastUsedAt))
                    .col(timestamp_with_time_zone_null(ApiTokens::RevokedAt))
                    .col(timestamp_with_time_zone(ApiTokens::CreatedAt))
                    .foreign_key(
                        ForeignKey::create()
                            .name("fk_api_tokens_user")
                            .from(ApiTokens::Table, ApiTokens::UserId)
                            .to(Users::Table, Users::Id)
                            .on_delete(ForeignKeyAction::Cascade),
                    )
                    .to_owned(),
            )
            .await?;
        manager
            .create_index(
                Index::create()
                    .name("ix_api_tokens_user")
                    .table(ApiTokens::Table)
                    .col(ApiTokens::UserId)
                    .to_owned(),
            )
            .await?;
        manager
            .create_table(
                Table::create()
                    .table(ModelAliases::Table)
                    .col(uuid(ModelAliases::UserId))
                    .col(string_len(ModelAliases::Alias, 64))
                    .col(text(ModelAliases::Target))
                    .col(timestamp_with_time_zone(ModelAliases::CreatedAt))
                    .primary_key(Index::create().col(ModelAliases::UserId).col(ModelAliases::Alias))
                    .foreign_key(
                        ForeignKey::create()
                            .name("fk_model_aliases_user")
                            .from(ModelAliases::Table, ModelAliases::UserId)
                            .to(Users::Table, Users::Id)
                            .on_delete(ForeignKeyAction::Cascade),
                    )
                    .to_owned(),
            )
            .await
    }

    async fn down(&self, manager: &SchemaManager) -> Result<(), DbErr> {
        manager.drop_table(Table::drop().table(ModelAliases::Table).to_owned()).await?;
        manager.drop_table(Table::drop().table(ApiTokens::Table).to_owned()).await
    }
}
