//! Instances: several Arbor processes on one database. Each holds a lease (a row it renews);
//! a run records the instance executing it, so that when a lease lapses another instance can
//! end that instance's runs as interrupted, and no other.
use sea_orm_migration::{prelude::*, schema::*};

#[derive(DeriveMigrationName)]
pub struct Migration;

#[derive(DeriveIden)]
enum Instances {
    Table,
    Id,
    StartedAt,
    RenewedAt,
    Version,
}

#[derive(DeriveIden)]
enum Runs {
    Table,
    InstanceId,
}

#[async_trait::async_trait]
impl MigrationTrait for Migration {
    async fn up(&self, manager: &SchemaManager) -> Result<(), DbErr> {
        manager
            .create_table(
                Table::create()
                    .table(Instances::Table)
                    .col(uuid(Instances::Id).primary_key())
                    .col(timestamp_with_time_zone(Instances::StartedAt))
                    .col(timestamp_with_time_zone(Instances::RenewedAt))
                    .col(string_len(Instances::Version, 64))
                    .to_owned(),
            )
            .await?;
        manager
            .alter_table(Table::alter().table(Runs::Table).add_column(uuid_null(Runs::InstanceId)).to_owned())
            .await?;
        manager
            .create_index(
                Index::create().name("ix_runs_instance").table(Runs::Table).col(Runs::InstanceId).to_owned(),
            )
            .await?;
        Ok(())
    }

    async fn down(&self, manager: &SchemaManager) -> Result<(), DbErr> {
        manager.drop_index(Index::drop().name("ix_runs_instance").table(Runs::Table).to_owned()).await?;
        manager
            .alter_table(Table::alter().table(Runs::Table).drop_column(Runs::InstanceId).to_owned())
            .await?;
        manager.drop_table(Table::drop().table(Instances::Table).to_owned()).await?;
        Ok(())
    }
}
