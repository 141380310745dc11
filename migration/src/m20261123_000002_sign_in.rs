//! Sign-in: one-time admin setup tokens, email invitations and pending OIDC login flows.
use sea_orm_migration::{prelude::*, schema::*};

#[derive(DeriveMigrationName)]
pub struct Migration;

#[derive(DeriveIden)]
enum SetupTokens {
    Table,
    Id,
    CreatedAt,
    UsedAt,
    UsedBy,
}

#[derive(DeriveIden)]
enum Invitations {
    Table,
    Id,
    Email,
    Role,
    TokenHash,
    InvitedBy,
    CreatedAt,
    ExpiresAt,
    AcceptedAt,
    AcceptedBy,
}

#[derive(DeriveIden)]
enum LoginFlows {
    Table,
    Id,
    State,
    Nonce,
    PkceVerifier,
    ReturnTo,
    InvitationId,
    SetupToken,
    CreatedAt,
    ExpiresAt,
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
                    .table(SetupTokens::Table)
                    // SHA-256 hex of the token in the setup URL.
                    .col(string_len(SetupTokens::Id, 64).primary_key())
                    .col(timestamp_with_time_zone(SetupTokens::CreatedAt))
                    .col(timestamp_with_time_zone_null(SetupTokens::UsedAt))
                    .col(uuid_null(SetupTokens::UsedBy))
                    .to_owned(),
            )
            .await?;
        manager
            .create_table(
                Table::create()
                    .table(Invitations::Table)
                    .col(pk_uuid(Invitations::Id))
                    .col(string(Invitations::Email))
                    .col(string_len(Invitations::Role, 16))
                    .col(string_len_uniq(Invitations::TokenHash, 64))
                    .col(uuid_null(Invitations::InvitedBy))
                    .col(timestamp_with_time_zone(Invitations::CreatedAt))
                    .col(timestamp_with_time_zone(Invitations::ExpiresAt))
                    .col(timestamp_with_time_zone_null(Invitations::AcceptedAt))
                    .col(uuid_null(Invitations::AcceptedBy))
                    .foreign_key(
                        ForeignKey::create()
                            .name("fk_invitations_inviter")
                            .from(Invitations::Table, Invitations::InvitedBy)
                            .to(Users::Table, Users::Id)
                            .on_delete(ForeignKeyAction::SetNull),
                    )
                    .foreign_key(
                        ForeignKey::create()
                            .name("fk_invitations_accepted_by")
                            .from(Invitations::Table, Invitations::AcceptedBy)
                            .to(Users::Table, Users::Id)
                            .on_delete(ForeignKeyAction::SetNull),
                    )
                    .to_owned(),
            )
            .await?;
        manager
            .create_table(
                Table::create()
                    .table(LoginFlows::Table)
                    // SHA-256 hex of the random value in the browser's flow cookie.
                    .col(string_len(LoginFlows::Id, 64).primary_key())
                    .col(string(LoginFlows::State))
                    .col(string(LoginFlows::Nonce))
                    .col(string(LoginFlows::PkceVerifier))
                    .col(string(LoginFlows::ReturnTo))
                    .col(uuid_null(LoginFlows::InvitationId))
                    .col(string_len_null(LoginFlows::SetupToken, 64))
                    .col(timestamp_with_time_zone(LoginFlows::CreatedAt))
                    .col(timestamp_with_time_zone(LoginFlows::ExpiresAt))
                    .to_owned(),
            )
            .await?;
        Ok(())
    }

    async fn down(&self, manager: &SchemaManager) -> Result<(), DbErr> {
        manager.drop_table(Table::drop().table(LoginFlows::Table).to_owned()).await?;
        manager.drop_table(Table::drop().table(Invitations::Table).to_owned()).await?;
        manager.drop_table(Table::drop().table(SetupTokens::Table).to_owned()).await?;
        Ok(())
    }
}
