//! Queries over `providers` and `provider_keys` (the admin-managed providers and the health of
//! their shared keys; the keys' ciphertext is in `vault_secrets`).

use std::time::Duration;

use chrono::Utc;
use sea_orm::sea_query::{Expr, ExprTrait};
use sea_orm::{ActiveModelTrait, ColumnTrait, ConnectionTrait, EntityTrait, QueryFilter, QueryOrder, Set};
use uuid::Uuid;

use crate::model::providers::ManagedProvider;
use crate::model::providers::ProviderKey;
use crate::storage::StorageResult;
use crate::storage::entities::{provider, provider_key};

/// Every admin-managed provider, by name.
pub async fn all<C: ConnectionTrait>(db: &C) -> StorageResult<Vec<ManagedProvider>> {
    Ok(provider::Entity::find()
        .order_by_asc(provider::Column::Name)
        .all(db)
        .await?
        .into_iter()
        .map(Into::into)
        .collect())
}

/// Every shared key, oldest first.
pub async fn all_keys<C: ConnectionTrait>(db: &C) -> StorageResult<Vec<ProviderKey>> {
    Ok(provider_key::Entity::find()
        .order_by_asc(provider_key::Column::CreatedAt)
        .all(db)
        .await?
        .into_iter()
        .map(Into::into)
        .collect())
}

/// One provider.
pub async fn find<C: ConnectionTrait>(db: &C, id: Uuid) -> StorageResult<Option<ManagedProvider>> {
    Ok(provider::Entity::find_by_id(id).one(db).await?.map(Into::into))
}

/// One provider by name.
pub async fn find_by_name<C: ConnectionTrait>(db: &C, name: &str) -> StorageResult<Option<ManagedProvider>> {
    Ok(provider::Entity::find().filter(provider::Column::Name.eq(name)).one(db).await?.map(Into::into))
}

/// A provider's shared keys, oldest first.
pub async fn keys_of<C: ConnectionTrait>(db: &C, provider_id: Uuid) -> StorageResult<Vec<ProviderKey>> {
    Ok(provider_key::Entity::find()
        .filter(provider_key::Column::ProviderId.eq(provider_id))
        .order_by_asc(provider_key::Column::CreatedAt)
        .all(db)
        .await?
        .into_iter()
        .map(Into::into)
        .collect())
}

/// Inserts or updates a provider row.
pub async fn save<C: ConnectionTrait>(
    db: &C,
    id: Uuid,
    new_name: Option<&str>,
    f: ProviderFields,
) -> StorageResult<ManagedProvider> {
    let now = Utc::now();
    let mut row = provider::ActiveModel {
        id: Set(id),
        label: Set(f.label),
        kind: Set(f.kind),
        base_url: Set(f.base_url),
        enabled: Set(f.enabled),
        models: Set(f.models),
        visibility: Set(f.visibility),
        allowed_users: Set(f.allowed_users),
        rpm: Set(f.rpm),
        tpm: Set(f.tpm),
        updated_at: Set(now),
        ..Default::default()
    };
    Ok(match new_name {
        Some(name) => {
            row.name = Set(name.to_string());
            row.created_at = Set(now);
            row.insert(db).await?.into()
        }
        None => row.update(db).await?.into(),
    })
}

/// The settings of an admin-managed provider as the console saves them (the name is set once,
/// at creation).
#[derive(Debug, Clone)]
pub struct ProviderFields {
    /// Display name.
    pub label: String,
    /// Wire format.
    pub kind: String,
    /// Base URL, empty for the kind's public one.
    pub base_url: String,
    /// Whether members may use it.
    pub enabled: bool,
    /// Enabled models, as a JSON array.
    pub models: String,
    /// Who may use it.
    pub visibility: String,
    /// The users allowed when visibility is `users`, as a JSON array of ids.
    pub allowed_users: String,
    /// Requests per minute per user.
    pub rpm: Option<i64>,
    /// Tokens per minute per user.
    pub tpm: Option<i64>,
}

/// Deletes a provider (its key rows go with it).
pub async fn delete<C: ConnectionTrait>(db: &C, id: Uuid) -> StorageResult<u64> {
    provider_key::Entity::delete_many().filter(provider_key::Column::ProviderId.eq(id)).exec(db).await?;
    Ok(provider::Entity::delete_by_id(id).exec(db).await?.rows_affected)
}

/// Adds a shared key's row (its ciphertext is stored under the same id).
pub async fn insert_key<C: ConnectionTrait>(
    db: &C,
    id: Uuid,
    provider_id: Uuid,
    label: &str,
    last4: &str,
) -> StorageResult<ProviderKey> {
    Ok(provider_key::ActiveModel {
        id: Set(id),
        provider_id: Set(provider_id),
        label: Set(label.to_string()),
        last4: Set(last4.to_string()),
        failures: Set(0),
        cooldown_until: Set(None),
        last_used_at: Set(None),
        created_at: Set(Utc::now()),
    }
    .insert(db)
    .await?
    .into())
}

/// Deletes a shared key's row; how many went.
pub async fn delete_key<C: ConnectionTrait>(db: &C, provider_id: Uuid, id: Uuid) -> StorageResult<u64> {
    Ok(provider_key::Entity::delete_many()
        .filter(provider_key::Column::Id.eq(id))
        .filter(provider_key::Column::ProviderId.eq(provider_id))
        .exec(db)
        .await?
        .rows_affected)
}

/// Records that a shared key failed and rests for `rest`.
pub async fn note_key_failure<C: ConnectionTrait>(db: &C, id: Uuid, rest: Duration) -> StorageResult<()> {
    let until = Utc::now() + chrono::Duration::from_std(rest).unwrap_or(chrono::Duration::minutes(1));
    provider_key::Entity::update_many()
        .col_expr(provider_key::Column::Failures, Expr::col(provider_key::Column::Failures).add(1))
        .col_expr(provider_key::Column::CooldownUntil, Expr::value(until))
        .filter(provider_key::Column::Id.eq(id))
        .exec(db)
        .await?;
    Ok(())
}
