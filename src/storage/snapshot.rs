//! Consistent copies of a SQLite database while the server writes to it, and checking one.

use std::path::Path;

use sea_orm::{ConnectionTrait, DbBackend, Statement};

use super::{Db, StorageError, StorageResult};

/// Writes a consistent copy of the open SQLite database to `dest` (which must not exist):
/// `VACUUM INTO` reads one snapshot, so writes made meanwhile are either wholly in it or not at
/// all, and the copy is compact and has no WAL of its own.
pub async fn sqlite_copy(db: &Db, dest: &Path) -> StorageResult<()> {
    if db.get_database_backend() != DbBackend::Sqlite {
        return Err(StorageError::Check("a copy with VACUUM INTO needs SQLite".into()));
    }
    let path = dest
        .to_str()
        .ok_or_else(|| StorageError::Check(format!("{} is not a UTF-8 path", dest.display())))?;
    // A string literal: single quotes doubled.
    let sql = format!("VACUUM INTO '{}'", path.replace('\'', "''"));
    db.execute_raw(Statement::from_string(DbBackend::Sqlite, sql)).await?;
    Ok(())
}

/// `PRAGMA integrity_check` of a SQLite database: `ok`, or what SQLite found.
pub async fn sqlite_integrity(db: &Db) -> StorageResult<String> {
    let rows = db
        .query_all_raw(Statement::from_string(DbBackend::Sqlite, "PRAGMA integrity_check".to_string()))
        .await?;
    let lines: Vec<String> = rows.iter().filter_map(|r| r.try_get_by_index::<String>(0).ok()).collect();
    Ok(lines.join("; "))
}
