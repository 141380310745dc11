//! Directory provisioning (SCIM 2.0): the identity provider's id for a person or a group
//! (`external_id`), whether SCIM made it (`scim`: a SCIM-made account may be linked to its first
//! OpenID Connect sign-in by verified email), and, for people, whether SCIM deleted them
//! (`scim_deleted`: the account is disabled and its data kept until an admin deletes it, and
//! SCIM no longer sees it).
use sea_orm_migration::{prelude::*, schema::*};

#[derive(DeriveMigrationName)]
pub struct Migration;

#[derive(DeriveIden)]
enum Users {
    Table,
    ExternalId,
    Scim,
    ScimDeleted,
}

#[derive(DeriveIden)]
enum Groups {
    Table,
    ExternalId,
    Scim,
}

#[async_trait::async_trait]
impl MigrationTrait for Migration {
    async fn up(&self, manager: &SchemaManager) -> Result<(), DbErr> {
        // SQLite adds one column per statement.
        for col in [
            string_len_null(Users::ExternalId, 255),
            boolean(Users::Scim).default(false).to_owned(),
            boolean(Users::ScimDeleted).default(false).to_owned(),
        ] {
            manager.alter_table(Table::alter().table(Users::Table).add_column(col).to_owned()).await?;
        }
        for col in [string_len_null(Groups::ExternalId, 255), boolean(Groups::Scim).default(false).to_owned()]
        {
            manager.alter_table(Table::alter().table(Groups::Table).add_column(col).to_owned()).await?;
        }
        Ok(())
    }

    async fn down(&self, manager: &SchemaManager) -> Result<(), DbErr> {
        for col in [Users::ExternalId, Users::Scim, Users::ScimDeleted] {
            manager.alter_table(Table::alter().table(Users::Table).drop_column(col).to_owned()).await?;
        }
        for col in [Groups::ExternalId, Groups::Scim] {
            manager.alter_table(Table::alter().table(Groups::Table).drop_column(col).to_owned()).await?;
        }
        Ok(())
    }
}
