//! Queries over `users`.

use chrono::Utc;
use sea_orm::{ActiveModelTrait, EntityTrait, Set};
use uuid::Uuid;

use crate::domain::accounts::{Role, User, UserStatus};
use crate::storage::entities::user;
use crate::storage::{Db, StorageError, StorageResult};

/// Maps a row to the domain type, refusing unknown role or status spellings.
pub(crate) fn to_domain(m: user::Model) -> StorageResult<User> {
    let role =
        Role::parse(&m.role).ok_or_else(|| StorageError::Corrupt(format!("user role {:?}", m.role)))?;
    let status = UserStatus::parse(&m.status)
        .ok_or_else(|| StorageError::Corrupt(format!("user status {:?}", m.status)))?;
    Ok(User {
        id: m.id,
        email: m.email,
        display_name: m.display_name,
        role,
        status,
    })
}

/// Inserts a user without credentials (credentials are set by the sign-in code).
pub async fn insert(
    db: &Db,
    email: &str,
    display_name: &str,
    role: Role,
    status: UserStatus,
) -> StorageResult<User> {
    let now = Utc::now();
    let row = user::ActiveModel {
        id: Set(Uuid::now_v7()),
        email: Set(email.to_string()),
        display_name: Set(display_name.to_string()),
        role: Set(role.as_str().to_string()),
        status: Set(status.as_str().to_string()),
        oidc_issuer: Set(None),
        oidc_subject: Set(None),
        password_hash: Set(None),
        last_login_at: Set(None),
        created_at: Set(now),
        updated_at: Set(now),
    }
    .insert(db)
    .await?;
    to_domain(row)
}

/// The user with this id.
pub async fn find(db: &Db, id: Uuid) -> StorageResult<Option<User>> {
    user::Entity::find_by_id(id)
        .one(db)
        .await?
        .map(to_domain)
        .transpose()
}

/// Changes a user's status.
pub async fn set_status(db: &Db, id: Uuid, status: UserStatus) -> StorageResult<()> {
    let row = user::ActiveModel {
        id: Set(id),
        status: Set(status.as_str().to_string()),
        updated_at: Set(Utc::now()),
        ..Default::default()
    };
    row.update(db).await?;
    Ok(())
}
