//! Queries over `auth_sessions`.

use chrono::{DateTime, Utc};
use sea_orm::{ActiveModelTrait, ColumnTrait, EntityTrait, QueryFilter, Set};
use uuid::Uuid;

use crate::model::accounts::User;
use crate::storage::changes::{self, Kept};
use crate::storage::entities::{auth_session, user};
use crate::storage::{Db, StorageResult};

/// A stored browser session with its user.
#[derive(Debug, Clone)]
pub struct StoredSession {
    /// SHA-256 hex of the cookie token.
    pub id: String,
    /// Per-session CSRF secret.
    pub csrf_secret: String,
    /// Absolute expiry.
    pub expires_at: DateTime<Utc>,
    /// Last request seen.
    pub last_seen_at: DateTime<Utc>,
    /// The signed-in user.
    pub user: User,
}

/// Stores a new session row.
pub async fn insert(
    db: &Db,
    id_hash: &str,
    user_id: Uuid,
    csrf_secret: &str,
    expires_at: DateTime<Utc>,
    user_agent: Option<&str>,
    ip: Option<&str>,
) -> StorageResult<()> {
    let now = Utc::now();
    auth_session::ActiveModel {
        id: Set(id_hash.to_string()),
        user_id: Set(user_id),
        csrf_secret: Set(csrf_secret.to_string()),
        created_at: Set(now),
        expires_at: Set(expires_at),
        last_seen_at: Set(now),
        user_agent: Set(user_agent.map(|s| s.chars().take(300).collect())),
        ip: Set(ip.map(|s| s.chars().take(64).collect())),
    }
    .insert(db)
    .await?;
    Ok(())
}

/// The session with this token hash and its user, in one query.
pub async fn find_with_user(db: &Db, id_hash: &str) -> StorageResult<Option<StoredSession>> {
    let Some(session) = auth_session::Entity::find_by_id(id_hash.to_string()).one(db).await? else {
        return Ok(None);
    };
    let Some(user) = user::Entity::find_by_id(session.user_id).one(db).await? else {
        return Ok(None);
    };
    Ok(Some(StoredSession {
        id: session.id,
        csrf_secret: session.csrf_secret,
        expires_at: session.expires_at,
        last_seen_at: session.last_seen_at,
        user: super::users::to_domain(user)?,
    }))
}

/// Records activity on a session. It does not move the generation of kept copies: activity only
/// moves forward, so a copy that missed it is stricter about the idle timeout, never looser.
pub async fn touch(db: &Db, id_hash: &str, at: DateTime<Utc>) -> StorageResult<()> {
    auth_session::Entity::update_many()
        .col_expr(auth_session::Column::LastSeenAt, sea_orm::sea_query::Expr::value(at))
        .filter(auth_session::Column::Id.eq(id_hash))
        .exec(db)
        .await?;
    Ok(())
}

/// Deletes one session.
pub async fn delete(db: &Db, id_hash: &str) -> StorageResult<()> {
    auth_session::Entity::delete_by_id(id_hash.to_string()).exec(db).await?;
    changes::changed(Kept::Accounts);
    Ok(())
}

/// Deletes every session of a user.
pub async fn delete_for_user(db: &Db, user_id: Uuid) -> StorageResult<u64> {
    let res =
        auth_session::Entity::delete_many().filter(auth_session::Column::UserId.eq(user_id)).exec(db).await?;
    changes::changed(Kept::Accounts);
    Ok(res.rows_affected)
}

/// Deletes every session of a user but `keep` (the one making the request).
pub async fn delete_others(db: &Db, user_id: Uuid, keep: &str) -> StorageResult<u64> {
    let res = auth_session::Entity::delete_many()
        .filter(auth_session::Column::UserId.eq(user_id))
        .filter(auth_session::Column::Id.ne(keep))
        .exec(db)
        .await?;
    changes::changed(Kept::Accounts);
    Ok(res.rows_affected)
}

/// A session as listed to its owner.
#[derive(Debug, Clone)]
pub struct SessionListing {
    /// Row id (token hash).
    pub id: String,
    /// When it was created.
    pub created_at: DateTime<Utc>,
    /// Last activity.
    pub last_seen_at: DateTime<Utc>,
    /// Browser description.
    pub user_agent: Option<String>,
    /// Client address.
    pub ip: Option<String>,
}

/// A user's live sessions, most recent first.
pub async fn list_for_user(db: &Db, user_id: Uuid) -> StorageResult<Vec<SessionListing>> {
    use sea_orm::QueryOrder;
    let rows = auth_session::Entity::find()
        .filter(auth_session::Column::UserId.eq(user_id))
        .filter(auth_session::Column::ExpiresAt.gt(Utc::now()))
        .order_by_desc(auth_session::Column::LastSeenAt)
        .all(db)
        .await?;
    Ok(rows
        .into_iter()
        .map(|r| SessionListing {
            id: r.id,
            created_at: r.created_at,
            last_seen_at: r.last_seen_at,
            user_agent: r.user_agent,
            ip: r.ip,
        })
        .collect())
}

/// Deletes a session only if it belongs to the user; true when something was deleted.
pub async fn delete_owned(db: &Db, user_id: Uuid, id_hash: &str) -> StorageResult<bool> {
    let res = auth_session::Entity::delete_many()
        .filter(auth_session::Column::Id.eq(id_hash))
        .filter(auth_session::Column::UserId.eq(user_id))
        .exec(db)
        .await?;
    changes::changed(Kept::Accounts);
    Ok(res.rows_affected == 1)
}
