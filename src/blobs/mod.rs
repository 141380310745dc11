//! The blob store: uploaded and produced files, content-addressed by SHA-512/256 (DESIGN §9).
//!
//! A blob lives at `dir/ab/cd/<hash>`, is written once (temp file, fsync, link into place) and never
//! changes afterwards. The store knows nothing about owners: who may read a hash is decided by the
//! references in the database (SECURITY 18), so a hash on its own grants nothing.

mod imaging;
mod names;
mod sniff;
mod staging;

pub use imaging::{ImageLimits, Prepared, prepare_image};
pub use names::{clean_file_name, content_disposition};
pub use sniff::Kind;
pub use staging::{Staged, Staging};

use std::fs::File;
use std::io::{ErrorKind, Read, Write};
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use futures_util::{Stream, StreamExt};
use sha2::{Digest, Sha512_256};

/// Temp files older than this were left by a crash: no upload takes an hour between chunks.
const STALE_TEMP: Duration = Duration::from_secs(60 * 60);

/// Why a blob could not be stored, found or processed. The messages are safe to show to users;
/// the I/O cause (which may name paths) is only reachable through `source()`, for the logs.
#[derive(Debug, thiserror::Error)]
pub enum BlobError {
    /// The hash is not 64 lowercase hex characters.
    #[error("not a valid file id")]
    BadHash,
    /// No blob with this hash is stored.
    #[error("file not found")]
    NotFound,
    /// The upload went over the size limit.
    #[error("the file is too large")]
    TooLarge,
    /// The upload stream failed before its end.
    #[error("the upload was interrupted")]
    Interrupted,
    /// The image declares more pixels than allowed (decompression-bomb guard).
    #[error("the image has too many pixels")]
    ImageTooLarge,
    /// The bytes are not a readable PNG, JPEG, GIF or WebP image.
    #[error("the image could not be read")]
    BadImage,
    /// The file system failed.
    #[error("the file could not be stored")]
    Io(#[from] std::io::Error),
}

/// A hash as stored and served: 64 lowercase hex characters of SHA-512/256.
pub fn valid_hash(s: &str) -> bool {
    s.len() == 64 && s.bytes().all(|b| matches!(b, b'0'..=b'9' | b'a'..=b'f'))
}

/// The store's name for these bytes.
pub fn hash_of(bytes: &[u8]) -> String {
    hex(&Sha512_256::digest(bytes))
}

fn hex(bytes: &[u8]) -> String {
    const DIGITS: &[u8; 16] = b"0123456789abcdef";
    let mut out = String::with_capacity(bytes.len() * 2);
    for b in bytes {
        out.push(char::from(DIGITS[usize::from(b >> 4)]));
        out.push(char::from(DIGITS[usize::from(b & 0x0f)]));
    }
    out
}

/// What `put` stored.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct StoredBlob {
    /// The SHA-512/256 of the bytes, lowercase hex.
    pub hash: String,
    /// The size in bytes.
    pub size: u64,
    /// What the bytes are, by their magic bytes.
    pub kind: Kind,
    /// False when the blob was already stored. Never show this to users: it would tell them that
    /// someone else uploaded the same bytes (SECURITY 23).
    pub created: bool,
}

/// Blobs under `dir/ab/cd/<hash>` (first two and next two hex chars), written atomically (temp file
/// in `dir/tmp` + fsync + link or rename), read-only once written.
#[derive(Debug, Clone)]
pub struct BlobStore {
    dirs: Arc<Dirs>,
}

#[derive(Debug)]
struct Dirs {
    root: PathBuf,
    tmp: PathBuf,
}

impl BlobStore {
    /// Opens the store, creating `dir` and `dir/tmp`, and removes temp files older than an hour.
    pub fn new(dir: PathBuf) -> Result<BlobStore, BlobError> {
        let tmp = dir.join("tmp");
        create_private_dir(&tmp)?;
        remove_stale_temps(&tmp, STALE_TEMP);
        Ok(BlobStore { dirs: Arc::new(Dirs { root: dir, tmp }) })
    }

    /// Stores the bytes (a copy is taken; see [`BlobStore::put_owned`] to avoid it).
    pub async fn put(&self, bytes: &[u8]) -> Result<StoredBlob, BlobError> {
        self.put_owned(bytes.to_vec()).await
    }

    /// Stores the bytes. A blob that is already there is not replaced (same hash, same bytes), but
    /// the temp file is still written and synced so that a duplicate takes as long as a new file
    /// (SECURITY 23: timing must not reveal a prior copy).
    pub async fn put_owned(&self, bytes: Vec<u8>) -> Result<StoredBlob, BlobError> {
        let store = self.clone();
        blocking(move || {
            let hash = hash_of(&bytes);
            let (temp, mut file) = TempPath::create(&store.dirs.tmp)?;
            file.write_all(&bytes)?;
            let size = bytes.len() as u64;
            let created = store.commit(&temp, file, &hash, size)?;
            Ok(StoredBlob { hash, size, kind: Kind::sniff(&bytes), created })
        })
        .await
    }

    /// Stores a streamed upload, hashing as it writes to a temp file. More than `max_bytes` →
    /// [`BlobError::TooLarge`]; a stream error → [`BlobError::Interrupted`]. The temp file is removed
    /// on every failure, and also when the future is dropped (client gone).
    pub async fn put_stream<S, E>(&self, stream: S, max_bytes: u64) -> Result<StoredBlob, BlobError>
    where
        S: Stream<Item = Result<Bytes, E>>,
    {
        let mut staging = self.stage().await?;
        let mut stream = std::pin::pin!(stream);
        while let Some(chunk) = stream.next().await {
            let chunk = chunk.map_err(|_| BlobError::Interrupted)?;
            if staging.size().saturating_add(chunk.len() as u64) > max_bytes {
                return Err(BlobError::TooLarge);
            }
            staging.write(&chunk).await?;
        }
        staging.finish().await?.commit().await
    }

    /// Stores what `reader` yields, hashing as it writes to a temp file, on a blocking thread
    /// (an archive being imported). More than `max_bytes` → [`BlobError::TooLarge`]; the temp
    /// file is removed on every failure.
    pub fn put_reader_blocking(
        &self,
        reader: &mut dyn Read,
        max_bytes: u64,
    ) -> Result<StoredBlob, BlobError> {
        let (temp, mut file) = TempPath::create(&self.dirs.tmp)?;
        let mut hasher = Sha512_256::new();
        let mut head = Vec::new();
        let mut size: u64 = 0;
        let mut buf = vec![0u8; 64 * 1024];
        loop {
            let n = reader.read(&mut buf).map_err(|_| BlobError::Interrupted)?;
            if n == 0 {
                break;
            }
            size = size.saturating_add(n as u64);
            if size > max_bytes {
                return Err(BlobError::TooLarge);
            }
            hasher.update(&buf[..n]);
            let wanted = (sniff::SNIFF_LEN + 1).saturating_sub(head.len()).min(n);
            head.extend_from_slice(&buf[..wanted]);
            file.write_all(&buf[..n])?;
        }
        let hash = hex(&hasher.finalize());
        let created = self.commit(&temp, file, &hash, size)?;
        Ok(StoredBlob { hash, size, kind: Kind::sniff(&head), created })
    }

    /// Where the blob with this hash lives; [`BlobError::BadHash`] unless [`valid_hash`], so no
    /// request path can reach anything else (SECURITY 16).
    pub fn path_of(&self, hash: &str) -> Result<PathBuf, BlobError> {
        if !valid_hash(hash) {
            return Err(BlobError::BadHash);
        }
        Ok(self.dirs.root.join(&hash[..2]).join(&hash[2..4]).join(hash))
    }

    /// The blob's bytes; [`BlobError::NotFound`] when it is not stored.
    pub async fn read(&self, hash: &str) -> Result<Vec<u8>, BlobError> {
        let path = self.path_of(hash)?;
        tokio::fs::read(&path).await.map_err(not_found_or_io)
    }

    /// Whether a blob with this hash is stored (false for an invalid hash).
    pub async fn exists(&self, hash: &str) -> bool {
        let Ok(path) = self.path_of(hash) else { return false };
        tokio::fs::metadata(&path).await.is_ok_and(|m| m.is_file())
    }

    /// Removes the blob; removing one that is not there is not an error. The two directory levels
    /// stay: removing them could race with a `put` linking a file into them.
    pub async fn delete(&self, hash: &str) -> Result<(), BlobError> {
        let path = self.path_of(hash)?;
        match tokio::fs::remove_file(&path).await {
            Err(e) if e.kind() != ErrorKind::NotFound => Err(e.into()),
            _ => Ok(()),
        }
    }

    /// Every stored hash (for garbage collection), sorted, walking the two-level directories;
    /// ignores anything that is not a valid hash file in its own directory.
    pub async fn list(&self) -> Result<Vec<String>, BlobError> {
        let store = self.clone();
        blocking(move || store.list_blocking()).await
    }

    fn list_blocking(&self) -> Result<Vec<String>, BlobError> {
        let mut hashes = Vec::new();
        for (first, first_dir) in hex_pair_dirs(&self.dirs.root)? {
            for (second, second_dir) in hex_pair_dirs(&first_dir)? {
                let prefix = format!("{first}{second}");
                for entry in std::fs::read_dir(&second_dir)? {
                    let entry = entry?;
                    let Ok(name) = entry.file_name().into_string() else { continue };
                    if valid_hash(&name) && name.starts_with(&prefix) && entry.file_type()?.is_file() {
                        hashes.push(name);
                    }
                }
            }
        }
        hashes.sort_unstable();
        Ok(hashes)
    }

    /// Moves a fully written temp file into place. Returns whether the blob is new.
    fn commit(&self, temp: &TempPath, file: File, hash: &str, size: u64) -> Result<bool, BlobError> {
        let mut permissions = file.metadata()?.permissions();
        permissions.set_readonly(true);
        file.set_permissions(permissions)?;
        file.sync_all()?;
        drop(file);
        let path = self.path_of(hash)?;
        let parent = path.parent().ok_or(BlobError::BadHash)?;
        create_private_dir(parent)?;
        // A hard link never replaces an existing file, so of two concurrent puts exactly one
        // creates the blob and a reader never sees a partial file.
        let created = match std::fs::hard_link(&temp.0, &path) {
            Ok(()) => true,
            Err(e) if e.kind() == ErrorKind::AlreadyExists => match std::fs::metadata(&path) {
                Ok(meta) if meta.len() == size => false,
                // A damaged copy (wrong size), or deleted in between: put ours in place atomically.
                other => {
                    std::fs::rename(&temp.0, &path)?;
                    other.is_err()
                }
            },
            // File systems without hard links: rename is atomic too, only not exclusive.
            Err(_) => {
                let existed = path.exists();
                std::fs::rename(&temp.0, &path)?;
                !existed
            }
        };
        sync_dir(parent);
        Ok(created)
    }
}

/// Runs file work on the blocking pool, off the async worker threads.
async fn blocking<T, F>(f: F) -> Result<T, BlobError>
where
    T: Send + 'static,
    F: FnOnce() -> Result<T, BlobError> + Send + 'static,
{
    tokio::task::spawn_blocking(f).await.map_err(|e| BlobError::Io(std::io::Error::other(e)))?
}

fn not_found_or_io(e: std::io::Error) -> BlobError {
    if e.kind() == ErrorKind::NotFound { BlobError::NotFound } else { BlobError::Io(e) }
}

/// Creates a directory (and its parents) readable by this user only: blobs are other users' files.
fn create_private_dir(dir: &Path) -> std::io::Result<()> {
    let mut builder = std::fs::DirBuilder::new();
    builder.recursive(true);
    #[cfg(unix)]
    std::os::unix::fs::DirBuilderExt::mode(&mut builder, 0o700);
    builder.create(dir)
}

/// Makes a new directory entry durable. Some file systems refuse to sync directories; the file
/// itself is already synced, so that is not worth failing the upload for.
fn sync_dir(dir: &Path) {
    #[cfg(unix)]
    if let Ok(d) = File::open(dir) {
        let _ = d.sync_all();
    }
    #[cfg(not(unix))]
    let _ = dir;
}

/// Removes temp files last modified more than `age` ago; returns how many. Errors are skipped: a
/// leftover costs disk space only, and the next start tries again.
fn remove_stale_temps(tmp: &Path, age: Duration) -> usize {
    let Ok(entries) = std::fs::read_dir(tmp) else { return 0 };
    let mut removed = 0;
    for entry in entries.flatten() {
        let Ok(meta) = entry.metadata() else { continue };
        let old = meta.modified().ok().and_then(|m| m.elapsed().ok()).is_some_and(|e| e > age);
        if meta.is_file() && old && std::fs::remove_file(entry.path()).is_ok() {
            removed += 1;
        }
    }
    if removed > 0 {
        tracing::info!(removed, "removed stale blob temp files");
    }
    removed
}

/// The subdirectories of `dir` named by two lowercase hex characters.
fn hex_pair_dirs(dir: &Path) -> Result<Vec<(String, PathBuf)>, BlobError> {
    let mut out = Vec::new();
    for entry in std::fs::read_dir(dir)? {
        let entry = entry?;
        let Ok(name) = entry.file_name().into_string() else { continue };
        let pair = name.len() == 2 && name.bytes().all(|b| matches!(b, b'0'..=b'9' | b'a'..=b'f'));
        if pair && entry.file_type()?.is_dir() {
            out.push((name, entry.path()));
        }
    }
    Ok(out)
}

/// A temp file in `dir/tmp`, removed when dropped: on success it has been linked or renamed into
/// place, on failure or cancellation it is garbage.
struct TempPath(PathBuf);

impl TempPath {
    fn create(tmp: &Path) -> std::io::Result<(TempPath, File)> {
        let mut random = [0u8; 16];
        rand::fill(&mut random);
        let path = tmp.join(format!("{}.tmp", hex(&random)));
        let file = std::fs::OpenOptions::new().write(true).create_new(true).open(&path)?;
        Ok((TempPath(path), file))
    }
}

impl Drop for TempPath {
    fn drop(&mut self) {
        // After a rename the file is gone already; NotFound is the normal case then.
        let _ = std::fs::remove_file(&self.0);
    }
}

#[cfg(test)]
mod tests;
