//! Attachments in a content-addressed blob store, and the search index's watermark.
//!
//! `blobs.refcount` counts the `uploads` (a file uploaded, not yet sent) and `attachments` (a
//! file on a message) naming a blob or its thumbnail. Triggers keep it, so it changes in the
//! same transaction as the reference, cascading deletes included.
use sea_orm_migration::sea_orm::DbBackend;
use sea_orm_migration::{prelude::*, schema::*};

#[derive(DeriveMigrationName)]
pub struct Migration;

#[derive(DeriveIden)]
enum Blobs {
    Table,
    Hash,
    Size,
    Mime,
    Refcount,
    CreatedAt,
}

#[derive(DeriveIden)]
enum Uploads {
    Table,
    Id,
    UserId,
    Hash,
    ThumbHash,
    FileName,
    Size,
    Mime,
    Width,
    Height,
    CreatedAt,
}

#[derive(DeriveIden)]
enum Attachments {
    Table,
    Id,
    MessageId,
    SessionId,
    UserId,
    Hash,
    ThumbHash,
    FileName,
    Size,
    Mime,
    Width,
    Height,
    Position,
    CreatedAt,
}

#[derive(DeriveIden)]
enum IndexState {
    Table,
    Name,
    Watermark,
}

#[derive(DeriveIden)]
enum Users {
    Table,
    Id,
}

#[derive(DeriveIden)]
enum Messages {
    Table,
    Id,
    UpdatedAt,
}

const SQLITE_REFCOUNT: [&str; 4] = [
    "CREATE TRIGGER uploads_ref AFTER INSERT ON uploads BEGIN \
     UPDATE blobs SET refcount = refcount + 1 WHERE hash = NEW.hash OR hash = NEW.thumb_hash; END",
    "CREATE TRIGGER uploads_unref AFTER DELETE ON uploads BEGIN \
     UPDATE blobs SET refcount = refcount - 1 WHERE hash = OLD.hash OR hash = OLD.thumb_hash; END",
    "CREATE TRIGGER attachments_ref AFTER INSERT ON attachments BEGIN \
     UPDATE blobs SET refcount = refcount + 1 WHERE hash = NEW.hash OR hash = NEW.thumb_hash; END",
    "CREATE TRIGGER attachments_unref AFTER DELETE ON attachments BEGIN \
     UPDATE blobs SET refcount = refcount - 1 WHERE hash = OLD.hash OR hash = OLD.thumb_hash; END",
];

const POSTGRES_REFCOUNT: [&str; 3] = [
    "CREATE OR REPLACE FUNCTION blob_refcount() RETURNS trigger AS $$ BEGIN \
     IF TG_OP = 'INSERT' THEN \
       UPDATE blobs SET refcount = refcount + 1 WHERE hash = NEW.hash OR hash = NEW.thumb_hash; RETURN NEW; \
     ELSE \
       UPDATE blobs SET refcount = refcount - 1 WHERE hash = OLD.hash OR hash = OLD.thumb_hash; RETURN OLD; \
     END IF; END; $$ LANGUAGE plpgsql",
    "CREATE TRIGGER uploads_refcount AFTER INSERT OR DELETE ON uploads FOR EACH ROW EXECUTE FUNCTION blob_refcount()",
    "CREATE TRIGGER attachments_refcount AFTER INSERT OR DELETE ON attachments FOR EACH ROW EXECUTE FUNCTION blob_refcount()",
];

#[async_trait::async_trait]
impl MigrationTrait for Migration {
    async fn up(&self, manager: &SchemaManager) -> Result<(), DbErr> {
        manager
            .create_table(
                Table::create()
                    .table(Blobs::Table)
                    .col(string_len(Blobs::Hash, 64).primary_key())
                    .col(big_integer(Blobs::Size))
                    .col(string_len(Blobs::Mime, 100))
                    .col(integer(Blobs::Refcount).default(0))
                    .col(timestamp_with_time_zone(Blobs::CreatedAt))
                    .to_owned(),
            )
            .await?;
        manager
            .create_index(
                Index::create().name("ix_blobs_refcount").table(Blobs::Table).col(Blobs::Refcount).to_owned(),
            )
            .await?;
        manager
            .create_table(
                Table::create()
                    .table(Uploads::Table)
                    .col(pk_uuid(Uploads::Id))
                    .col(uuid(Uploads::UserId))
                    .col(string_len(Uploads::Hash, 64))
                    .col(string_len_null(Uploads::ThumbHash, 64))
                    .col(text(Uploads::FileName))
                    .col(big_integer(Uploads::Size))
                    .col(string_len(Uploads::Mime, 100))
                    .col(integer_null(Uploads::Width))
                    .col(integer_null(Uploads::Height))
                    .col(timestamp_with_time_zone(Uploads::CreatedAt))
                    .foreign_key(
                        ForeignKey::create()
                            .name("fk_uploads_user")
                            .from(Uploads::Table, Uploads::UserId)
                            .to(Users::Table, Users::Id)
                            .on_delete(ForeignKeyAction::Cascade),
                    )
                    .to_owned(),
            )
            .await?;
        manager
            .create_index(
                Index::create().name("ix_uploads_user").table(Uploads::Table).col(Uploads::UserId).to_owned(),
            )
            .await?;
        manager
            .create_table(
                Table::create()
                    .table(Attachments::Table)
                    .col(pk_uuid(Attachments::Id))
                    .col(uuid(Attachments::MessageId))
                    .col(uuid(Attachments::SessionId))
                    .col(uuid(Attachments::UserId))
                    .col(string_len(Attachments::Hash, 64))
                    .col(string_len_null(Attachments::ThumbHash, 64))
                    .col(text(Attachments::FileName))
                    .col(big_integer(Attachments::Size))
                    .col(string_len(Attachments::Mime, 100))
                    .col(integer_null(Attachments::Width))
                    .col(integer_null(Attachments::Height))
                    .col(integer(Attachments::Position))
                    .col(timestamp_with_time_zone(Attachments::CreatedAt))
                    .foreign_key(
                        ForeignKey::create()
                            .name("fk_attachments_message")
                            .from(Attachments::Table, Attachments::MessageId)
                            .to(Messages::Table, Messages::Id)
                            .on_delete(ForeignKeyAction::Cascade),
                    )
                    .to_owned(),
            )
            .await?;
        for (name, col) in [
            ("ix_attachments_message", Attachments::MessageId),
            ("ix_attachments_hash", Attachments::Hash),
            ("ix_attachments_user", Attachments::UserId),
        ] {
            manager
                .create_index(Index::create().name(name).table(Attachments::Table).col(col).to_owned())
                .await?;
        }
        // The search indexer reads new messages in the order they changed.
        manager
            .create_index(
                Index::create()
                    .name("ix_messages_updated_at")
                    .table(Messages::Table)
                    .col(Messages::UpdatedAt)
                    .to_owned(),
            )
            .await?;
        manager
            .create_table(
                Table::create()
                    .table(IndexState::Table)
                    .col(string_len(IndexState::Name, 32).primary_key())
                    .col(timestamp_with_time_zone(IndexState::Watermark))
                    .to_owned(),
            )
            .await?;
        match manager.get_database_backend() {
            DbBackend::Sqlite => {
                for sql in SQLITE_REFCOUNT {
                    manager.get_connection().execute_unprepared(sql).await?;
                }
            }
            _ => {
                for sql in POSTGRES_REFCOUNT {
                    manager.get_connection().execute_unprepared(sql).await?;
                }
            }
        }
        Ok(())
    }

    async fn down(&self, manager: &SchemaManager) -> Result<(), DbErr> {
        manager.drop_table(Table::drop().table(IndexState::Table).to_owned()).await?;
        manager
            .drop_index(Index::drop().name("ix_messages_updated_at").table(Messages::Table).to_owned())
            .await?;
        manager.drop_table(Table::drop().table(Attachments::Table).to_owned()).await?;
        manager.drop_table(Table::drop().table(Uploads::Table).to_owned()).await?;
        manager.drop_table(Table::drop().table(Blobs::Table).to_owned()).await?;
        if manager.get_database_backend() == DbBackend::Postgres {
            manager.get_connection().execute_unprepared("DROP FUNCTION IF EXISTS blob_refcount()").await?;
        }
        Ok(())
    }
}
