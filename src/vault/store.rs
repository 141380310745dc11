//! Secrets at rest: one random data key per owner, wrapped under the master key, and secrets
//! encrypted under it. Every encryption counts against the data key's nonce budget in the same
//! transaction as the write, and every decryption writes an audit row without the value.

use chrono::Utc;
use sea_orm::sea_query::{Expr, ExprTrait};
use sea_orm::{ActiveModelTrait, ColumnTrait, ConnectionTrait, EntityTrait, QueryFilter, QueryOrder, Set};
use uuid::Uuid;

use super::Vault;
use super::crypto::{self, CryptoError, Key, NONCE_BUDGET, SecretPlace, WrappedKey};
use crate::secret::Secret;
use crate::storage::Db;
use crate::storage::entities::{vault_key, vault_secret};
use crate::storage::repos::audit;

/// The secrets' generation (see [`crate::storage::changes`]): read it before listing, and the
/// list is current while it has not moved.
pub fn generation() -> u64 {
    crate::storage::changes::generation(crate::storage::changes::Kept::Vault)
}

fn changed() {
    crate::storage::changes::changed(crate::storage::changes::Kept::Vault);
}

/// The owner id of the organisation's shared secrets (admin-managed provider keys).
pub const ORG_OWNER: Uuid = Uuid::nil();

/// What kind of secret a row holds.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SecretKind {
    /// A user's own provider key.
    ProviderKey,
    /// A provider key an admin shares with users.
    SharedProviderKey,
    /// The environment variables or HTTP headers of an MCP server (JSON).
    McpSecret,
}

impl SecretKind {
    /// The stored spelling.
    pub fn as_str(self) -> &'static str {
        match self {
            SecretKind::ProviderKey => "provider_key",
            SecretKind::SharedProviderKey => "shared_provider_key",
            SecretKind::McpSecret => "mcp_secret",
        }
    }
}

/// What failed; no variant carries key material or a secret value.
#[derive(Debug, thiserror::Error)]
pub enum StoreError {
    /// The secret does not exist or is not this owner's.
    #[error("no such secret")]
    NotFound,
    /// Decryption or key handling failed.
    #[error(transparent)]
    Crypto(#[from] CryptoError),
    /// An empty value was offered; a secret is never replaced by nothing.
    #[error("a secret cannot be empty")]
    Empty,
    /// The database failed.
    #[error("vault storage: {0}")]
    Storage(#[from] sea_orm::DbErr),
}

/// A secret as the UI may see it: never the value.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SecretMeta {
    /// Row id.
    pub id: Uuid,
    /// Owner.
    pub owner_id: Uuid,
    /// Stored kind.
    pub kind: String,
    /// Label chosen by its owner.
    pub label: String,
    /// Provider (kind or name) it is for; bound into the ciphertext.
    pub provider: String,
    /// Base URL for OpenAI-compatible endpoints.
    pub base_url: Option<String>,
    /// Last four characters of the value.
    pub last4: String,
    /// When it was stored or last replaced.
    pub updated_at: chrono::DateTime<Utc>,
}

fn meta(m: vault_secret::Model) -> SecretMeta {
    SecretMeta {
        id: m.id,
        owner_id: m.owner_id,
        kind: m.kind,
        label: m.label,
        provider: m.provider,
        base_url: m.base_url,
        last4: m.last4,
        updated_at: m.updated_at,
    }
}

/// What a new or replacement secret is.
#[derive(Debug, Clone)]
pub struct NewSecret<'a> {
    /// Kind of secret.
    pub kind: SecretKind,
    /// Label.
    pub label: &'a str,
    /// Provider it is for.
    pub provider: &'a str,
    /// Base URL, for OpenAI-compatible endpoints.
    pub base_url: Option<&'a str>,
}

/// A secret as stored: its row and its owner's data key row, both still encrypted (the data
/// key under the master key, the value under the data key). Holding one reveals nothing
/// without the open vault.
pub struct Sealed {
    secret: vault_secret::Model,
    key: vault_key::Model,
}

impl std::fmt::Debug for Sealed {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Sealed")
            .field("secret", &self.secret.id)
            .field("owner", &self.secret.owner_id)
            .finish()
    }
}

/// Who uses a secret and why, for the audit row written on every decryption.
#[derive(Debug, Clone, Copy)]
pub struct Use<'a> {
    /// The user on whose behalf (none for the system).
    pub by: Option<Uuid>,
    /// Why: "chat", "title", "test", "discovery".
    pub purpose: &'a str,
}

fn to_i32(v: u32) -> i32 {
    i32::try_from(v).unwrap_or(i32::MAX)
}

fn dek_version(row: &vault_key::Model) -> u32 {
    u32::try_from(row.dek_version).unwrap_or(0)
}

impl Vault {
    fn unwrap_row(&self, row: &vault_key::Model) -> Result<Key, CryptoError> {
        let w =
            WrappedKey { kek_id: row.kek_id.clone(), nonce: row.nonce.clone(), wrapped: row.wrapped.clone() };
        crypto::unwrap_key(self.master(), row.owner_id, dek_version(row), &w)
    }

    /// The owner's newest data key row, if any.
    async fn current_key_row<C: ConnectionTrait>(
        db: &C,
        owner: Uuid,
    ) -> Result<Option<vault_key::Model>, StoreError> {
        Ok(vault_key::Entity::find()
            .filter(vault_key::Column::OwnerId.eq(owner))
            .order_by_desc(vault_key::Column::DekVersion)
            .one(db)
            .await?)
    }

    /// The owner's data key for one more encryption: created on first use, its counter raised
    /// in the caller's transaction, refused once the nonce budget is spent.
    async fn key_for_encryption<C: ConnectionTrait>(
        &self,
        txn: &C,
        owner: Uuid,
    ) -> Result<(Key, u32), StoreError> {
        let row = match Self::current_key_row(txn, owner).await? {
            Some(row) => row,
            None => {
                let dek = Key::generate();
                let w = crypto::wrap_key(self.master(), owner, 1, &dek);
                vault_key::ActiveModel {
                    owner_id: Set(owner),
                    dek_version: Set(1),
                    kek_id: Set(w.kek_id),
                    nonce: Set(w.nonce),
                    wrapped: Set(w.wrapped),
                    encryptions: Set(0),
                    created_at: Set(Utc::now()),
                }
                .insert(txn)
                .await?
            }
        };
        crypto::spend_nonce(u64::try_from(row.encryptions).unwrap_or(u64::MAX))?;
        // Compare-and-swap on the counter: a concurrent writer makes this touch zero rows.
        let budget = i64::try_from(NONCE_BUDGET).unwrap_or(i64::MAX);
        let done = vault_key::Entity::update_many()
            .col_expr(vault_key::Column::Encryptions, Expr::col(vault_key::Column::Encryptions).add(1))
            .filter(vault_key::Column::OwnerId.eq(owner))
            .filter(vault_key::Column::DekVersion.eq(row.dek_version))
            .filter(vault_key::Column::Encryptions.lt(budget))
            .exec(txn)
            .await?;
        if done.rows_affected != 1 {
            return Err(CryptoError::NonceBudget.into());
        }
        Ok((self.unwrap_row(&row)?, dek_version(&row)))
    }

    /// Stores a new secret for `owner`, or replaces the value of an existing one (`replace`).
    /// An empty value is refused, so nothing can blank a stored secret.
    pub async fn put_secret(
        &self,
        db: &Db,
        owner: Uuid,
        replace: Option<Uuid>,
        what: NewSecret<'_>,
        value: &Secret,
    ) -> Result<SecretMeta, StoreError> {
        let value = Secret::new(value.expose().trim());
        if value.is_empty() {
            return Err(StoreError::Empty);
        }
        let txn = crate::storage::begin_write(db).await?;
        let existing = match replace {
            Some(id) => Some(
                vault_secret::Entity::find_by_id(id)
                    .filter(vault_secret::Column::OwnerId.eq(owner))
                    .one(&txn)
                    .await?
                    .ok_or(StoreError::NotFound)?,
            ),
            None => None,
        };
        let id = existing.as_ref().map_or_else(Uuid::now_v7, |e| e.id);
        let (dek, version) = self.key_for_encryption(&txn, owner).await?;
        let place = SecretPlace { owner, secret_id: id, provider: what.provider, dek_version: version };
        let ciphertext = crypto::encrypt_secret(&dek, &place, value.expose().as_bytes());
        let now = Utc::now();
        let row = vault_secret::ActiveModel {
            id: Set(id),
            owner_id: Set(owner),
            kind: Set(what.kind.as_str().to_string()),
            label: Set(what.label.trim().to_string()),
            provider: Set(what.provider.to_string()),
            base_url: Set(what.base_url.map(str::to_string)),
            dek_version: Set(to_i32(version)),
            ciphertext: Set(ciphertext),
            // A JSON bundle's last characters say nothing useful and are not shown.
            last4: Set(if what.kind == SecretKind::McpSecret { String::new() } else { value.last4() }),
            created_at: Set(existing.as_ref().map_or(now, |e| e.created_at)),
            updated_at: Set(now),
        };
        let saved = if existing.is_some() { row.update(&txn).await? } else { row.insert(&txn).await? };
        txn.commit().await?;
        changed();
        Ok(meta(saved))
    }

    /// Changes a secret's label without touching its value.
    pub async fn relabel(
        &self,
        db: &Db,
        owner: Uuid,
        id: Uuid,
        label: &str,
    ) -> Result<SecretMeta, StoreError> {
        let row = Self::find_row(db, owner, id).await?;
        let mut active: vault_secret::ActiveModel = row.into();
        active.label = Set(label.trim().to_string());
        active.updated_at = Set(Utc::now());
        let saved = active.update(db).await?;
        changed();
        Ok(meta(saved))
    }

    async fn find_row(db: &Db, owner: Uuid, id: Uuid) -> Result<vault_secret::Model, StoreError> {
        vault_secret::Entity::find_by_id(id)
            .filter(vault_secret::Column::OwnerId.eq(owner))
            .one(db)
            .await?
            .ok_or(StoreError::NotFound)
    }

    /// The owner's secrets of one kind, newest first; never their values.
    pub async fn list_secrets(db: &Db, owner: Uuid, kind: SecretKind) -> Result<Vec<SecretMeta>, StoreError> {
        Ok(vault_secret::Entity::find()
            .filter(vault_secret::Column::OwnerId.eq(owner))
            .filter(vault_secret::Column::Kind.eq(kind.as_str()))
            .order_by_desc(vault_secret::Column::CreatedAt)
            .all(db)
            .await?
            .into_iter()
            .map(meta)
            .collect())
    }

    /// One of the owner's secrets, without its value.
    pub async fn secret_meta(db: &Db, owner: Uuid, id: Uuid) -> Result<SecretMeta, StoreError> {
        Self::find_row(db, owner, id).await.map(meta)
    }

    /// Deletes one of the owner's secrets.
    pub async fn delete_secret<C: ConnectionTrait>(db: &C, owner: Uuid, id: Uuid) -> Result<(), StoreError> {
        let done = vault_secret::Entity::delete_many()
            .filter(vault_secret::Column::Id.eq(id))
            .filter(vault_secret::Column::OwnerId.eq(owner))
            .exec(db)
            .await?;
        // (In a caller's transaction this is before the commit: a list read in between lives
        // until its age runs out, and a listed key that is gone is refused when it is revealed.)
        changed();
        if done.rows_affected == 0 {
            return Err(StoreError::NotFound);
        }
        Ok(())
    }

    /// Deletes everything an owner has in the vault (their secrets and data keys).
    pub async fn delete_owner<C: ConnectionTrait>(db: &C, owner: Uuid) -> Result<(), StoreError> {
        vault_secret::Entity::delete_many().filter(vault_secret::Column::OwnerId.eq(owner)).exec(db).await?;
        vault_key::Entity::delete_many().filter(vault_key::Column::OwnerId.eq(owner)).exec(db).await?;
        changed();
        Ok(())
    }

    /// Decrypts a secret for the outbound call that needs it, and records the use (never the
    /// value) in the audit log. Any failure is an error; there is no plaintext fallback.
    pub async fn reveal(&self, db: &Db, owner: Uuid, id: Uuid, used: Use<'_>) -> Result<Secret, StoreError> {
        let sealed = Self::sealed(db, owner, id).await?;
        let value = self.unseal(&sealed)?;
        Self::record_unseal(db, &sealed, used).await?;
        Ok(value)
    }

    /// [`Vault::reveal`] in its three steps, for a caller that keeps the sealed rows between
    /// calls and writes the audit row while the call it opened the secret for goes out: the
    /// secret's row and its owner's data key row, still encrypted.
    pub async fn sealed(db: &Db, owner: Uuid, id: Uuid) -> Result<Sealed, StoreError> {
        let secret = Self::find_row(db, owner, id).await?;
        let key = vault_key::Entity::find_by_id((owner, secret.dek_version))
            .one(db)
            .await?
            .ok_or(CryptoError::Decrypt)?;
        Ok(Sealed { secret, key })
    }

    /// The value of a sealed secret. Every call must be followed by [`Vault::record_unseal`].
    pub fn unseal(&self, sealed: &Sealed) -> Result<Secret, StoreError> {
        let Sealed { secret: row, key: key_row } = sealed;
        let dek = self.unwrap_row(key_row)?;
        let place = SecretPlace {
            owner: row.owner_id,
            secret_id: row.id,
            provider: &row.provider,
            dek_version: u32::try_from(row.dek_version).map_err(|_| CryptoError::Malformed)?,
        };
        let plain = crypto::decrypt_secret(&dek, &place, &row.ciphertext)?;
        let value = String::from_utf8(plain.to_vec()).map_err(|_| CryptoError::Malformed)?;
        Ok(Secret::new(value))
    }

    /// The audit row of one decryption of `sealed` (never the value).
    pub async fn record_unseal(db: &Db, sealed: &Sealed, used: Use<'_>) -> Result<(), StoreError> {
        let row = &sealed.secret;
        let actor = used.by.map_or_else(|| "system".to_string(), |u| u.to_string());
        audit::insert(
            db,
            audit::NewEntry {
                actor_id: used.by,
                actor: &actor,
                action: "vault.decrypt",
                target: &format!("secret:{}", row.id),
                details: serde_json::json!({
                    "owner": if row.owner_id == ORG_OWNER { "organisation".to_string() } else { row.owner_id.to_string() },
                    "provider": row.provider,
                    "label": row.label,
                    "purpose": used.purpose,
                }),
                ip: None,
            },
        )
        .await
        .map_err(|e| match e {
            crate::storage::StorageError::Db(e) => StoreError::Storage(e),
            other => StoreError::Storage(sea_orm::DbErr::Custom(other.to_string())),
        })?;
        Ok(())
    }
}
