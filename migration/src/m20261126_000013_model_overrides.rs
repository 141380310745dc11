//! An admin's word on what a model can do (tools, vision, reasoning, context window, output
//! limit, prices), per provider and model; `NULL` leaves the provider's or the catalog's.
use sea_orm_migration::{prelude::*, schema::*};

#[derive(DeriveMigrationName)]
pub struct Migration;

#[derive(DeriveIden)]
enum ModelOverrides {
    Table,
    Provider,
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

#[async_trait::async_trait]
impl MigrationTrait for Migration {
    async fn up(&self, manager: &SchemaManager) -> Result<(), DbErr> {
        manager
            .create_table(
                Table::create()
                    .table(ModelOverrides::Table)
                    .col(string_len(ModelOverrides::Provider, 40))
                    .col(string_len(ModelOverrides::Model, 200))
                    .col(boolean_null(ModelOverrides::Tools))
                    .col(boolean_null(ModelOverrides::Vision))
                    .col(boolean_null(ModelOverrides::Reasoning))
                    .col(big_integer_null(ModelOverrides::ContextWindow))
                    .col(big_integer_null(ModelOverrides::MaxOutput))
                    .col(double_null(ModelOverrides::InputPerMtok))
                    .col(double_null(ModelOverrides::OutputPerMtok))
                    .col(timestamp_with_time_zone(ModelOverrides::UpdatedAt))
                    .primary_key(Index::create().col(ModelOverrides::Provider).col(ModelOverrides::Model))
                    .to_owned(),
            )
            .await
    }

    async fn down(&self, manager: &SchemaManager) -> Result<(), DbErr> {
        manager.drop_table(Table::drop().table(ModelOverrides::Table).to_owned()).await
    }
}
