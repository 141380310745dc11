//! The admin console and the vault's secrets in use: the append-only audit log, admin-managed
//! providers with their shared keys, quotas, and each user's default model.
use sea_orm_migration::sea_orm::{ConnectionTrait, DbBackend};
use sea_orm_migration::{prelude::*, schema::*};

#[derive(DeriveMigrationName)]
pub struct Migration;

#[derive(DeriveIden)]
enum AuditLog {
    Table,
    Id,
    At,
    ActorId,
    Actor,
    Action,
    Target,
    Details,
    Ip,
}

#[derive(DeriveIden)]
enum Providers {
    Table,
    Id,
    Name,
    Label,
    Kind,
    BaseUrl,
    Enabled,
    Models,
    Visibility,
    AllowedUsers,
    Rpm,
    Tpm,
    CreatedAt,
    UpdatedAt,
}

#[derive(DeriveIden)]
enum ProviderKeys {
    Table,
    Id,
    ProviderId,
    Label,
    Last4,
    Failures,
    CooldownUntil,
    LastUsedAt,
    CreatedAt,
}

#[derive(DeriveIden)]
enum Quotas {
    Table,
    Scope,
    TokensDay,
    TokensMonth,
    MicrosDay,
    MicrosMonth,
    UpdatedAt,
}

#[derive(DeriveIden)]
enum Users {
    Table,
    DefaultModel,
}

/// Refuses UPDATE and DELETE on the audit log, so no code path (or injected SQL through one)
/// can rewrite history.
const SQLITE_APPEND_ONLY: [&str; 2] = [
    "CREATE TRIGGER audit_log_no_update BEFORE UPDATE ON audit_log \
     BEGIN SELECT RAISE(ABORT, 'audit_log is append-only'); END",
    "CREATE TRIGGER audit_log_no_delete BEFORE DELETE ON audit_log \
     BEGIN SELECT RAISE(ABORT, 'audit_log is append-only'); END",
];

const POSTGRES_APPEND_ONLY: [&str; 2] = [
    "CREATE OR REPLACE FUNCTION audit_log_append_only() RETURNS trigger AS $$ \
     BEGIN RAISE EXCEPTION 'audit_log is append-only'; END; $$ LANGUAGE plpgsql",
    "CREATE TRIGGER audit_log_append_only BEFORE UPDATE OR DELETE ON audit_log \
     FOR EACH ROW EXECUTE FUNCTION audit_log_append_only()",
];

#[async_trait::async_trait]
impl MigrationTrait for Migration {
    async fn up(&self, manager: &SchemaManager) -> Result<(), DbErr> {
        manager
            .create_table(
                Table::create()
                    .table(AuditLog::Table)
                    .col(pk_uuid(AuditLog::Id))
                    .col(timestamp_with_time_zone(AuditLog::At))
                    .col(uuid_null(AuditLog::ActorId))
                    .col(string(AuditLog::Actor))
                    .col(string_len(AuditLog::Action, 64))
                    .col(string(AuditLog::Target))
                    .col(text(AuditLog::Details))
                    .col(string_len_null(AuditLog::Ip, 64))
                    .to_owned(),
            )
            .await?;
        for (name, col) in [("ix_audit_log_at", AuditLog::At), ("ix_audit_log_action", AuditLog::Action)] {
            manager
                .create_index(Index::create().name(name).table(AuditLog::Table).col(col).to_owned())
                .await?;
        }
        let statements = match manager.get_database_backend() {
            DbBackend::Sqlite => SQLITE_APPEND_ONLY,
            _ => POSTGRES_APPEND_ONLY,
        };
        for sql in statements {
            manager.get_connection().execute_unprepared(sql).await?;
        }

        manager
            .create_table(
                Table::create()
                    .table(Providers::Table)
                    .col(pk_uuid(Providers::Id))
                    .col(string_len_uniq(Providers::Name, 64))
                    .col(string(Providers::Label))
                    .col(string_len(Providers::Kind, 32))
                    .col(string(Providers::BaseUrl))
                    .col(boolean(Providers::Enabled).default(true))
                    .col(text(Providers::Models))
                    .col(string_len(Providers::Visibility, 16))
                    .col(text(Providers::AllowedUsers))
                    .col(big_integer_null(Providers::Rpm))
                    .col(big_integer_null(Providers::Tpm))
                    .col(timestamp_with_time_zone(Providers::CreatedAt))
                    .col(timestamp_with_time_zone(Providers::UpdatedAt))
                    .to_owned(),
            )
            .await?;
        // The ciphertext lives in vault_secrets under the same id (owner = the organisation).
        manager
            .create_table(
                Table::create()
                    .table(ProviderKeys::Table)
                    .col(pk_uuid(ProviderKeys::Id))
                    .col(uuid(ProviderKeys::ProviderId))
                    .col(string(ProviderKeys::Label))
                    .col(string_len(ProviderKeys::Last4, 8))
                    .col(integer(ProviderKeys::Failures).default(0))
                    .col(timestamp_with_time_zone_null(ProviderKeys::CooldownUntil))
                    .col(timestamp_with_time_zone_null(ProviderKeys::LastUsedAt))
                    .col(timestamp_with_time_zone(ProviderKeys::CreatedAt))
                    .foreign_key(
                        ForeignKey::create()
                            .from(ProviderKeys::Table, ProviderKeys::ProviderId)
                            .to(Providers::Table, Providers::Id)
                            .on_delete(ForeignKeyAction::Cascade),
                    )
                    .to_owned(),
            )
            .await?;
        manager
            .create_index(
                Index::create()
                    .name("ix_provider_keys_provider")
                    .table(ProviderKeys::Table)
                    .col(ProviderKeys::ProviderId)
                    .to_owned(),
            )
            .await?;
        // Scope is "default" for the instance default or a user's id.
        manager
            .create_table(
                Table::create()
                    .table(Quotas::Table)
                    .col(string_len(Quotas::Scope, 40).primary_key())
                    .col(big_integer_null(Quotas::TokensDay))
                    .col(big_integer_null(Quotas::TokensMonth))
                    .col(big_integer_null(Quotas::MicrosDay))
                    .col(big_integer_null(Quotas::MicrosMonth))
                    .col(timestamp_with_time_zone(Quotas::UpdatedAt))
                    .to_owned(),
            )
            .await?;
        manager
            .alter_table(
                Table::alter().table(Users::Table).add_column(string_null(Users::DefaultModel)).to_owned(),
            )
            .await?;
        Ok(())
    }

    async fn down(&self, manager: &SchemaManager) -> Result<(), DbErr> {
        manager
            .alter_table(Table::alter().table(Users::Table).drop_column(Users::DefaultModel).to_owned())
            .await?;
        manager.drop_table(Table::drop().table(Quotas::Table).to_owned()).await?;
        manager.drop_table(Table::drop().table(ProviderKeys::Table).to_owned()).await?;
        manager.drop_table(Table::drop().table(Providers::Table).to_owned()).await?;
        manager.drop_table(Table::drop().table(AuditLog::Table).to_owned()).await?;
        if manager.get_database_backend() == DbBackend::Postgres {
            manager
                .get_connection()
                .execute_unprepared("DROP FUNCTION IF EXISTS audit_log_append_only()")
                .await?;
        }
        Ok(())
    }
}
