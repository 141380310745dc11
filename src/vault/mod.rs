//! The key vault (SECURITY.md §1): the master key, its check at start-up, and the crypto that
//! keeps provider keys encrypted per user. What it protects against: theft of the database or a
//! backup, SQL-injection reads, logs and exports. Not against a compromised running server,
//! which holds the master key in memory by design.

pub mod crypto;
pub mod handover;
pub mod rotate;
pub mod store;

use std::path::{Path, PathBuf};

use sea_orm::{EntityTrait, PaginatorTrait, Set};

use crate::storage::Db;
use crate::storage::entities::{vault_key, vault_meta};
use crypto::Key;

/// Why the vault cannot open; the server does not start and nothing was written.
#[derive(Debug, thiserror::Error)]
pub enum VaultError {
    /// The configured key is not the one the database was set up with.
    #[error(
        "vault master key mismatch: configured key id {configured}, database expects {expected}; nothing was modified"
    )]
    Mismatch {
        /// Id of the key that was loaded.
        configured: String,
        /// Id the database records.
        expected: String,
    },
    /// The key id matches but the canary does not decrypt (the stored data is damaged).
    #[error("vault canary does not decrypt under the configured master key; nothing was modified")]
    Canary,
    /// The database holds vault data but no master key was given.
    #[error(
        "the database holds vault data but no master key is configured: set ARBOR_MASTER_KEY_FILE to the key \
         file you backed up; nothing was modified"
    )]
    MissingKey,
    /// The key file or variable could not be read or is not a 32-byte key.
    #[error("vault master key: {0}")]
    BadKey(String),
    /// The database failed.
    #[error("vault storage: {0}")]
    Storage(#[from] sea_orm::DbErr),
}

/// Where the master key came from.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum KeySource {
    /// A file (`ARBOR_MASTER_KEY_FILE`, or `master.key` in the data directory).
    File(PathBuf),
    /// The `ARBOR_MASTER_KEY` environment variable (documented fallback).
    Environment,
    /// Generated on this fresh install and written to this file.
    Generated(PathBuf),
}

/// The open vault: the master key and its id.
#[derive(Clone)]
pub struct Vault {
    master: Key,
    key_id: String,
    source: KeySource,
}

impl std::fmt::Debug for Vault {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Vault").field("key_id", &self.key_id).field("source", &self.source).finish()
    }
}

/// Reads a key: 32 raw bytes, 64 hex digits or base64 of 32 bytes (surrounding whitespace ignored).
pub fn parse_key(raw: &[u8]) -> Result<Key, VaultError> {
    if raw.len() == 32 {
        return Key::from_bytes(raw).map_err(|e| VaultError::BadKey(e.to_string()));
    }
    let text =
        std::str::from_utf8(raw).map_err(|_| VaultError::BadKey("not 32 bytes, hex or base64".into()))?;
    let text = text.trim();
    let bytes = if text.len() == 64 && text.bytes().all(|b| b.is_ascii_hexdigit()) {
        (0..32).map(|i| u8::from_str_radix(&text[i * 2..i * 2 + 2], 16).unwrap_or(0)).collect::<Vec<u8>>()
    } else {
        use base64::Engine as _;
        base64::engine::general_purpose::STANDARD
            .decode(text)
            .map_err(|_| VaultError::BadKey("not 32 bytes, hex or base64".into()))?
    };
    Key::from_bytes(&bytes).map_err(|e| VaultError::BadKey(e.to_string()))
}

/// The default key file in the data directory.
pub fn default_key_file(data_dir: &Path) -> PathBuf {
    data_dir.join("master.key")
}

/// Finds the configured master key: `ARBOR_MASTER_KEY_FILE`, else `ARBOR_MASTER_KEY`, else the
/// data directory's `master.key`; `None` when there is none.
pub fn configured_key(
    env: &[(String, String)],
    data_dir: &Path,
) -> Result<Option<(Key, KeySource)>, VaultError> {
    let var =
        |name: &str| env.iter().find(|(k, _)| k == name).map(|(_, v)| v.clone()).filter(|v| !v.is_empty());
    if let Some(path) = var("ARBOR_MASTER_KEY_FILE") {
        let path = PathBuf::from(path);
        let raw = std::fs::read(&path).map_err(|e| VaultError::BadKey(format!("{}: {e}", path.display())))?;
        return Ok(Some((parse_key(&raw)?, KeySource::File(path))));
    }
    if let Some(value) = var("ARBOR_MASTER_KEY") {
        return Ok(Some((parse_key(value.as_bytes())?, KeySource::Environment)));
    }
    let path = default_key_file(data_dir);
    match std::fs::read(&path) {
        Ok(raw) => Ok(Some((parse_key(&raw)?, KeySource::File(path)))),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(None),
        Err(e) => Err(VaultError::BadKey(format!("{}: {e}", path.display()))),
    }
}

/// Writes a fresh key file readable by its owner only; never replaces an existing file.
fn write_new_key(path: &Path, key: &Key) -> Result<(), VaultError> {
    use std::io::Write as _;
    let hex: String = key.bytes().iter().map(|b| format!("{b:02x}")).collect();
    if let Some(dir) = path.parent() {
        std::fs::create_dir_all(dir).map_err(|e| VaultError::BadKey(format!("{}: {e}", dir.display())))?;
    }
    let mut options = std::fs::OpenOptions::new();
    options.write(true).create_new(true);
    #[cfg(unix)]
    {
        use std::os::unix::fs::OpenOptionsExt as _;
        options.mode(0o600);
    }
    let mut file = options.open(path).map_err(|e| VaultError::BadKey(format!("{}: {e}", path.display())))?;
    file.write_all(format!("{hex}\n").as_bytes())
        .and_then(|()| file.sync_all())
        .map_err(|e| VaultError::BadKey(format!("{}: {e}", path.display())))
}

/// What the database says about the vault.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct VaultStatus {
    /// The key id the database expects, once set up.
    pub expected_key_id: Option<String>,
    /// Wrapped data keys, in all.
    pub data_keys: u64,
    /// Data keys wrapped under a key other than the expected one (a rotation in progress).
    pub data_keys_elsewhere: u64,
}

/// Reads the vault's state without a key.
pub async fn status(db: &Db) -> Result<VaultStatus, VaultError> {
    use sea_orm::{ColumnTrait, QueryFilter};
    let meta = vault_meta::Entity::find_by_id(1).one(db).await?;
    let data_keys = vault_key::Entity::find().count(db).await?;
    let data_keys_elsewhere = match &meta {
        Some(m) => {
            vault_key::Entity::find().filter(vault_key::Column::KekId.ne(m.kek_id.clone())).count(db).await?
        }
        None => 0,
    };
    Ok(VaultStatus { expected_key_id: meta.map(|m| m.kek_id), data_keys, data_keys_elsewhere })
}

impl Vault {
    /// Opens the vault at start-up: checks the configured key against the database's key id and
    /// canary, or sets the vault up on a fresh install (generating a key file when none is
    /// configured). Any mismatch fails before anything is written.
    pub async fn open(db: &Db, env: &[(String, String)], data_dir: &Path) -> Result<Vault, VaultError> {
        let meta = vault_meta::Entity::find_by_id(1).one(db).await?;
        let has_keys = vault_key::Entity::find().count(db).await? > 0;
        let (master, source) = match configured_key(env, data_dir)? {
            Some(found) => found,
            None if meta.is_some() || has_keys => return Err(VaultError::MissingKey),
            None => {
                let key = Key::generate();
                let path = default_key_file(data_dir);
                write_new_key(&path, &key)?;
                tracing::warn!(
                    path = %path.display(),
                    "GENERATED A NEW VAULT MASTER KEY. Back this file up now, apart from the database: \
                     without it the provider keys stored in Arbor cannot be decrypted."
                );
                (key, KeySource::Generated(path))
            }
        };
        let key_id = master.key_id();
        match meta {
            Some(m) if m.kek_id != key_id => {
                return Err(VaultError::Mismatch { configured: key_id, expected: m.kek_id });
            }
            Some(m) if !crypto::canary_matches(&master, &m.canary) => return Err(VaultError::Canary),
            Some(_) => {}
            // Data keys without a record of their master key: refuse rather than guess.
            None if has_keys => return Err(VaultError::MissingKey),
            None => {
                let row = vault_meta::ActiveModel {
                    id: Set(1),
                    kek_id: Set(key_id.clone()),
                    canary: Set(crypto::canary(&master)),
                    created_at: Set(chrono::Utc::now()),
                };
                // Several instances starting together on a new database: one records its key,
                // and every one then checks its own key against what was recorded.
                let first =
                    sea_orm::sea_query::OnConflict::column(vault_meta::Column::Id).do_nothing().to_owned();
                vault_meta::Entity::insert(row).on_conflict(first).exec_without_returning(db).await?;
                let stored =
                    vault_meta::Entity::find_by_id(1).one(db).await?.ok_or(VaultError::MissingKey)?;
                if stored.kek_id != key_id {
                    return Err(VaultError::Mismatch { configured: key_id, expected: stored.kek_id });
                }
            }
        }
        Ok(Vault { master, key_id, source })
    }

    /// The master key's id.
    pub fn key_id(&self) -> &str {
        &self.key_id
    }

    /// Where the master key came from.
    pub fn source(&self) -> &KeySource {
        &self.source
    }

    /// The master key, for wrapping and unwrapping data keys.
    pub fn master(&self) -> &Key {
        &self.master
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn keys_are_read_as_bytes_hex_or_base64() {
        let key = Key::generate();
        let hex: String = key.bytes().iter().map(|b| format!("{b:02x}")).collect();
        use base64::Engine as _;
        let b64 = base64::engine::general_purpose::STANDARD.encode(key.bytes());
        for raw in [key.bytes().to_vec(), format!("{hex}\n").into_bytes(), format!(" {b64} ").into_bytes()] {
            assert_eq!(parse_key(&raw).unwrap().key_id(), key.key_id());
        }
        assert!(parse_key(b"short").is_err());
        assert!(parse_key(&[0u8; 31]).is_err());
    }
}
