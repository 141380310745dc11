//! Queries over `users`.

use chrono::Utc;
use sea_orm::{ActiveModelTrait, EntityTrait, Set};
use uuid::Uuid;

use crate::model::accounts::{Role, Theme, User, UserRow, UserStatus};
use crate::storage::changes::{self, Kept};
use crate::storage::entities::user;
use crate::storage::{Db, StorageError, StorageResult};

/// Maps a row to the domain type, refusing unknown role or status spellings.
pub(in crate::storage) fn to_domain(m: user::Model) -> StorageResult<User> {
    let role =
        Role::parse(&m.role).ok_or_else(|| StorageError::Corrupt(format!("user role {:?}", m.role)))?;
    let status = UserStatus::parse(&m.status)
        .ok_or_else(|| StorageError::Corrupt(format!("user status {:?}", m.status)))?;
    // An unknown spelling is not worth refusing a sign-in over: it follows the browser.
    let theme = Theme::parse(&m.theme).unwrap_or_default();
    Ok(User { id: m.id, email: m.email, display_name: m.display_name, role, status, theme })
}

/// Inserts a user without credentials (credentials are set by the sign-in code).
pub async fn insert<C: sea_orm::ConnectionTrait>(
    db: &C,
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
        default_model: Set(None),
        unverified_email: Set(None),
        theme: Set(Theme::System.as_str().to_string()),
        external_id: Set(None),
        scim: Set(false),
        scim_deleted: Set(false),
        created_at: Set(now),
        updated_at: Set(now),
    }
    .insert(db)
    .await?;
    to_domain(row)
}

/// The user with this id.
pub async fn find(db: &Db, id: Uuid) -> StorageResult<Option<User>> {
    user::Entity::find_by_id(id).one(db).await?.map(to_domain).transpose()
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
    changes::changed(Kept::Accounts);
    Ok(())
}

/// The users with this (verified) email, compared case-insensitively (emails are stored
/// lower-case); at most two, enough to tell "one" from "more than one". An empty email (an
/// account whose provider verified none) matches nothing.
pub async fn find_by_email(db: &Db, email: &str) -> StorageResult<Vec<(User, Option<String>)>> {
    use sea_orm::{ColumnTrait, QueryFilter, QueryOrder, QuerySelect};
    let email = email.trim().to_lowercase();
    if email.is_empty() {
        return Ok(Vec::new());
    }
    let rows = user::Entity::find()
        .filter(user::Column::Email.eq(email))
        .order_by_asc(user::Column::CreatedAt)
        .limit(2)
        .all(db)
        .await?;
    rows.into_iter()
        .map(|m| {
            let hash = m.password_hash.clone();
            to_domain(m).map(|u| (u, hash))
        })
        .collect()
}

/// Inserts a local account with a password hash.
pub async fn insert_local<C: sea_orm::ConnectionTrait>(
    db: &C,
    email: &str,
    display_name: &str,
    role: Role,
    password_hash: &str,
) -> StorageResult<User> {
    let user = insert(db, &email.to_lowercase(), display_name, role, UserStatus::Active).await?;
    set_password(db, user.id, password_hash).await?;
    Ok(user)
}

/// Replaces a user's password hash.
pub async fn set_password<C: sea_orm::ConnectionTrait>(
    db: &C,
    id: Uuid,
    password_hash: &str,
) -> StorageResult<()> {
    user::ActiveModel {
        id: Set(id),
        password_hash: Set(Some(password_hash.to_string())),
        updated_at: Set(Utc::now()),
        ..Default::default()
    }
    .update(db)
    .await?;
    changes::changed(Kept::Accounts);
    Ok(())
}

/// The stored password hash of a user, if they have a local password.
pub async fn password_hash(db: &Db, id: Uuid) -> StorageResult<Option<String>> {
    Ok(user::Entity::find_by_id(id).one(db).await?.and_then(|m| m.password_hash))
}

/// Changes a user's role.
pub async fn set_role<C: sea_orm::ConnectionTrait>(conn: &C, id: Uuid, role: Role) -> StorageResult<()> {
    use sea_orm::{ColumnTrait, QueryFilter};
    user::Entity::update_many()
        .col_expr(user::Column::Role, sea_orm::sea_query::Expr::value(role.as_str()))
        .col_expr(user::Column::UpdatedAt, sea_orm::sea_query::Expr::value(Utc::now()))
        .filter(user::Column::Id.eq(id))
        .exec(conn)
        .await?;
    changes::changed(Kept::Accounts);
    Ok(())
}

/// How many admins exist.
pub async fn count_admins<C: sea_orm::ConnectionTrait>(conn: &C) -> StorageResult<u64> {
    use sea_orm::{ColumnTrait, PaginatorTrait, QueryFilter};
    Ok(user::Entity::find().filter(user::Column::Role.eq(Role::Admin.as_str())).count(conn).await?)
}

/// Records a successful sign-in.
pub async fn touch_login(db: &Db, id: Uuid) -> StorageResult<()> {
    let now = Utc::now();
    user::ActiveModel {
        id: Set(id),
        last_login_at: Set(Some(now)),
        updated_at: Set(now),
        ..Default::default()
    }
    .update(db)
    .await?;
    Ok(())
}

/// The user with this OIDC identity.
pub async fn find_by_identity(db: &Db, issuer: &str, subject: &str) -> StorageResult<Option<User>> {
    use sea_orm::{ColumnTrait, QueryFilter};
    user::Entity::find()
        .filter(user::Column::OidcIssuer.eq(issuer))
        .filter(user::Column::OidcSubject.eq(subject))
        .one(db)
        .await?
        .map(to_domain)
        .transpose()
}

/// The local-password account with this email, if any (OIDC-only accounts are skipped).
pub async fn find_local_by_email(db: &Db, email: &str) -> StorageResult<Option<(User, String)>> {
    use sea_orm::{ColumnTrait, QueryFilter};
    let row = user::Entity::find()
        .filter(user::Column::Email.eq(email.to_lowercase()))
        .filter(user::Column::PasswordHash.is_not_null())
        .one(db)
        .await?;
    row.map(|m| {
        let hash = m.password_hash.clone().unwrap_or_default();
        to_domain(m).map(|u| (u, hash))
    })
    .transpose()
}

/// Whether the user already has an identity from some OIDC issuer.
pub async fn has_identity(db: &Db, id: Uuid) -> StorageResult<bool> {
    Ok(user::Entity::find_by_id(id).one(db).await?.is_some_and(|m| m.oidc_subject.is_some()))
}

/// Binds an OIDC identity to a user.
pub async fn set_identity<C: sea_orm::ConnectionTrait>(
    conn: &C,
    id: Uuid,
    issuer: &str,
    subject: &str,
) -> StorageResult<()> {
    user::ActiveModel {
        id: Set(id),
        oidc_issuer: Set(Some(issuer.to_string())),
        oidc_subject: Set(Some(subject.to_string())),
        updated_at: Set(Utc::now()),
        ..Default::default()
    }
    .update(conn)
    .await?;
    changes::changed(Kept::Accounts);
    Ok(())
}

/// Refreshes the display data the provider sends: the verified email (kept as it was when
/// `email` is `None`), the unverified one apart, and the name.
pub async fn set_profile<C: sea_orm::ConnectionTrait>(
    db: &C,
    id: Uuid,
    email: Option<&str>,
    unverified_email: Option<&str>,
    display_name: &str,
) -> StorageResult<()> {
    user::ActiveModel {
        id: Set(id),
        email: email.map(|e| Set(e.to_lowercase())).unwrap_or_default(),
        unverified_email: Set(unverified_email.map(str::to_string)),
        display_name: Set(display_name.to_string()),
        updated_at: Set(Utc::now()),
        ..Default::default()
    }
    .update(db)
    .await?;
    changes::changed(Kept::Accounts);
    Ok(())
}

/// The user's own default model, if they chose one.
pub async fn default_model(db: &Db, id: Uuid) -> StorageResult<Option<String>> {
    Ok(user::Entity::find_by_id(id).one(db).await?.and_then(|u| u.default_model).filter(|m| !m.is_empty()))
}

/// Sets the user's colour theme.
pub async fn set_theme(db: &Db, id: Uuid, theme: Theme) -> StorageResult<()> {
    user::ActiveModel {
        id: Set(id),
        theme: Set(theme.as_str().to_string()),
        updated_at: Set(Utc::now()),
        ..Default::default()
    }
    .update(db)
    .await?;
    changes::changed(Kept::Accounts);
    Ok(())
}

/// Sets or clears the user's own default model.
pub async fn set_default_model(db: &Db, id: Uuid, model: Option<&str>) -> StorageResult<()> {
    user::ActiveModel {
        id: Set(id),
        default_model: Set(model.map(str::to_string)),
        updated_at: Set(Utc::now()),
        ..Default::default()
    }
    .update(db)
    .await?;
    changes::changed(Kept::Accounts);
    Ok(())
}

/// Every user's email by id (for reports that name people).
pub async fn emails(db: &Db) -> StorageResult<std::collections::HashMap<Uuid, String>> {
    Ok(user::Entity::find().all(db).await?.into_iter().map(|u| (u.id, u.email)).collect())
}

/// Users whose email or name contains `query` (all when empty), by email: one page and the total.
pub async fn search(db: &Db, query: &str, offset: u64, limit: u64) -> StorageResult<(Vec<UserRow>, u64)> {
    use sea_orm::{ColumnTrait, PaginatorTrait, QueryFilter, QueryOrder, QuerySelect};
    let mut q = user::Entity::find();
    if !query.is_empty() {
        let cond = sea_orm::Condition::any()
            .add(user::Column::Email.contains(query.to_lowercase()))
            .add(user::Column::DisplayName.contains(query));
        q = q.filter(cond);
    }
    let total = q.clone().count(db).await?;
    let rows = q.order_by_asc(user::Column::Email).offset(offset).limit(limit).all(db).await?;
    let mut out = Vec::with_capacity(rows.len());
    for m in rows {
        let (created_at, last_login_at, oidc) = (m.created_at, m.last_login_at, m.oidc_subject.is_some());
        let unverified_email = m.unverified_email.clone();
        out.push(UserRow { user: to_domain(m)?, created_at, last_login_at, oidc, unverified_email });
    }
    Ok((out, total))
}

/// Deletes a user row (what refers to it is removed by the caller or by cascades).
pub async fn delete(db: &Db, id: Uuid) -> StorageResult<()> {
    user::Entity::delete_by_id(id).exec(db).await?;
    changes::changed(Kept::Accounts);
    // Their workspaces, memberships and MCP servers went with them (cascades).
    changes::changed(Kept::Workspaces);
    changes::changed(Kept::McpServers);
    Ok(())
}

/// What these people are called (their name, else their email), by id, in one query.
pub async fn names_of(db: &Db, ids: &[Uuid]) -> StorageResult<std::collections::HashMap<Uuid, String>> {
    use sea_orm::{ColumnTrait, QueryFilter};
    Ok(user::Entity::find()
        .filter(user::Column::Id.is_in(ids.iter().copied()))
        .all(db)
        .await?
        .into_iter()
        .map(|u| (u.id, if u.display_name.trim().is_empty() { u.email } else { u.display_name }))
        .collect())
}

/// The emails of these users, by id, in one query (missing ids are left out).
pub async fn emails_of(db: &Db, ids: &[Uuid]) -> StorageResult<std::collections::HashMap<Uuid, String>> {
    use sea_orm::{ColumnTrait, QueryFilter};
    Ok(user::Entity::find()
        .filter(user::Column::Id.is_in(ids.iter().copied()))
        .all(db)
        .await?
        .into_iter()
        .map(|u| (u.id, u.email))
        .collect())
}
