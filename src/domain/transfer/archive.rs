//! The archive file: a gzip'd tar holding `arbor-export.json` (the document) first, then
//! `blobs/<hash>` for every attached file and thumbnail. Written and read on blocking threads,
//! streaming: neither the archive nor a file in it is ever held whole in memory.

use std::collections::{BTreeSet, HashMap};
use std::fs::File;
use std::io::{BufWriter, Read, Write};
use std::path::Path;

use flate2::Compression;
use flate2::read::GzDecoder;
use flate2::write::GzEncoder;

use crate::blobs::{BlobError, BlobStore, valid_hash};
use crate::model::transfer::Archive;

/// The document's name in the archive.
pub const DOCUMENT: &str = "arbor-export.json";
/// The files' folder in the archive.
const BLOBS: &str = "blobs/";
/// Entries an archive may hold (the document and files).
pub const MAX_ENTRIES: usize = 100_000;

/// The hashes of every file and thumbnail the document names.
pub fn named_files(archive: &Archive) -> BTreeSet<String> {
    let mut hashes = BTreeSet::new();
    for f in
        archive.workspaces.iter().flat_map(|w| &w.sessions).flat_map(|s| &s.messages).flat_map(|m| &m.files)
    {
        hashes.insert(f.hash.clone());
        if let Some(t) = &f.thumb {
            hashes.insert(t.clone());
        }
    }
    hashes
}

/// Writes the archive to `out`. A file missing from the store is left out (and logged): the
/// import then names it.
pub fn write(archive: &Archive, store: &BlobStore, out: &Path) -> std::io::Result<()> {
    let file = File::create(out)?;
    let mut tar = tar::Builder::new(GzEncoder::new(BufWriter::new(file), Compression::default()));
    let document = serde_json::to_vec(archive).map_err(std::io::Error::other)?;
    append(&mut tar, DOCUMENT, document.len() as u64, &mut document.as_slice())?;
    for hash in named_files(archive) {
        let Ok(path) = store.path_of(&hash) else { continue };
        match File::open(&path) {
            Ok(mut f) => {
                let size = f.metadata()?.len();
                append(&mut tar, &format!("{BLOBS}{hash}"), size, &mut f)?;
            }
            Err(e) => tracing::warn!(%hash, error = %e, "an exported file is missing from the blob store"),
        }
    }
    let mut gz = tar.into_inner()?;
    gz.flush()?;
    gz.finish()?.flush()
}

fn append<W: Write>(
    tar: &mut tar::Builder<W>,
    name: &str,
    size: u64,
    data: &mut dyn Read,
) -> std::io::Result<()> {
    let mut header = tar::Header::new_gnu();
    header.set_size(size);
    header.set_mode(0o600);
    header.set_entry_type(tar::EntryType::Regular);
    header.set_mtime(0);
    tar.append_data(&mut header, name, data)
}

/// What reading an archive gave: the document and the files stored from it, by hash, with
/// the type their bytes show.
pub struct ReadArchive {
    /// The document.
    pub archive: Archive,
    /// Files stored: hash → (size, verified type).
    pub files: HashMap<String, (u64, &'static str)>,
}

/// Reads the archive at `path`: the document (at most `max_document` bytes), and every file
/// into the blob store (each at most `max_file` bytes, checked against its name). The error
/// says what is wrong with the archive, safe to show.
pub fn read(path: &Path, store: &BlobStore, max_document: u64, max_file: u64) -> Result<ReadArchive, String> {
    let file = File::open(path).map_err(|_| "The upload could not be read back.".to_string())?;
    let mut tar = tar::Archive::new(GzDecoder::new(file));
    let corrupt = |e: std::io::Error| format!("The archive is corrupt or truncated ({e}).");
    let mut archive = None;
    let mut files = HashMap::new();
    for (n, entry) in tar.entries().map_err(corrupt)?.enumerate() {
        if n >= MAX_ENTRIES {
            return Err(format!("The archive holds more than {MAX_ENTRIES} entries."));
        }
        let mut entry = entry.map_err(corrupt)?;
        let name = entry.path().map_err(corrupt)?.to_string_lossy().into_owned();
        if !entry.header().entry_type().is_file() {
            continue;
        }
        if name == DOCUMENT {
            if entry.size() > max_document {
                return Err(format!(
                    "{DOCUMENT} is larger than {} MiB, the limit for the document.",
                    max_document / (1024 * 1024)
                ));
            }
            let mut bytes = Vec::new();
            entry.by_ref().take(max_document).read_to_end(&mut bytes).map_err(corrupt)?;
            let doc: Archive = serde_json::from_slice(&bytes)
                .map_err(|e| format!("{DOCUMENT} is not a valid export: {e}."))?;
            archive = Some(doc);
        } else if let Some(hash) = name.strip_prefix(BLOBS) {
            if !valid_hash(hash) {
                return Err(format!("The archive holds {name:?}, which is not a file of an export."));
            }
            let stored = store.put_reader_blocking(&mut entry, max_file).map_err(|e| match e {
                BlobError::TooLarge => format!(
                    "The file {hash} in the archive is larger than {} MiB, the limit per file.",
                    max_file / (1024 * 1024)
                ),
                BlobError::Interrupted => "The archive is corrupt or truncated.".to_string(),
                other => {
                    tracing::warn!(error = %other, "an imported file could not be stored");
                    "A file of the archive could not be stored.".to_string()
                }
            })?;
            if stored.hash != hash {
                return Err(format!(
                    "The file {hash} in the archive does not match its name: the archive is corrupt."
                ));
            }
            files.insert(stored.hash, (stored.size, stored.kind.mime()));
        } else {
            return Err(format!("The archive holds {name:?}, which is not part of an Arbor export."));
        }
    }
    let archive =
        archive.ok_or_else(|| format!("The archive holds no {DOCUMENT}: it is not an Arbor export."))?;
    Ok(ReadArchive { archive, files })
}
