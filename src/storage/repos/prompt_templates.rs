//! Queries over `prompt_templates`.

use chrono::Utc;
use sea_orm::sea_query::Expr;
use sea_orm::{
    ActiveModelTrait, ColumnTrait, ConnectionTrait, EntityTrait, PaginatorTrait, QueryFilter, QueryOrder, Set,
};
use uuid::Uuid;

use crate::model::sessions::PromptTemplateRecord;
use crate::storage::entities::prompt_template;
use crate::storage::{Db, StorageResult};

/// A member's templates, by name.
pub async fn list_owned(db: &Db, owner: Uuid) -> StorageResult<Vec<PromptTemplateRecord>> {
    Ok(prompt_template::Entity::find()
        .filter(prompt_template::Column::OwnerId.eq(owner))
        .order_by_asc(prompt_template::Column::Name)
        .all(db)
        .await?
        .into_iter()
        .map(Into::into)
        .collect())
}

/// How many templates a member keeps.
pub async fn count_owned(db: &Db, owner: Uuid) -> StorageResult<u64> {
    Ok(prompt_template::Entity::find().filter(prompt_template::Column::OwnerId.eq(owner)).count(db).await?)
}

/// Others' templates shared with any of these groups, by name; at most `limit`.
pub async fn shared_with(
    db: &Db,
    user: Uuid,
    groups: &[Uuid],
    limit: u64,
) -> StorageResult<Vec<PromptTemplateRecord>> {
    if groups.is_empty() {
        return Ok(Vec::new());
    }
    Ok(prompt_template::Entity::find()
        .filter(prompt_template::Column::GroupId.is_in(groups.iter().copied()))
        .filter(prompt_template::Column::OwnerId.ne(user))
        .order_by_asc(prompt_template::Column::Name)
        .paginate(db, limit)
        .fetch_page(0)
        .await?
        .into_iter()
        .map(Into::into)
        .collect())
}

/// Stores a new template.
pub async fn insert(db: &Db, owner: Uuid, name: &str, body: &str) -> StorageResult<PromptTemplateRecord> {
    let now = Utc::now();
    Ok(prompt_template::ActiveModel {
        id: Set(Uuid::now_v7()),
        owner_id: Set(owner),
        name: Set(name.to_string()),
        body: Set(body.to_string()),
        group_id: Set(None),
        created_at: Set(now),
        updated_at: Set(now),
    }
    .insert(db)
    .await?
    .into())
}

/// One of the owner's templates.
pub async fn find_owned(db: &Db, owner: Uuid, id: Uuid) -> StorageResult<Option<PromptTemplateRecord>> {
    Ok(prompt_template::Entity::find_by_id(id)
        .filter(prompt_template::Column::OwnerId.eq(owner))
        .one(db)
        .await?
        .map(Into::into))
}

/// Deletes one of the owner's templates; `false` when it is not theirs.
pub async fn delete_owned(db: &Db, owner: Uuid, id: Uuid) -> StorageResult<bool> {
    let res = prompt_template::Entity::delete_many()
        .filter(prompt_template::Column::Id.eq(id))
        .filter(prompt_template::Column::OwnerId.eq(owner))
        .exec(db)
        .await?;
    Ok(res.rows_affected == 1)
}

/// Shares one of the owner's templates with a group, or with nobody.
pub async fn set_group(db: &Db, owner: Uuid, id: Uuid, group: Option<Uuid>) -> StorageResult<bool> {
    let res = prompt_template::Entity::update_many()
        .col_expr(prompt_template::Column::GroupId, Expr::value(group))
        .filter(prompt_template::Column::Id.eq(id))
        .filter(prompt_template::Column::OwnerId.eq(owner))
        .exec(db)
        .await?;
    Ok(res.rows_affected == 1)
}

/// Stops sharing every template with a group (it is being deleted).
pub async fn unshare_group<C: ConnectionTrait>(conn: &C, group: Uuid) -> StorageResult<()> {
    prompt_template::Entity::update_many()
        .col_expr(prompt_template::Column::GroupId, Expr::value(Option::<Uuid>::None))
        .filter(prompt_template::Column::GroupId.eq(group))
        .exec(conn)
        .await?;
    Ok(())
}
