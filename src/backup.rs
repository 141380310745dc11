//! `arbor backup` and `arbor restore`: one gzip'd tar file holding a consistent copy of the
//! SQLite database and the attached files, taken while the server runs.
//!
//! The archive starts with `arbor-backup.json` (what it holds and which schema), then
//! `arbor.db` (a `VACUUM INTO` snapshot; absent on PostgreSQL, which `pg_dump` backs up), then
//! `blobs/…` (content-addressed, so a file never changes once written). Not in it: the search
//! index, which restore rebuilds from the database, and the vault's master key, which belongs
//! apart from the data it protects.

use std::fs::File;
use std::io::{BufWriter, Read, Write};
use std::path::{Component, Path, PathBuf};

use flate2::Compression;
use flate2::read::GzDecoder;
use flate2::write::GzEncoder;
use serde::{Deserialize, Serialize};

use crate::config::Config;
use crate::storage::{self, Db, snapshot};

/// The first entry of every archive.
const MANIFEST: &str = "arbor-backup.json";
/// The database's name in the archive and in the data directory.
const DATABASE: &str = "arbor.db";
/// The attached files' folder, in both.
const BLOBS: &str = "blobs";
/// The one archive format this version writes and reads.
const FORMAT: u32 = 1;
/// A manifest is a few kilobytes; anything bigger is not ours.
const MAX_MANIFEST_BYTES: u64 = 1 << 20;
/// Files a data directory may already hold for a restore: the master key put there first.
const ALLOWED_BEFORE_RESTORE: &[&str] = &["master.key"];

/// What went wrong; every message says what to do.
#[derive(Debug, thiserror::Error)]
pub enum BackupError {
    /// The request cannot be carried out as asked.
    #[error("{0}")]
    Refused(String),
    /// The file is not an Arbor backup this version can read.
    #[error("{0}")]
    NotABackup(String),
    /// Reading or writing a file failed.
    #[error("{0}")]
    Io(String),
    /// The database failed.
    #[error("{0}")]
    Storage(#[from] storage::StorageError),
}

fn io(what: &str, path: &Path) -> impl FnOnce(std::io::Error) -> BackupError {
    let context = format!("{what} {}", path.display());
    move |e| BackupError::Io(format!("{context}: {e}"))
}

/// What an archive holds.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct Manifest {
    /// The archive format.
    pub format: u32,
    /// The Arbor version that wrote it.
    pub arbor_version: String,
    /// When the snapshot was taken.
    pub created_at: chrono::DateTime<chrono::Utc>,
    /// Whether `arbor.db` is inside (SQLite), or the database was PostgreSQL and is not.
    pub database_included: bool,
    /// The migrations the database had applied.
    pub migrations: Vec<String>,
    /// How many attached files are inside.
    pub blobs: u64,
}

/// Writes a backup of the running instance's data to `to`, which must not exist. The archive is
/// written under a temporary name and renamed when complete, so a failure leaves nothing that
/// looks like a backup.
pub async fn create(db: &Db, config: &Config, to: &Path) -> Result<Manifest, BackupError> {
    if to.exists() {
        return Err(BackupError::Refused(format!("{} already exists; name a new file.", to.display())));
    }
    let parent = to.parent().filter(|p| !p.as_os_str().is_empty()).unwrap_or(Path::new("."));
    let work = tempfile_dir(parent)?;
    let sqlite = db.get_database_backend() == sea_orm::DbBackend::Sqlite;
    let copy = work.join(DATABASE);
    if sqlite {
        snapshot::sqlite_copy(db, &copy).await?;
    }
    let migrations = storage::migration_status(db)
        .await?
        .into_iter()
        .filter(|(_, applied)| *applied)
        .map(|(name, _)| name)
        .collect();
    let blobs_dir = config.files.blob_dir(&config.data_dir);
    let partial = work.join("archive.partial");
    let to_owned = to.to_path_buf();
    let result = tokio::task::spawn_blocking(move || {
        let blobs = list_files(&blobs_dir)?;
        let manifest = Manifest {
            format: FORMAT,
            arbor_version: env!("CARGO_PKG_VERSION").to_string(),
            created_at: chrono::Utc::now(),
            database_included: sqlite,
            migrations,
            blobs: blobs.len() as u64,
        };
        write_archive(&partial, &manifest, sqlite.then_some(copy.as_path()), &blobs_dir, &blobs)?;
        std::fs::rename(&partial, &to_owned).map_err(io("cannot move the backup to", &to_owned))?;
        Ok(manifest)
    })
    .await
    .map_err(|e| BackupError::Io(format!("the backup task failed: {e}")));
    let _ = std::fs::remove_dir_all(&work);
    result?
}

/// A fresh private directory beside the destination (same file system, so the final rename is
/// atomic).
fn tempfile_dir(parent: &Path) -> Result<PathBuf, BackupError> {
    let dir = parent.join(format!(".arbor-backup-{}", uuid::Uuid::new_v4()));
    std::fs::create_dir(&dir).map_err(io("cannot create a working directory in", parent))?;
    Ok(dir)
}

/// Every regular file under `dir`, as paths relative to it, sorted (none if it does not exist).
fn list_files(dir: &Path) -> Result<Vec<PathBuf>, BackupError> {
    let mut out = Vec::new();
    let mut stack = vec![PathBuf::new()];
    while let Some(rel) = stack.pop() {
        let full = dir.join(&rel);
        let entries = match std::fs::read_dir(&full) {
            Ok(e) => e,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound && rel.as_os_str().is_empty() => {
                return Ok(out);
            }
            Err(e) => return Err(io("cannot read", &full)(e)),
        };
        for entry in entries {
            let entry = entry.map_err(io("cannot read", &full))?;
            let kind = entry.file_type().map_err(io("cannot read", &entry.path()))?;
            let name = rel.join(entry.file_name());
            if kind.is_dir() {
                stack.push(name);
            } else if kind.is_file() {
                out.push(name);
            }
        }
    }
    out.sort();
    Ok(out)
}

fn write_archive(
    path: &Path,
    manifest: &Manifest,
    database: Option<&Path>,
    blobs_dir: &Path,
    blobs: &[PathBuf],
) -> Result<(), BackupError> {
    let file = File::create(path).map_err(io("cannot create", path))?;
    let mut tar = tar::Builder::new(GzEncoder::new(BufWriter::new(file), Compression::fast()));
    tar.mode(tar::HeaderMode::Deterministic);
    let json = serde_json::to_vec_pretty(manifest).map_err(|e| BackupError::Io(e.to_string()))?;
    let mut header = tar::Header::new_gnu();
    header.set_size(json.len() as u64);
    header.set_mode(0o600);
    header.set_cksum();
    tar.append_data(&mut header, MANIFEST, json.as_slice()).map_err(io("cannot write", path))?;
    if let Some(db) = database {
        tar.append_path_with_name(db, DATABASE).map_err(io("cannot add", db))?;
    }
    for rel in blobs {
        let full = blobs_dir.join(rel);
        match File::open(&full) {
            Ok(mut f) => {
                tar.append_file(Path::new(BLOBS).join(rel), &mut f).map_err(io("cannot add", &full))?
            }
            // Collected as unreferenced after the listing: nothing the snapshot needs.
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
                tracing::warn!(file = %full.display(), "a file went away during the backup")
            }
            Err(e) => return Err(io("cannot read", &full)(e)),
        }
    }
    let gz = tar.into_inner().map_err(io("cannot finish", path))?;
    let mut out = gz.finish().map_err(io("cannot finish", path))?;
    out.flush().map_err(io("cannot write", path))?;
    out.into_inner()
        .map_err(|e| BackupError::Io(format!("cannot write {}: {e}", path.display())))?
        .sync_all()
        .map_err(io("cannot write", path))
}

/// What a restore did.
#[derive(Debug)]
pub struct Restored {
    /// The archive's manifest.
    pub manifest: Manifest,
    /// Messages put back into the search index.
    pub indexed: u64,
}

/// Restores `from` into the configured data directory, which must be empty (but for a master
/// key file). Unpacks into a hidden folder first and moves the result into place only when the
/// whole archive has been read, so a bad archive leaves the directory as it was. Then checks the
/// database (`PRAGMA integrity_check`, a schema this version knows) and rebuilds the search index.
pub async fn restore(config: &Config, from: &Path) -> Result<Restored, BackupError> {
    let data_dir = config.data_dir.clone();
    refuse_non_empty(&data_dir)?;
    std::fs::create_dir_all(&data_dir).map_err(io("cannot create", &data_dir))?;
    let sqlite = config.database.url.is_empty() || config.database.url.starts_with("sqlite:");
    let staging = data_dir.join(format!(".restore-{}", uuid::Uuid::new_v4()));
    std::fs::create_dir(&staging).map_err(io("cannot create", &staging))?;
    let (from_owned, staging_owned) = (from.to_path_buf(), staging.clone());
    let unpacked = tokio::task::spawn_blocking(move || unpack(&from_owned, &staging_owned))
        .await
        .map_err(|e| BackupError::Io(format!("the restore task failed: {e}")))
        .and_then(|r| r);
    let manifest = match unpacked.and_then(|m| check_fits(m, sqlite)) {
        Ok(m) => m,
        Err(e) => {
            let _ = std::fs::remove_dir_all(&staging);
            return Err(e);
        }
    };
    for name in [DATABASE, BLOBS] {
        let src = staging.join(name);
        if src.exists() {
            std::fs::rename(&src, data_dir.join(name)).map_err(io("cannot move into place", &src))?;
        }
    }
    let _ = std::fs::remove_dir_all(&staging);
    let db = storage::connect(config).await?;
    if sqlite {
        let verdict = snapshot::sqlite_integrity(&db).await?;
        if verdict != "ok" {
            return Err(BackupError::NotABackup(format!("the restored database is damaged: {verdict}")));
        }
    }
    storage::refuse_newer_schema(&db).await?;
    let indexed = crate::domain::search::reindex(&db, &config.search.dir(&data_dir), |_, _| {})
        .await
        .map_err(|e| BackupError::Io(format!("rebuilding the search index failed: {e}")))?;
    db.close().await.map_err(storage::StorageError::from)?;
    Ok(Restored { manifest, indexed })
}

fn refuse_non_empty(dir: &Path) -> Result<(), BackupError> {
    let entries = match std::fs::read_dir(dir) {
        Ok(e) => e,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(()),
        Err(e) => return Err(io("cannot read", dir)(e)),
    };
    for entry in entries {
        let name = entry.map_err(io("cannot read", dir))?.file_name();
        if !ALLOWED_BEFORE_RESTORE.iter().any(|a| name == *a) {
            return Err(BackupError::Refused(format!(
                "{} is not empty (it holds {}); restore into a new, empty data directory.",
                dir.display(),
                name.to_string_lossy()
            )));
        }
    }
    Ok(())
}

fn check_fits(manifest: Manifest, sqlite: bool) -> Result<Manifest, BackupError> {
    match (manifest.database_included, sqlite) {
        (true, false) => Err(BackupError::Refused(
            "This backup holds a SQLite database, but database.url points at PostgreSQL: restore it \
             with database.url unset."
                .into(),
        )),
        (false, true) => Err(BackupError::Refused(
            "This backup was taken from PostgreSQL and holds no database: restore the pg_dump first, \
             then run the restore with database.url pointing at it."
                .into(),
        )),
        _ => Ok(manifest),
    }
}

/// Reads the archive into `staging`, entry by entry: the manifest first, then only the database
/// and files under `blobs/`, as plain files with plain relative names.
fn unpack(from: &Path, staging: &Path) -> Result<Manifest, BackupError> {
    let file = File::open(from).map_err(io("cannot open", from))?;
    let mut archive = tar::Archive::new(GzDecoder::new(std::io::BufReader::new(file)));
    let not_ours =
        |why: &str| BackupError::NotABackup(format!("{} is not an Arbor backup: {why}", from.display()));
    let mut entries = archive.entries().map_err(|e| not_ours(&e.to_string()))?;
    let mut first =
        entries.next().ok_or_else(|| not_ours("it is empty"))?.map_err(|e| not_ours(&e.to_string()))?;
    let first_path = first.path().map_err(|e| not_ours(&e.to_string()))?.into_owned();
    if first_path != Path::new(MANIFEST) || first.size() > MAX_MANIFEST_BYTES {
        return Err(not_ours(&format!("it does not start with {MANIFEST}")));
    }
    let mut json = Vec::new();
    first.by_ref().take(MAX_MANIFEST_BYTES).read_to_end(&mut json).map_err(|e| not_ours(&e.to_string()))?;
    let manifest: Manifest =
        serde_json::from_slice(&json).map_err(|e| not_ours(&format!("its manifest cannot be read ({e})")))?;
    if manifest.format != FORMAT {
        return Err(BackupError::NotABackup(format!(
            "{} is backup format {}, which this version ({}) does not read.",
            from.display(),
            manifest.format,
            env!("CARGO_PKG_VERSION")
        )));
    }
    let mut blobs = 0u64;
    let mut saw_database = false;
    for entry in entries {
        let mut entry = entry.map_err(|e| not_ours(&e.to_string()))?;
        let path = entry.path().map_err(|e| not_ours(&e.to_string()))?.into_owned();
        if !entry.header().entry_type().is_file() || !plain_relative(&path) {
            return Err(not_ours(&format!("it holds an unexpected entry {}", path.display())));
        }
        if path == Path::new(DATABASE) {
            saw_database = true;
        } else if path.starts_with(BLOBS) && path.components().count() > 1 {
            blobs += 1;
        } else {
            return Err(not_ours(&format!("it holds an unexpected entry {}", path.display())));
        }
        let dest = staging.join(&path);
        if let Some(parent) = dest.parent() {
            std::fs::create_dir_all(parent).map_err(io("cannot create", parent))?;
        }
        let mut out = File::create(&dest).map_err(io("cannot create", &dest))?;
        std::io::copy(&mut entry, &mut out)
            .map_err(|e| not_ours(&format!("{} is cut short ({e})", path.display())))?;
        out.sync_all().map_err(io("cannot write", &dest))?;
    }
    if saw_database != manifest.database_included || blobs != manifest.blobs {
        return Err(not_ours("it does not hold what its manifest lists (cut short?)"));
    }
    Ok(manifest)
}

/// Only normal components: no root, no `..`, no `.`.
fn plain_relative(path: &Path) -> bool {
    path.components().all(|c| matches!(c, Component::Normal(_))) && path.components().next().is_some()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_plain_relative_names_are_unpacked() {
        assert!(plain_relative(Path::new("blobs/ab/cd")));
        assert!(plain_relative(Path::new("arbor.db")));
        assert!(!plain_relative(Path::new("../etc/passwd")));
        assert!(!plain_relative(Path::new("/etc/passwd")));
        assert!(!plain_relative(Path::new("blobs/../../x")));
        assert!(!plain_relative(Path::new("")));
    }

    fn archive_with(entries: &[(&str, &[u8])]) -> tempfile::NamedTempFile {
        let file = tempfile::NamedTempFile::new().unwrap();
        let mut tar =
            tar::Builder::new(GzEncoder::new(File::create(file.path()).unwrap(), Compression::fast()));
        for (name, data) in entries {
            let mut header = tar::Header::new_gnu();
            header.set_size(data.len() as u64);
            header.set_mode(0o600);
            header.set_cksum();
            tar.append_data(&mut header, name, *data).unwrap();
        }
        tar.into_inner().unwrap().finish().unwrap();
        file
    }

    fn manifest_json(database: bool, blobs: u64) -> Vec<u8> {
        serde_json::to_vec(&Manifest {
            format: FORMAT,
            arbor_version: "test".into(),
            created_at: chrono::Utc::now(),
            database_included: database,
            migrations: vec![],
            blobs,
        })
        .unwrap()
    }

    #[test]
    fn archives_that_are_not_ours_or_reach_outside_are_refused_and_nothing_is_left() {
        let manifest = manifest_json(false, 1);
        type Entries<'a> = Vec<(&'a str, &'a [u8])>;
        let cases: Vec<(Entries, &str)> = vec![
            (vec![], "empty"),
            (vec![("notes.txt", b"hi")], "does not start"),
            (vec![(MANIFEST, b"{not json")], "manifest cannot be read"),
            (vec![(MANIFEST, &manifest), ("etc/passwd", b"x")], "unexpected entry"),
            (vec![(MANIFEST, &manifest), ("blobs", b"x")], "unexpected entry"),
            (vec![(MANIFEST, &manifest)], "does not hold what its manifest lists"),
        ];
        for (entries, want) in cases {
            let file = archive_with(&entries);
            let staging = tempfile::tempdir().unwrap();
            let err = unpack(file.path(), staging.path()).unwrap_err().to_string();
            assert!(err.contains(want), "{want}: {err}");
        }
        // Not even gzip.
        let junk = tempfile::NamedTempFile::new().unwrap();
        std::fs::write(junk.path(), b"plain text, not an archive").unwrap();
        let staging = tempfile::tempdir().unwrap();
        assert!(unpack(junk.path(), staging.path()).is_err());
    }

    #[test]
    fn a_data_directory_with_anything_but_the_master_key_is_refused() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(dir.path().join("master.key"), "k").unwrap();
        assert!(refuse_non_empty(dir.path()).is_ok());
        std::fs::write(dir.path().join("arbor.db"), "x").unwrap();
        let err = refuse_non_empty(dir.path()).unwrap_err().to_string();
        assert!(err.contains("not empty") && err.contains("arbor.db"), "{err}");
        assert!(refuse_non_empty(&dir.path().join("missing")).is_ok());
    }
}
