//! The agent: every tool call a run proposes (with its decision), "always" approval rules and
//! each session's todo list.
use sea_orm_migration::{prelude::*, schema::*};

#[derive(DeriveMigrationName)]
pub struct Migration;

#[derive(DeriveIden)]
enum ToolCalls {
    Table,
    Id,
    RunId,
    SessionId,
    OwnerId,
    MessageId,
    CallId,
    Position,
    ToolName,
    Arguments,
    ArgsHash,
    ToolDigest,
    Risk,
    Status,
    Decision,
    DecidedBy,
    DecidedAt,
    Explanation,
    Diff,
    ResultMessageId,
    CreatedAt,
    UpdatedAt,
}

#[derive(DeriveIden)]
enum ApprovalRules {
    Table,
    Id,
    UserId,
    Scope,
    ScopeId,
    ToolName,
    Pattern,
    ToolDigest,
    CreatedAt,
}

#[derive(DeriveIden)]
enum Todos {
    Table,
    Id,
    SessionId,
    Position,
    Text,
    Status,
    UpdatedAt,
}

#[derive(DeriveIden)]
enum Runs {
    Table,
    Id,
}

#[derive(DeriveIden)]
enum Sessions {
    Table,
    Id,
    EnvNote,
}

#[derive(DeriveIden)]
enum Messages {
    Table,
    Id,
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
                    .table(ToolCalls::Table)
                    .col(pk_uuid(ToolCalls::Id))
                    .col(uuid(ToolCalls::RunId))
                    .col(uuid(ToolCalls::SessionId))
                    .col(uuid(ToolCalls::OwnerId))
                    .col(uuid(ToolCalls::MessageId))
                    .col(string_len(ToolCalls::CallId, 128))
                    .col(integer(ToolCalls::Position))
                    .col(string_len(ToolCalls::ToolName, 128))
                    .col(text(ToolCalls::Arguments))
                    .col(string_len(ToolCalls::ArgsHash, 64))
                    .col(string_len(ToolCalls::ToolDigest, 64))
                    .col(string_len(ToolCalls::Risk, 16))
                    .col(string_len(ToolCalls::Status, 16))
                    .col(string_len_null(ToolCalls::Decision, 16))
                    .col(uuid_null(ToolCalls::DecidedBy))
                    .col(timestamp_with_time_zone_null(ToolCalls::DecidedAt))
                    .col(text_null(ToolCalls::Explanation))
                    .col(text_null(ToolCalls::Diff))
                    .col(uuid_null(ToolCalls::ResultMessageId))
                    .col(timestamp_with_time_zone(ToolCalls::CreatedAt))
                    .col(timestamp_with_time_zone(ToolCalls::UpdatedAt))
                    .foreign_key(
                        ForeignKey::create()
                            .name("fk_tool_calls_run")
                            .from(ToolCalls::Table, ToolCalls::RunId)
                            .to(Runs::Table, Runs::Id)
                            .on_delete(ForeignKeyAction::Cascade),
                    )
                    .foreign_key(
                        ForeignKey::create()
                            .name("fk_tool_calls_session")
                            .from(ToolCalls::Table, ToolCalls::SessionId)
                            .to(Sessions::Table, Sessions::Id)
                            .on_delete(ForeignKeyAction::Cascade),
                    )
                    .foreign_key(
                        ForeignKey::create()
                            .name("fk_tool_calls_message")
                            .from(ToolCalls::Table, ToolCalls::MessageId)
                            .to(Messages::Table, Messages::Id)
                            .on_delete(ForeignKeyAction::Cascade),
                    )
                    .to_owned(),
            )
            .await?;
        manager
            .create_index(
                Index::create()
                    .name("ux_tool_calls_message_call")
                    .table(ToolCalls::Table)
                    .col(ToolCalls::MessageId)
                    .col(ToolCalls::CallId)
                    .unique()
                    .to_owned(),
            )
            .await?;
        manager
            .create_index(
                Index::create()
                    .name("ix_tool_calls_session_status")
                    .table(ToolCalls::Table)
                    .col(ToolCalls::SessionId)
                    .col(ToolCalls::Status)
                    .to_owned(),
            )
            .await?;
        manager
            .create_index(
                Index::create()
                    .name("ix_tool_calls_run")
                    .table(ToolCalls::Table)
                    .col(ToolCalls::RunId)
                    .to_owned(),
            )
            .await?;

        manager
            .create_table(
                Table::create()
                    .table(ApprovalRules::Table)
                    .col(pk_uuid(ApprovalRules::Id))
                    .col(uuid(ApprovalRules::UserId))
                    .col(string_len(ApprovalRules::Scope, 16))
                    .col(uuid(ApprovalRules::ScopeId))
                    .col(string_len(ApprovalRules::ToolName, 128))
                    .col(text(ApprovalRules::Pattern))
                    .col(string_len(ApprovalRules::ToolDigest, 64))
                    .col(timestamp_with_time_zone(ApprovalRules::CreatedAt))
                    .foreign_key(
                        ForeignKey::create()
                            .name("fk_approval_rules_user")
                            .from(ApprovalRules::Table, ApprovalRules::UserId)
                            .to(Users::Table, Users::Id)
                            .on_delete(ForeignKeyAction::Cascade),
                    )
                    .to_owned(),
            )
            .await?;
        manager
            .create_index(
                Index::create()
                    .name("ix_approval_rules_user_tool")
                    .table(ApprovalRules::Table)
                    .col(ApprovalRules::UserId)
                    .col(ApprovalRules::ToolName)
                    .to_owned(),
            )
            .await?;

        manager
            .create_table(
                Table::create()
                    .table(Todos::Table)
                    .col(pk_uuid(Todos::Id))
                    .col(uuid(Todos::SessionId))
                    .col(integer(Todos::Position))
                    .col(text(Todos::Text))
                    .col(string_len(Todos::Status, 16))
                    .col(timestamp_with_time_zone(Todos::UpdatedAt))
                    .foreign_key(
                        ForeignKey::create()
                            .name("fk_todos_session")
                            .from(Todos::Table, Todos::SessionId)
                            .to(Sessions::Table, Sessions::Id)
                            .on_delete(ForeignKeyAction::Cascade),
                    )
                    .to_owned(),
            )
            .await?;
        manager
            .create_index(
                Index::create()
                    .name("ix_todos_session")
                    .table(Todos::Table)
                    .col(Todos::SessionId)
                    .col(Todos::Position)
                    .to_owned(),
            )
            .await?;
        // What changed in the exposed folders since the last message, told to the model once.
        manager
            .alter_table(
                Table::alter().table(Sessions::Table).add_column(text_null(Sessions::EnvNote)).to_owned(),
            )
            .await
    }

    async fn down(&self, manager: &SchemaManager) -> Result<(), DbErr> {
        manager
            .alter_table(Table::alter().table(Sessions::Table).drop_column(Sessions::EnvNote).to_owned())
            .await?;
        manager.drop_table(Table::drop().table(Todos::Table).to_owned()).await?;
        manager.drop_table(Table::drop().table(ApprovalRules::Table).to_owned()).await?;
        manager.drop_table(Table::drop().table(ToolCalls::Table).to_owned()).await
    }
}
