//! Which index a directory holds: a random id written once in the index directory. Several
//! Arbor instances share one database but each keeps its own index; the id names the rows in
//! which an index keeps how far it has read (its watermark and its tombstone cursor).
//!
//! The file is not an index file: rebuilding the index (a new schema) keeps it, and the id
//! stays the same for as long as the directory does. A directory copied to another instance
//! must lose the file, or both would share one watermark.

use std::io::Write;
use std::path::Path;

use super::IndexError;

/// The id's file in the index directory.
pub const ID_FILE: &str = "arbor-index-id";

/// A stable, random id of one index directory: 64 bits, written as 16 hex digits (short enough
/// for `index_state`'s names, which hold at most 32 characters).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct IndexId(u64);

impl IndexId {
    /// A new random id.
    pub fn random() -> IndexId {
        IndexId(rand::random())
    }

    /// The id of the index in `dir`, created (written to a temporary file, then renamed into
    /// place) if the directory has none yet, or replaced if its file is unreadable as an id.
    /// Call it with the index open, whose writer lock keeps a second process out of `dir`.
    pub fn of_dir(dir: &Path) -> Result<IndexId, IndexError> {
        let path = dir.join(ID_FILE);
        match std::fs::read_to_string(&path) {
            Ok(text) => match text.trim().parse() {
                Ok(id) => return Ok(id),
                Err(()) => {
                    tracing::warn!(file = %path.display(), "the search index's id is unreadable; making a new one")
                }
            },
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
            Err(e) => return Err(e.into()),
        }
        let id = IndexId::random();
        let tmp = dir.join(format!("{ID_FILE}.{}.tmp", std::process::id()));
        let mut file = std::fs::File::create(&tmp)?;
        file.write_all(format!("{id}\n").as_bytes())?;
        file.sync_all()?;
        drop(file);
        std::fs::rename(&tmp, &path)?;
        Ok(id)
    }
}

impl std::fmt::Display for IndexId {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{:016x}", self.0)
    }
}

impl std::str::FromStr for IndexId {
    type Err = ();

    fn from_str(s: &str) -> Result<IndexId, ()> {
        if s.len() != 16 || !s.bytes().all(|b| b.is_ascii_hexdigit()) {
            return Err(());
        }
        u64::from_str_radix(s, 16).map(IndexId).map_err(|_| ())
    }
}

#[cfg(test)]
mod tests;
