//! The base tables: users, browser sessions, workspaces, chat sessions, the message tree and runs.
use sea_orm_migration::{prelude::*, schema::*};

#[derive(DeriveMigrationName)]
pub struct Migration;

#[derive(DeriveIden)]
enum Users {
    Table,
    Id,
    Email,
    DisplayName,
    Role,
    Status,
    OidcIssuer,
    OidcSubject,
    PasswordHash,
    LastLoginAt,
    CreatedAt,
    UpdatedAt,
}

#[derive(DeriveIden)]
enum AuthSessions {
    Table,
    Id,
    UserId,
    CsrfSecret,
    CreatedAt,
    ExpiresAt,
    LastSeenAt,
    UserAgent,
    Ip,
}

#[derive(DeriveIden)]
enum Workspaces {
    Table,
    Id,
    OwnerId,
    Name,
    SystemPrompt,
    DefaultModel,
    ApprovalMode,
    InferTitles,
    Settings,
    CreatedAt,
    UpdatedAt,
}

#[derive(DeriveIden)]
enum Sessions {
    Table,
    Id,
    WorkspaceId,
    OwnerId,
    Title,
    TitleUserSet,
    SystemPrompt,
    Model,
    Params,
    ApprovalMode,
    ExposedRoots,
    ActiveRootId,
    Archived,
    CreatedAt,
    UpdatedAt,
}

#[derive(DeriveIden)]
enum Messages {
    Table,
    Id,
    SessionId,
    ParentId,
    ChosenChildId,
    Role,
    Kind,
    Parts,
    Model,
    Provider,
    TokensIn,
    TokensOut,
    TokensCached,
    CostMicros,
    Status,
    CreatedAt,
    UpdatedAt,
}

#[derive(DeriveIden)]
enum Runs {
    Table,
    Id,
    SessionId,
    OwnerId,
    LeafMessageId,
    AssistantMessageId,
    Status,
    Iterations,
    Error,
    CreatedAt,
    UpdatedAt,
    FinishedAt,
}

fn fk(
    name: &str,
    from: (impl IntoIden, impl IntoIden),
    to: (impl IntoIden, impl IntoIden),
    on_delete: ForeignKeyAction,
) -> ForeignKeyCreateStatement {
    ForeignKey::create().name(name).from(from.0, from.1).to(to.0, to.1).on_delete(on_delete).to_owned()
}

#[async_trait::async_trait]
impl MigrationTrait for Migration {
    async fn up(&self, manager: &SchemaManager) -> Result<(), DbErr> {
        manager
            .create_table(
                Table::create()
                    .table(Users::Table)
                    .col(pk_uuid(Users::Id))
                    .col(string(Users::Email))
                    .col(string(Users::DisplayName))
                    .col(string_len(Users::Role, 16))
                    .col(string_len(Users::Status, 16))
                    .col(string_null(Users::OidcIssuer))
                    .col(string_null(Users::OidcSubject))
                    .col(string_null(Users::PasswordHash))
                    .col(timestamp_with_time_zone_null(Users::LastLoginAt))
                    .col(timestamp_with_time_zone(Users::CreatedAt))
                    .col(timestamp_with_time_zone(Users::UpdatedAt))
                    .to_owned(),
            )
            .await?;
        manager
            .create_index(
                Index::create()
                    .name("ux_users_oidc_identity")
                    .table(Users::Table)
                    .col(Users::OidcIssuer)
                    .col(Users::OidcSubject)
                    .unique()
                    .to_owned(),
            )
            .await?;
        manager
            .create_index(
                Index::create().name("ix_users_email").table(Users::Table).col(Users::Email).to_owned(),
            )
            .await?;

        manager
            .create_table(
                Table::create()
                    .table(AuthSessions::Table)
                    .col(string_len(AuthSessions::Id, 64).primary_key())
                    .col(uuid(AuthSessions::UserId))
                    .col(string_len(AuthSessions::CsrfSecret, 64))
                    .col(timestamp_with_time_zone(AuthSessions::CreatedAt))
                    .col(timestamp_with_time_zone(AuthSessions::ExpiresAt))
                    .col(timestamp_with_time_zone(AuthSessions::LastSeenAt))
                    .col(string_null(AuthSessions::UserAgent))
                    .col(string_len_null(AuthSessions::Ip, 64))
                    .foreign_key(&mut fk(
                        "fk_auth_sessions_user",
                        (AuthSessions::Table, AuthSessions::UserId),
                        (Users::Table, Users::Id),
                        ForeignKeyAction::Cascade,
                    ))
                    .to_owned(),
            )
            .await?;
        manager
            .create_index(
                Index::create()
                    .name("ix_auth_sessions_user")
                    .table(AuthSessions::Table)
                    .col(AuthSessions::UserId)
                    .to_owned(),
            )
            .await?;

        manager
            .create_table(
                Table::create()
                    .table(Workspaces::Table)
                    .col(pk_uuid(Workspaces::Id))
                    .col(uuid(Workspaces::OwnerId))
                    .col(string(Workspaces::Name))
                    .col(text_null(Workspaces::SystemPrompt))
                    .col(string_null(Workspaces::DefaultModel))
                    .col(string_len(Workspaces::ApprovalMode, 16).default("suggest"))
                    .col(boolean(Workspaces::InferTitles).default(true))
                    .col(json(Workspaces::Settings))
                    .col(timestamp_with_time_zone(Workspaces::CreatedAt))
                    .col(timestamp_with_time_zone(Workspaces::UpdatedAt))
                    .foreign_key(&mut fk(
                        "fk_workspaces_owner",
                        (Workspaces::Table, Workspaces::OwnerId),
                        (Users::Table, Users::Id),
                        ForeignKeyAction::Cascade,
                    ))
                    .to_owned(),
            )
            .await?;
        manager
            .create_index(
                Index::create()
                    .name("ix_workspaces_owner")
                    .table(Workspaces::Table)
                    .col(Workspaces::OwnerId)
                    .to_owned(),
            )
            .await?;

        manager
            .create_table(
                Table::create()
                    .table(Sessions::Table)
                    .col(pk_uuid(Sessions::Id))
                    .col(uuid(Sessions::WorkspaceId))
                    .col(uuid(Sessions::OwnerId))
                    .col(string(Sessions::Title))
                    .col(boolean(Sessions::TitleUserSet).default(false))
                    .col(text_null(Sessions::SystemPrompt))
                    .col(string_null(Sessions::Model))
                    .col(json(Sessions::Params))
                    .col(string_len_null(Sessions::ApprovalMode, 16))
                    .col(json(Sessions::ExposedRoots))
                    .col(uuid_null(Sessions::ActiveRootId))
                    .col(boolean(Sessions::Archived).default(false))
                    .col(timestamp_with_time_zone(Sessions::CreatedAt))
                    .col(timestamp_with_time_zone(Sessions::UpdatedAt))
                    .foreign_key(&mut fk(
                        "fk_sessions_workspace",
                        (Sessions::Table, Sessions::WorkspaceId),
                        (Workspaces::Table, Workspaces::Id),
                        ForeignKeyAction::Cascade,
                    ))
                    .foreign_key(&mut fk(
                        "fk_sessions_owner",
                        (Sessions::Table, Sessions::OwnerId),
                        (Users::Table, Users::Id),
                        ForeignKeyAction::Cascade,
                    ))
                    .to_owned(),
            )
            .await?;
        manager
            .create_index(
                Index::create()
                    .name("ix_sessions_owner_updated")
                    .table(Sessions::Table)
                    .col(Sessions::OwnerId)
                    .col(Sessions::UpdatedAt)
                    .to_owned(),
            )
            .await?;
        manager
            .create_index(
                Index::create()
                    .name("ix_sessions_workspace_updated")
                    .table(Sessions::Table)
                    .col(Sessions::WorkspaceId)
                    .col(Sessions::UpdatedAt)
                    .to_owned(),
            )
            .await?;

        manager
            .create_table(
                Table::create()
                    .table(Messages::Table)
                    .col(pk_uuid(Messages::Id))
                    .col(uuid(Messages::SessionId))
                    .col(uuid_null(Messages::ParentId))
                    .col(uuid_null(Messages::ChosenChildId))
                    .col(string_len(Messages::Role, 16))
                    .col(string_len(Messages::Kind, 16))
                    .col(json(Messages::Parts))
                    .col(string_null(Messages::Model))
                    .col(string_null(Messages::Provider))
                    .col(big_integer_null(Messages::TokensIn))
                    .col(big_integer_null(Messages::TokensOut))
                    .col(big_integer_null(Messages::TokensCached))
                    .col(big_integer_null(Messages::CostMicros))
                    .col(string_len(Messages::Status, 16))
                    .col(timestamp_with_time_zone(Messages::CreatedAt))
                    .col(timestamp_with_time_zone(Messages::UpdatedAt))
                    .foreign_key(&mut fk(
                        "fk_messages_session",
                        (Messages::Table, Messages::SessionId),
                        (Sessions::Table, Sessions::Id),
                        ForeignKeyAction::Cascade,
                    ))
                    .foreign_key(&mut fk(
                        "fk_messages_parent",
                        (Messages::Table, Messages::ParentId),
                        (Messages::Table, Messages::Id),
                        ForeignKeyAction::Cascade,
                    ))
                    .foreign_key(&mut fk(
                        "fk_messages_chosen_child",
                        (Messages::Table, Messages::ChosenChildId),
                        (Messages::Table, Messages::Id),
                        ForeignKeyAction::SetNull,
                    ))
                    .to_owned(),
            )
            .await?;
        manager
            .create_index(
                Index::create()
                    .name("ix_messages_session_parent")
                    .table(Messages::Table)
                    .col(Messages::SessionId)
                    .col(Messages::ParentId)
                    .to_owned(),
            )
            .await?;
        // Postgres does not index foreign keys by itself; deleting a branch walks parent_id.
        manager
            .create_index(
                Index::create()
                    .name("ix_messages_parent")
                    .table(Messages::Table)
                    .col(Messages::ParentId)
                    .to_owned(),
            )
            .await?;
        manager
            .create_index(
                Index::create()
                    .name("ix_messages_chosen_child")
                    .table(Messages::Table)
                    .col(Messages::ChosenChildId)
                    .to_owned(),
            )
            .await?;

        manager
            .create_table(
                Table::create()
                    .table(Runs::Table)
                    .col(pk_uuid(Runs::Id))
                    .col(uuid(Runs::SessionId))
                    .col(uuid(Runs::OwnerId))
                    .col(uuid_null(Runs::LeafMessageId))
                    .col(uuid_null(Runs::AssistantMessageId))
                    .col(string_len(Runs::Status, 32))
                    .col(integer(Runs::Iterations).default(0))
                    .col(text_null(Runs::Error))
                    .col(timestamp_with_time_zone(Runs::CreatedAt))
                    .col(timestamp_with_time_zone(Runs::UpdatedAt))
                    .col(timestamp_with_time_zone_null(Runs::FinishedAt))
                    .foreign_key(&mut fk(
                        "fk_runs_session",
                        (Runs::Table, Runs::SessionId),
                        (Sessions::Table, Sessions::Id),
                        ForeignKeyAction::Cascade,
                    ))
                    .foreign_key(&mut fk(
                        "fk_runs_owner",
                        (Runs::Table, Runs::OwnerId),
                        (Users::Table, Users::Id),
                        ForeignKeyAction::Cascade,
                    ))
                    .foreign_key(&mut fk(
                        "fk_runs_leaf_message",
                        (Runs::Table, Runs::LeafMessageId),
                        (Messages::Table, Messages::Id),
                        ForeignKeyAction::SetNull,
                    ))
                    .foreign_key(&mut fk(
                        "fk_runs_assistant_message",
                        (Runs::Table, Runs::AssistantMessageId),
                        (Messages::Table, Messages::Id),
                        ForeignKeyAction::SetNull,
                    ))
                    .to_owned(),
            )
            .await?;
        manager
            .create_index(
                Index::create()
                    .name("ix_runs_session_status")
                    .table(Runs::Table)
                    .col(Runs::SessionId)
                    .col(Runs::Status)
                    .to_owned(),
            )
            .await?;
        manager
            .create_index(
                Index::create().name("ix_runs_status").table(Runs::Table).col(Runs::Status).to_owned(),
            )
            .await?;
        Ok(())
    }

    async fn down(&self, manager: &SchemaManager) -> Result<(), DbErr> {
        // Children before parents, so foreign keys never block a drop.
        manager.drop_table(Table::drop().table(Runs::Table).to_owned()).await?;
        manager.drop_table(Table::drop().table(Messages::Table).to_owned()).await?;
        manager.drop_table(Table::drop().table(Sessions::Table).to_owned()).await?;
        manager.drop_table(Table::drop().table(Workspaces::Table).to_owned()).await?;
        manager.drop_table(Table::drop().table(AuthSessions::Table).to_owned()).await?;
        manager.drop_table(Table::drop().table(Users::Table).to_owned()).await?;
        Ok(())
    }
}
