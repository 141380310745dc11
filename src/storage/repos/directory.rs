//! Queries for directory provisioning (SCIM): people and groups as the identity provider sees
//! them. People SCIM deleted are left out of every query here.

use chrono::Utc;
use sea_orm::sea_query::Expr;
use sea_orm::{
    ActiveModelTrait, ColumnTrait, ConnectionTrait, EntityTrait, PaginatorTrait, QueryFilter, QueryOrder,
    QuerySelect, Set,
};
use uuid::Uuid;

use crate::model::teams::{DirectoryFilter, DirectoryGroup, DirectoryUser, name_key};
use crate::storage::changes::{self, Kept};
use crate::storage::entities::{group, group_member, user};
use crate::storage::{Db, StorageResult};

fn to_user(m: user::Model) -> DirectoryUser {
    DirectoryUser {
        id: m.id,
        email: m.email,
        display_name: m.display_name,
        external_id: m.external_id,
        active: m.status == "active",
        created_at: m.created_at,
        updated_at: m.updated_at,
    }
}

fn to_group(m: group::Model) -> DirectoryGroup {
    DirectoryGroup { id: m.id, name: m.name, external_id: m.external_id, created_at: m.created_at }
}

fn live_users() -> sea_orm::Select<user::Entity> {
    user::Entity::find().filter(user::Column::ScimDeleted.eq(false))
}

/// One person SCIM may see.
pub async fn find_user(db: &Db, id: Uuid) -> StorageResult<Option<DirectoryUser>> {
    Ok(live_users().filter(user::Column::Id.eq(id)).one(db).await?.map(to_user))
}

/// One page of the people SCIM may see, oldest first, and how many match in all.
pub async fn list_users(
    db: &Db,
    filter: &DirectoryFilter,
    offset: u64,
    limit: u64,
) -> StorageResult<(Vec<DirectoryUser>, u64)> {
    let q = match filter {
        DirectoryFilter::All => live_users(),
        DirectoryFilter::Email(e) => live_users().filter(user::Column::Email.eq(e.to_lowercase())),
        DirectoryFilter::ExternalId(x) => live_users().filter(user::Column::ExternalId.eq(x.as_str())),
        DirectoryFilter::DisplayName(n) => live_users().filter(user::Column::DisplayName.eq(n.as_str())),
        DirectoryFilter::Id(id) => live_users().filter(user::Column::Id.eq(*id)),
    };
    let total = q.clone().count(db).await?;
    let rows = q
        .order_by_asc(user::Column::CreatedAt)
        .order_by_asc(user::Column::Id)
        .offset(offset)
        .limit(limit)
        .all(db)
        .await?;
    Ok((rows.into_iter().map(to_user).collect(), total))
}

/// Whether someone SCIM sees, other than `except`, has this email.
pub async fn email_taken(db: &Db, email: &str, except: Option<Uuid>) -> StorageResult<bool> {
    let mut q = live_users().filter(user::Column::Email.eq(email.to_lowercase()));
    if let Some(id) = except {
        q = q.filter(user::Column::Id.ne(id));
    }
    Ok(q.count(db).await? > 0)
}

/// A person made by SCIM: a member, signing in through the identity provider.
pub async fn insert_user(
    db: &Db,
    email: &str,
    display_name: &str,
    external_id: Option<&str>,
    active: bool,
) -> StorageResult<DirectoryUser> {
    let now = Utc::now();
    let row = user::ActiveModel {
        id: Set(Uuid::now_v7()),
        email: Set(email.to_lowercase()),
        display_name: Set(display_name.to_string()),
        role: Set("member".into()),
        status: Set(if active { "active" } else { "disabled" }.into()),
        oidc_issuer: Set(None),
        oidc_subject: Set(None),
        password_hash: Set(None),
        last_login_at: Set(None),
        default_model: Set(None),
        unverified_email: Set(None),
        theme: Set("system".into()),
        external_id: Set(external_id.map(str::to_string)),
        scim: Set(true),
        scim_deleted: Set(false),
        created_at: Set(now),
        updated_at: Set(now),
    }
    .insert(db)
    .await?;
    Ok(to_user(row))
}

/// Sets what SCIM manages of a person.
pub async fn update_user(db: &Db, u: &DirectoryUser) -> StorageResult<()> {
    user::Entity::update_many()
        .col_expr(user::Column::Email, Expr::value(u.email.to_lowercase()))
        .col_expr(user::Column::DisplayName, Expr::value(u.display_name.clone()))
        .col_expr(user::Column::ExternalId, Expr::value(u.external_id.clone()))
        .col_expr(user::Column::Status, Expr::value(if u.active { "active" } else { "disabled" }))
        .col_expr(user::Column::UpdatedAt, Expr::value(Utc::now()))
        .filter(user::Column::Id.eq(u.id))
        .filter(user::Column::ScimDeleted.eq(false))
        .exec(db)
        .await?;
    changes::changed(Kept::Accounts);
    Ok(())
}

/// SCIM deleted the person: disabled and hidden from SCIM, their data kept.
pub async fn mark_deleted(db: &Db, id: Uuid) -> StorageResult<bool> {
    let done = user::Entity::update_many()
        .col_expr(user::Column::ScimDeleted, Expr::value(true))
        .col_expr(user::Column::Status, Expr::value("disabled"))
        .col_expr(user::Column::UpdatedAt, Expr::value(Utc::now()))
        .filter(user::Column::Id.eq(id))
        .filter(user::Column::ScimDeleted.eq(false))
        .exec(db)
        .await?
        .rows_affected
        == 1;
    changes::changed(Kept::Accounts);
    Ok(done)
}

/// Whether SCIM made this account (it may then be linked to its first OpenID Connect sign-in).
pub async fn made_by_scim(db: &Db, id: Uuid) -> StorageResult<bool> {
    Ok(user::Entity::find_by_id(id).one(db).await?.is_some_and(|u| u.scim && !u.scim_deleted))
}

/// One group.
pub async fn find_group(db: &Db, id: Uuid) -> StorageResult<Option<DirectoryGroup>> {
    Ok(group::Entity::find_by_id(id).one(db).await?.map(to_group))
}

/// One page of groups, oldest first, and how many match in all.
pub async fn list_groups(
    db: &Db,
    filter: &DirectoryFilter,
    offset: u64,
    limit: u64,
) -> StorageResult<(Vec<DirectoryGroup>, u64)> {
    let q = group::Entity::find();
    let q = match filter {
        DirectoryFilter::All => q,
        DirectoryFilter::DisplayName(n) => q.filter(group::Column::NameKey.eq(name_key(n))),
        DirectoryFilter::ExternalId(x) => q.filter(group::Column::ExternalId.eq(x.as_str())),
        DirectoryFilter::Id(id) => q.filter(group::Column::Id.eq(*id)),
        DirectoryFilter::Email(_) => return Ok((Vec::new(), 0)),
    };
    let total = q.clone().count(db).await?;
    let rows = q
        .order_by_asc(group::Column::CreatedAt)
        .order_by_asc(group::Column::Id)
        .offset(offset)
        .limit(limit)
        .all(db)
        .await?;
    Ok((rows.into_iter().map(to_group).collect(), total))
}

/// A group made by SCIM, or `None` when the name (ignoring case) is taken.
pub async fn insert_group<C: ConnectionTrait>(
    conn: &C,
    name: &str,
    external_id: Option<&str>,
) -> StorageResult<Option<DirectoryGroup>> {
    let Some(made) = crate::storage::repos::groups::insert(conn, name, false).await? else { return Ok(None) };
    group::Entity::update_many()
        .col_expr(group::Column::ExternalId, Expr::value(external_id.map(str::to_string)))
        .col_expr(group::Column::Scim, Expr::value(true))
        .filter(group::Column::Id.eq(made.id))
        .exec(conn)
        .await?;
    Ok(Some(DirectoryGroup {
        id: made.id,
        name: made.name,
        external_id: external_id.map(str::to_string),
        created_at: made.created_at,
    }))
}

/// Renames a group and sets its external id; false when the name belongs to another group.
pub async fn update_group<C: ConnectionTrait>(conn: &C, g: &DirectoryGroup) -> StorageResult<bool> {
    let key = name_key(&g.name);
    let clash = group::Entity::find()
        .filter(group::Column::NameKey.eq(key.clone()))
        .filter(group::Column::Id.ne(g.id))
        .count(conn)
        .await?;
    if clash > 0 {
        return Ok(false);
    }
    group::Entity::update_many()
        .col_expr(group::Column::Name, Expr::value(g.name.clone()))
        .col_expr(group::Column::NameKey, Expr::value(key))
        .col_expr(group::Column::ExternalId, Expr::value(g.external_id.clone()))
        .filter(group::Column::Id.eq(g.id))
        .exec(conn)
        .await?;
    Ok(true)
}

/// A group's members (id, email), at most `limit`.
pub async fn members<C: ConnectionTrait>(
    conn: &C,
    group_id: Uuid,
    limit: u64,
) -> StorageResult<Vec<(Uuid, String)>> {
    let ids: Vec<Uuid> = group_member::Entity::find()
        .select_only()
        .column(group_member::Column::UserId)
        .filter(group_member::Column::GroupId.eq(group_id))
        .limit(limit)
        .into_tuple()
        .all(conn)
        .await?;
    Ok(user::Entity::find()
        .filter(user::Column::Id.is_in(ids))
        .filter(user::Column::ScimDeleted.eq(false))
        .order_by_asc(user::Column::Email)
        .all(conn)
        .await?
        .into_iter()
        .map(|u| (u.id, u.email))
        .collect())
}

/// Takes everyone out of a group.
pub async fn clear_members<C: ConnectionTrait>(conn: &C, group_id: Uuid) -> StorageResult<()> {
    group_member::Entity::delete_many().filter(group_member::Column::GroupId.eq(group_id)).exec(conn).await?;
    crate::storage::changes::changed(crate::storage::changes::Kept::McpServers);
    Ok(())
}

/// Of these ids, the people SCIM may see.
pub async fn existing_users<C: ConnectionTrait>(conn: &C, ids: &[Uuid]) -> StorageResult<Vec<Uuid>> {
    Ok(user::Entity::find()
        .select_only()
        .column(user::Column::Id)
        .filter(user::Column::Id.is_in(ids.iter().copied()))
        .filter(user::Column::ScimDeleted.eq(false))
        .into_tuple()
        .all(conn)
        .await?)
}
