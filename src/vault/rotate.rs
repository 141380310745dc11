//! Master key rotation: every data key is rewrapped under the new master key in small
//! transactions, each row by compare-and-swap on its old key id, so a rotation killed at any
//! point resumes where it stopped and no data key is ever left unreadable. Secrets themselves are
//! not touched. The database switches its expected key id only when no row is left behind.

use sea_orm::{
    ActiveModelTrait, ColumnTrait, EntityTrait, PaginatorTrait, QueryFilter, QueryOrder, QuerySelect, Set,
};

use super::crypto::{self, Key, WrappedKey};
use super::{Vault, VaultError};
use crate::storage::Db;
use crate::storage::entities::{vault_key, vault_meta};
use crate::storage::repos::audit;

/// How a rotation ended.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Rotated {
    /// The old master key's id.
    pub from: String,
    /// The new master key's id, now expected by the database.
    pub to: String,
    /// Data keys rewrapped by this run (a resumed run counts only its own).
    pub rewrapped: u64,
}

fn storage(e: sea_orm::DbErr) -> VaultError {
    VaultError::Storage(e)
}

/// Rewraps every data key under `new`, `batch` rows per transaction, calling `progress(done,
/// total)` after each batch; then records `new` as the expected master key and checks that
/// every data key unwraps under it.
pub async fn rotate(
    db: &Db,
    old: &Vault,
    new: &Key,
    batch: u64,
    mut progress: impl FnMut(u64, u64),
) -> Result<Rotated, VaultError> {
    let (from, to) = (old.key_id().to_string(), new.key_id());
    if from == to {
        return Err(VaultError::BadKey("the new master key is the one already in use".into()));
    }
    let stray = vault_key::Entity::find()
        .filter(vault_key::Column::KekId.ne(from.clone()))
        .filter(vault_key::Column::KekId.ne(to.clone()))
        .count(db)
        .await?;
    if stray > 0 {
        return Err(VaultError::BadKey(format!(
            "{stray} data keys are wrapped under a master key that is neither {from} nor {to}; nothing was modified"
        )));
    }
    let total = vault_key::Entity::find().count(db).await?;
    let mut done =
        vault_key::Entity::find().filter(vault_key::Column::KekId.eq(to.clone())).count(db).await?;
    let mut rewrapped = 0;
    progress(done, total);
    loop {
        let rows = vault_key::Entity::find()
            .filter(vault_key::Column::KekId.eq(from.clone()))
            .order_by_asc(vault_key::Column::OwnerId)
            .order_by_asc(vault_key::Column::DekVersion)
            .limit(batch.max(1))
            .all(db)
            .await?;
        if rows.is_empty() {
            break;
        }
        let txn = crate::storage::begin_write(db).await.map_err(storage)?;
        for row in &rows {
            let version = u32::try_from(row.dek_version).unwrap_or(0);
            let w = WrappedKey {
                kek_id: row.kek_id.clone(),
                nonce: row.nonce.clone(),
                wrapped: row.wrapped.clone(),
            };
            let dek = crypto::unwrap_key(old.master(), row.owner_id, version, &w).map_err(|e| {
                VaultError::BadKey(format!("data key of {} does not unwrap: {e}", row.owner_id))
            })?;
            let fresh = crypto::wrap_key(new, row.owner_id, version, &dek);
            // Compare-and-swap: only a row still under the old key is rewritten.
            vault_key::Entity::update_many()
                .col_expr(vault_key::Column::KekId, fresh.kek_id.clone().into())
                .col_expr(vault_key::Column::Nonce, fresh.nonce.clone().into())
                .col_expr(vault_key::Column::Wrapped, fresh.wrapped.clone().into())
                .filter(vault_key::Column::OwnerId.eq(row.owner_id))
                .filter(vault_key::Column::DekVersion.eq(row.dek_version))
                .filter(vault_key::Column::KekId.eq(from.clone()))
                .exec(&txn)
                .await?;
        }
        txn.commit().await.map_err(storage)?;
        done += rows.len() as u64;
        rewrapped += rows.len() as u64;
        progress(done.min(total), total);
    }
    // Every row must now unwrap under the new key before the database is told to expect it.
    let mut pages = vault_key::Entity::find().order_by_asc(vault_key::Column::OwnerId).paginate(db, 500);
    while let Some(rows) = pages.fetch_and_next().await? {
        for row in rows {
            let version = u32::try_from(row.dek_version).unwrap_or(0);
            let w = WrappedKey { kek_id: row.kek_id.clone(), nonce: row.nonce, wrapped: row.wrapped };
            crypto::unwrap_key(new, row.owner_id, version, &w).map_err(|e| {
                VaultError::BadKey(format!(
                    "data key of {} does not unwrap under the new key: {e}",
                    row.owner_id
                ))
            })?;
        }
    }
    let txn = crate::storage::begin_write(db).await.map_err(storage)?;
    let meta = vault_meta::Entity::find_by_id(1).one(&txn).await?.ok_or(VaultError::MissingKey)?;
    let mut meta: vault_meta::ActiveModel = meta.into();
    meta.kek_id = Set(to.clone());
    meta.canary = Set(crypto::canary(new));
    meta.update(&txn).await?;
    audit::insert(
        &txn,
        audit::NewEntry {
            actor_id: None,
            actor: "cli",
            action: "vault.rotate",
            target: "vault",
            details: serde_json::json!({ "from": from, "to": to, "data_keys": total }),
            ip: None,
        },
    )
    .await
    .map_err(|e| VaultError::BadKey(format!("audit: {e}")))?;
    txn.commit().await.map_err(storage)?;
    Ok(Rotated { from, to, rewrapped })
}

/// A text progress bar for a terminal: `[#####.....] 512/1024 data keys` (`what`: "data keys").
pub fn progress_bar(done: u64, total: u64, what: &str) -> String {
    const WIDTH: u64 = 30;
    let filled = (done.min(total) * WIDTH).checked_div(total).unwrap_or(WIDTH);
    let bar: String = (0..WIDTH).map(|i| if i < filled { '#' } else { '.' }).collect();
    format!("[{bar}] {done}/{total} {what}")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_progress_bar_fills() {
        assert_eq!(progress_bar(0, 10, "data keys"), format!("[{}] 0/10 data keys", ".".repeat(30)));
        assert_eq!(
            progress_bar(5, 10, "data keys"),
            format!("[{}{}] 5/10 data keys", "#".repeat(15), ".".repeat(15))
        );
        assert_eq!(progress_bar(0, 0, "data keys"), format!("[{}] 0/0 data keys", "#".repeat(30)));
    }
}
