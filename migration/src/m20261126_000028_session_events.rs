//! Session events: what a session's activity log needs that no other row keeps — settings
//! changes and branch switches, with who and when. Messages, runs, tool calls and decisions are
//! read from their own rows.
use sea_orm_migration::{prelude::*, schema::*};

#[derive(DeriveMigrationName)]
pub struct Migration;

#[derive(DeriveIden)]
enum SessionEvents {
    Table,
    Id,
    SessionId,
    ActorId,
    Kind,
    Details,
    At,
}

#[derive(DeriveIden)]
enum Sessions {
    Table,
    Id,
}

#[async_trait::async_trait]
impl MigrationTrait for Migration {
    async fn up(&self, manager: &SchemaManager) -> Result<(), DbErr> {
        manager
            .create_table(
                Table::create()
                    .table(SessionEvents::Table)
                    .col(uuid(SessionEvents::Id).primary_key())
                    .col(uuid(SessionEvents::SessionId))
                    .col(uuid_null(SessionEvents::ActorId))
                    .col(string_len(SessionEvents::Kind, 32))
                    .col(json(SessionEvents::Details))
                    .col(timestamp_with_time_zone(SessionEvents::At))
                    .foreign_key(
                        ForeignKey::create()
                            .name("fk_session_events_session")
                            .from(SessionEvents::Table, SessionEvents::SessionId)
                            .to(Sessions::Table, Sessions::Id)
                            .on_delete(ForeignKeyAction::Cascade),
                    )
                    .to_owned(),
            )
            .await?;
        manager
            .create_index(
                Index::create()
                    .name("ix_session_events_session_at")
                    .table(SessionEvents::Table)
                    .col(SessionEvents::SessionId)
                    .col(SessionEvents::At)
                    .to_owned(),
            )
            .await?;
        Ok(())
    }

    async fn down(&self, manager: &SchemaManager) -> Result<(), DbErr> {
        manager.drop_table(Table::drop().table(SessionEvents::Table).to_owned()).await
    }
}
