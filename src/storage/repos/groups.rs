//! Queries over `groups` and `group_members`.

use std::collections::HashMap;

use chrono::Utc;
use sea_orm::sea_query::{Expr, OnConflict, Query};
use sea_orm::{
    ActiveModelTrait, ColumnTrait, ConnectionTrait, EntityTrait, PaginatorTrait, QueryFilter, QueryOrder,
    QuerySelect, Set,
};
use uuid::Uuid;

use crate::model::accounts::{Role, User};
use crate::model::teams::{Group, name_key};
use crate::storage::changes::{self, Kept};
use crate::storage::entities::{group, group_member, user};
use crate::storage::repos::users::to_domain as to_user;
use crate::storage::{Db, StorageResult};

fn to_group(m: group::Model) -> Group {
    Group {
        id: m.id,
        name: m.name,
        managed_by_idp: m.managed_by_idp,
        default_role: Role::parse(&m.default_role).unwrap_or(Role::Member),
        loosest_approval_mode: m.loosest_approval_mode,
        created_at: m.created_at,
    }
}

/// Inserts a group, or `None` when the name (ignoring case) is taken.
pub async fn insert<C: ConnectionTrait>(
    conn: &C,
    name: &str,
    managed_by_idp: bool,
) -> StorageResult<Option<Group>> {
    let row = group::Model {
        id: Uuid::now_v7(),
        name: name.to_string(),
        name_key: name_key(name),
        managed_by_idp,
        external_id: None,
        scim: false,
        default_role: Role::Member.as_str().into(),
        loosest_approval_mode: None,
        created_at: Utc::now(),
    };
    let inserted = group::Entity::insert(group::ActiveModel::from(row.clone()))
        .on_conflict(OnConflict::column(group::Column::NameKey).do_nothing().to_owned())
        .exec_without_returning(conn)
        .await?;
    Ok((inserted == 1).then(|| to_group(row)))
}

/// One group.
pub async fn find(db: &Db, id: Uuid) -> StorageResult<Option<Group>> {
    Ok(group::Entity::find_by_id(id).one(db).await?.map(to_group))
}

/// Every group by name, with its number of members (two statements).
pub async fn list(db: &Db, limit: u64) -> StorageResult<Vec<(Group, u64)>> {
    let groups = group::Entity::find().order_by_asc(group::Column::NameKey).limit(limit).all(db).await?;
    let ids: Vec<Uuid> = groups.iter().map(|g| g.id).collect();
    let counts: HashMap<Uuid, i64> = group_member::Entity::find()
        .select_only()
        .column(group_member::Column::GroupId)
        .column_as(group_member::Column::UserId.count(), "n")
        .filter(group_member::Column::GroupId.is_in(ids))
        .group_by(group_member::Column::GroupId)
        .into_tuple::<(Uuid, i64)>()
        .all(db)
        .await?
        .into_iter()
        .collect();
    Ok(groups
        .into_iter()
        .map(|g| {
            let n = counts.get(&g.id).copied().unwrap_or(0).max(0) as u64;
            (to_group(g), n)
        })
        .collect())
}

/// Every group's name, by id, at most `limit` (one statement).
pub async fn names(db: &Db, limit: u64) -> StorageResult<HashMap<Uuid, String>> {
    Ok(group::Entity::find()
        .select_only()
        .column(group::Column::Id)
        .column(group::Column::Name)
        .limit(limit)
        .into_tuple::<(Uuid, String)>()
        .all(db)
        .await?
        .into_iter()
        .collect())
}

/// How many groups there are.
pub async fn count<C: ConnectionTrait>(conn: &C) -> StorageResult<u64> {
    Ok(group::Entity::find().count(conn).await?)
}

/// Renames a group; false when the new name (ignoring case) belongs to another group.
pub async fn rename(db: &Db, id: Uuid, name: &str) -> StorageResult<bool> {
    let key = name_key(name);
    if let Some(other) = group::Entity::find().filter(group::Column::NameKey.eq(key.clone())).one(db).await?
        && other.id != id
    {
        return Ok(false);
    }
    group::ActiveModel { id: Set(id), name: Set(name.to_string()), name_key: Set(key), ..Default::default() }
        .update(db)
        .await?;
    Ok(true)
}

/// Deletes a group (its memberships go with it).
pub async fn delete<C: ConnectionTrait>(conn: &C, id: Uuid) -> StorageResult<bool> {
    let deleted = group::Entity::delete_by_id(id).exec(conn).await?.rows_affected == 1;
    changes::changed(Kept::McpServers);
    Ok(deleted)
}

/// The group's members by email.
pub async fn members(db: &Db, id: Uuid, limit: u64) -> StorageResult<Vec<User>> {
    let ids: Vec<Uuid> = group_member::Entity::find()
        .select_only()
        .column(group_member::Column::UserId)
        .filter(group_member::Column::GroupId.eq(id))
        .into_tuple::<Uuid>()
        .all(db)
        .await?;
    user::Entity::find()
        .filter(user::Column::Id.is_in(ids))
        .order_by_asc(user::Column::Email)
        .limit(limit)
        .all(db)
        .await?
        .into_iter()
        .map(to_user)
        .collect()
}

/// Adds a member (already one: nothing changes); true when added.
pub async fn add_member<C: ConnectionTrait>(conn: &C, group_id: Uuid, user_id: Uuid) -> StorageResult<bool> {
    let row = group_member::ActiveModel {
        group_id: Set(group_id),
        user_id: Set(user_id),
        added_at: Set(Utc::now()),
    };
    let n = group_member::Entity::insert(row)
        .on_conflict(
            OnConflict::columns([group_member::Column::GroupId, group_member::Column::UserId])
                .do_nothing()
                .to_owned(),
        )
        .exec_without_returning(conn)
        .await?;
    // Who is in a group decides which shared MCP servers they may use.
    changes::changed(Kept::McpServers);
    Ok(n == 1)
}

/// Removes a member; true when they were one.
pub async fn remove_member<C: ConnectionTrait>(
    conn: &C,
    group_id: Uuid,
    user_id: Uuid,
) -> StorageResult<bool> {
    let removed = group_member::Entity::delete_many()
        .filter(group_member::Column::GroupId.eq(group_id))
        .filter(group_member::Column::UserId.eq(user_id))
        .exec(conn)
        .await?
        .rows_affected
        == 1;
    changes::changed(Kept::McpServers);
    Ok(removed)
}

/// The groups a person is in, by name.
pub async fn groups_of<C: ConnectionTrait>(conn: &C, user_id: Uuid) -> StorageResult<Vec<Group>> {
    let ids = group_ids_of(conn, user_id).await?;
    Ok(group::Entity::find()
        .filter(group::Column::Id.is_in(ids))
        .order_by_asc(group::Column::NameKey)
        .all(conn)
        .await?
        .into_iter()
        .map(to_group)
        .collect())
}

/// The ids of the groups a person is in (one indexed statement).
pub async fn group_ids_of<C: ConnectionTrait>(conn: &C, user_id: Uuid) -> StorageResult<Vec<Uuid>> {
    Ok(group_member::Entity::find()
        .select_only()
        .column(group_member::Column::GroupId)
        .filter(group_member::Column::UserId.eq(user_id))
        .into_tuple::<Uuid>()
        .all(conn)
        .await?)
}

/// The groups with these names (ignoring case).
pub async fn find_by_names<C: ConnectionTrait>(conn: &C, names: &[String]) -> StorageResult<Vec<Group>> {
    let keys: Vec<String> = names.iter().map(|n| name_key(n)).collect();
    Ok(group::Entity::find()
        .filter(group::Column::NameKey.is_in(keys))
        .all(conn)
        .await?
        .into_iter()
        .map(to_group)
        .collect())
}

/// The group with this name (ignoring case).
pub async fn find_by_name<C: ConnectionTrait>(conn: &C, name: &str) -> StorageResult<Option<Group>> {
    Ok(group::Entity::find().filter(group::Column::NameKey.eq(name_key(name))).one(conn).await?.map(to_group))
}

/// Removes the person from every group synced from the identity provider except `keep`.
pub async fn leave_managed_except<C: ConnectionTrait>(
    conn: &C,
    user_id: Uuid,
    keep: &[Uuid],
) -> StorageResult<u64> {
    let managed = Query::select()
        .column(group::Column::Id)
        .from(group::Entity)
        .and_where(group::Column::ManagedByIdp.eq(true))
        .and_where(group::Column::Id.is_not_in(keep.iter().copied()))
        .to_owned();
    let left = group_member::Entity::delete_many()
        .filter(group_member::Column::UserId.eq(user_id))
        .filter(group_member::Column::GroupId.in_subquery(managed))
        .exec(conn)
        .await?
        .rows_affected;
    changes::changed(Kept::McpServers);
    Ok(left)
}

/// Every membership as (person, group name), at most `limit` (for usage by group).
pub async fn all_memberships(db: &Db, limit: u64) -> StorageResult<Vec<(Uuid, String)>> {
    let groups: HashMap<Uuid, String> =
        group::Entity::find().all(db).await?.into_iter().map(|g| (g.id, g.name)).collect();
    Ok(group_member::Entity::find()
        .limit(limit)
        .all(db)
        .await?
        .into_iter()
        .filter_map(|m| groups.get(&m.group_id).map(|n| (m.user_id, n.clone())))
        .collect())
}

/// Sets what the group grants beyond access: its members' role at first sign-in and their
/// least-asking approval mode; `false` when there is no such group.
pub async fn set_grants(db: &Db, id: Uuid, default_role: Role, loosest: Option<&str>) -> StorageResult<bool> {
    let res = group::Entity::update_many()
        .col_expr(group::Column::DefaultRole, Expr::value(default_role.as_str()))
        .col_expr(group::Column::LoosestApprovalMode, Expr::value(loosest.map(str::to_string)))
        .filter(group::Column::Id.eq(id))
        .exec(db)
        .await?;
    Ok(res.rows_affected == 1)
}
