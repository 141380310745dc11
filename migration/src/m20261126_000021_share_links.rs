//! Share links: a read-only snapshot of one path of a session, opened by an unguessable token
//! (only its SHA-256 is kept). `snapshot` holds the messages as they were when shared, so later
//! edits and deletions do not change what the link shows; the files it shows are listed in
//! `share_link_blobs`, which counts in the blobs' reference counts (like attachments) so that a
//! link keeps its files after their messages are deleted. Deleting the session, or the person
//! who made the link, deletes the link.
use sea_orm_migration::prelude::*;
use sea_orm_migration::schema::*;
use sea_orm_migration::sea_orm::DbBackend;

#[derive(DeriveMigrationName)]
pub struct Migration;

#[derive(DeriveIden)]
enum ShareLinks {
    Table,
    Id,
    TokenHash,
    SessionId,
    CreatedBy,
    Title,
    Snapshot,
    MessageCount,
    Public,
    ExpiresAt,
    CreatedAt,
}

#[derive(DeriveIden)]
enum ShareLinkBlobs {
    Table,
    LinkId,
    Hash,
    ThumbHash,
}

#[derive(DeriveIden)]
enum Sessions {
    Table,
    Id,
}

#[derive(DeriveIden)]
enum Users {
    Table,
    Id,
}

const SQLITE_REFCOUNT: [&str; 2] = [
    "CREATE TRIGGER share_link_blobs_ref AFTER INSERT ON share_link_blobs BEGIN \
     UPDATE blobs SET refcount = refcount + 1 WHERE hash = NEW.hash OR hash = NEW.thumb_hash; END",
    "CREATE TRIGGER share_link_blobs_unref AFTER DELETE ON share_link_blobs BEGIN \
     UPDATE blobs SET refcount = refcount - 1 WHERE hash = OLD.hash OR hash = OLD.thumb_hash; END",
];

/// The function `blob_refcount()` is the one attachments use (migration 10).
const POSTGRES_REFCOUNT: &str = "CREATE TRIGGER share_link_blobs_refcount AFTER INSERT OR DELETE ON \
     share_link_blobs FOR EACH ROW EXECUTE FUNCTION blob_refcount()";

#[async_trait::async_trait]
impl MigrationTrait for Migration {
    async fn up(&self, manager: &SchemaManager) -> Result<(), DbErr> {
        manager
            .create_table(
                Table::create()
                    .table(ShareLinks::Table)
                    .col(uuid(ShareLinks::Id).primary_key())
                    .col(string_len(ShareLinks::TokenHash, 64).unique_key())
                    .col(uuid(ShareLinks::SessionId))
                    .col(uuid(ShareLinks::CreatedBy))
                    .col(string_len(ShareLinks::Title, 200))
                    .col(json(ShareLinks::Snapshot))
                    .col(integer(ShareLinks::MessageCount))
                    .col(boolean(ShareLinks::Public))
                    .col(timestamp_with_time_zone_null(ShareLinks::ExpiresAt))
                    .col(timestamp_with_time_zone(ShareLinks::CreatedAt))
                    .foreign_key(
                        ForeignKey::create()
                            .name("fk_share_links_session")
                            .from(ShareLinks::Table, ShareLinks::SessionId)
                            .to(Sessions::Table, Sessions::Id)
                            .on_delete(ForeignKeyAction::Cascade),
                    )
                    .foreign_key(
                        ForeignKey::create()
                            .name("fk_share_links_created_by")
                            .from(ShareLinks::Table, ShareLinks::CreatedBy)
                            .to(Users::Table, Users::Id)
                            .on_delete(ForeignKeyAction::Cascade),
                    )
                    .to_owned(),
            )
            .await?;
        manager
            .create_index(
                Index::create()
                    .name("ix_share_links_created_by")
                    .table(ShareLinks::Table)
                    .col(ShareLinks::CreatedBy)
                    .to_owned(),
            )
            .await?;
        manager
            .create_table(
                Table::create()
                    .table(ShareLinkBlobs::Table)
                    .col(uuid(ShareLinkBlobs::LinkId))
                    .col(string_len(ShareLinkBlobs::Hash, 64))
                    .col(string_len_null(ShareLinkBlobs::ThumbHash, 64))
                    .primary_key(Index::create().col(ShareLinkBlobs::LinkId).col(ShareLinkBlobs::Hash))
                    .foreign_key(
                        ForeignKey::create()
                            .name("fk_share_link_blobs_link")
                            .from(ShareLinkBlobs::Table, ShareLinkBlobs::LinkId)
                            .to(ShareLinks::Table, ShareLinks::Id)
                            .on_delete(ForeignKeyAction::Cascade),
                    )
                    .to_owned(),
            )
            .await?;
        let conn = manager.get_connection();
        match manager.get_database_backend() {
            DbBackend::Sqlite => {
                for sql in SQLITE_REFCOUNT {
                    conn.execute_unprepared(sql).await?;
                }
            }
            _ => {
                conn.execute_unprepared(POSTGRES_REFCOUNT).await?;
            }
        }
        Ok(())
    }

    async fn down(&self, manager: &SchemaManager) -> Result<(), DbErr> {
        manager.drop_table(Table::drop().table(ShareLinkBlobs::Table).to_owned()).await?;
        manager.drop_table(Table::drop().table(ShareLinks::Table).to_owned()).await
    }
}
