//! Prompt templates: a member's library of system prompt templates, each optionally shared with
//! one of their groups (`group_id`; read-only for the group's members).
use sea_orm_migration::{prelude::*, schema::*};

#[derive(DeriveMigrationName)]
pub struct Migration;

#[derive(DeriveIden)]
enum PromptTemplates {
    Table,
    Id,
    OwnerId,
    Name,
    Body,
    GroupId,
    CreatedAt,
    UpdatedAt,
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
                    .table(PromptTemplates::Table)
                    .col(uuid(PromptTemplates::Id).primary_key())
                    .col(uuid(PromptTemplates::OwnerId))
                    .col(string_len(PromptTemplates::Name, 200))
                    .col(text(PromptTemplates::Body))
                    .col(uuid_null(PromptTemplates::GroupId))
                    .col(timestamp_with_time_zone(PromptTemplates::CreatedAt))
                    .col(timestamp_with_time_zone(PromptTemplates::UpdatedAt))
                    .foreign_key(
                        ForeignKey::create()
                            .name("fk_prompt_templates_owner")
                            .from(PromptTemplates::Table, PromptTemplates::OwnerId)
                            .to(Users::Table, Users::Id)
                            .on_delete(ForeignKeyAction::Cascade),
                    )
                    .to_owned(),
            )
            .await?;
        for (name, col) in [
            ("ix_prompt_templates_owner", PromptTemplates::OwnerId),
            ("ix_prompt_templates_group", PromptTemplates::GroupId),
        ] {
            manager
                .create_index(Index::create().name(name).table(PromptTemplates::Table).col(col).to_owned())
                .await?;
        }
        Ok(())
    }

    async fn down(&self, manager: &SchemaManager) -> Result<(), DbErr> {
        manager.drop_table(Table::drop().table(PromptTemplates::Table).to_owned()).await
    }
}
