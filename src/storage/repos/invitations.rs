//! Queries over `invitations`.

use chrono::{DateTime, Utc};
use sea_orm::{
    ActiveModelTrait, ColumnTrait, ConnectionTrait, EntityTrait, QueryFilter, QueryOrder, QuerySelect, Set,
};
use uuid::Uuid;

use crate::model::accounts::Invitation;
use crate::model::accounts::Role;
use crate::storage::entities::invitation;
use crate::storage::{Db, StorageError, StorageResult};

fn to_domain(m: invitation::Model) -> StorageResult<Invitation> {
    let role =
        Role::parse(&m.role).ok_or_else(|| StorageError::Corrupt(format!("invitation role {:?}", m.role)))?;
    Ok(Invitation {
        id: m.id,
        email: m.email,
        role,
        invited_by: m.invited_by,
        created_at: m.created_at,
        expires_at: m.expires_at,
        accepted_at: m.accepted_at,
    })
}

/// Stores a new invitation.
pub async fn insert(
    db: &Db,
    email: &str,
    role: Role,
    token_hash: &str,
    invited_by: Uuid,
    expires_at: DateTime<Utc>,
) -> StorageResult<Invitation> {
    let row = invitation::ActiveModel {
        id: Set(Uuid::now_v7()),
        email: Set(email.to_string()),
        role: Set(role.as_str().to_string()),
        token_hash: Set(token_hash.to_string()),
        invited_by: Set(Some(invited_by)),
        created_at: Set(Utc::now()),
        expires_at: Set(expires_at),
        accepted_at: Set(None),
        accepted_by: Set(None),
    }
    .insert(db)
    .await?;
    to_domain(row)
}

/// The invitation whose link carries this token.
pub async fn find_by_token_hash(db: &Db, token_hash: &str) -> StorageResult<Option<Invitation>> {
    invitation::Entity::find()
        .filter(invitation::Column::TokenHash.eq(token_hash))
        .one(db)
        .await?
        .map(to_domain)
        .transpose()
}

/// The invitation with this id.
pub async fn find(db: &Db, id: Uuid) -> StorageResult<Option<Invitation>> {
    invitation::Entity::find_by_id(id).one(db).await?.map(to_domain).transpose()
}

/// Marks an invitation accepted; true only for the first caller.
pub async fn mark_accepted<C: ConnectionTrait>(conn: &C, id: Uuid, user_id: Uuid) -> StorageResult<bool> {
    let res = invitation::Entity::update_many()
        .col_expr(invitation::Column::AcceptedAt, sea_orm::sea_query::Expr::value(Utc::now()))
        .col_expr(invitation::Column::AcceptedBy, sea_orm::sea_query::Expr::value(user_id))
        .filter(invitation::Column::Id.eq(id))
        .filter(invitation::Column::AcceptedAt.is_null())
        .exec(conn)
        .await?;
    Ok(res.rows_affected == 1)
}

/// The most recent invitations.
pub async fn recent(db: &Db, limit: u64) -> StorageResult<Vec<Invitation>> {
    invitation::Entity::find()
        .order_by_desc(invitation::Column::CreatedAt)
        .limit(limit)
        .all(db)
        .await?
        .into_iter()
        .map(to_domain)
        .collect()
}
