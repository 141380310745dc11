//! The index's directory: tantivy's memory-mapped one, except that the document stores are read
//! with `pread`.
//!
//! Why: a memory-mapped file's pages stay in the process's resident set for as long as the
//! mapping lives, and tantivy keeps one mapping per file while any segment reader uses it. A
//! document store is read a block at a time for the few hits on a page of results, but a merge
//! copies whole stores through the mapping, so every store page a merge ever touched stayed
//! resident: 17 MiB after a 30-minute soak whose data grew, and growing with the data. Read with
//! `pread`, a block is a short-lived buffer and the pages stay in the kernel's page cache, which
//! the kernel can reclaim. A read too large for a buffer (a merge copying a whole store) still
//! goes through a mapping, one of its own that is unmapped as soon as the merge lets go of it.

use std::fs::File;
use std::ops::Range;
use std::os::unix::fs::FileExt;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::{fmt, io};

use tantivy::HasLen;
use tantivy::directory::error::{DeleteError, LockError, OpenReadError, OpenWriteError};
use tantivy::directory::{
    Directory, DirectoryLock, FileHandle, Lock, MmapDirectory, OwnedBytes, WatchCallback, WatchHandle,
    WritePtr,
};

/// Reads up to this size are copied into a buffer; larger ones are mapped.
const LARGEST_COPIED_READ: usize = 1024 * 1024;

/// [`MmapDirectory`], with the document stores (`*.store`) read by [`ReadAtFile`].
#[derive(Clone, Debug)]
pub(super) struct IndexDirectory {
    mapped: MmapDirectory,
    root: PathBuf,
}

impl IndexDirectory {
    pub(super) fn open(root: &Path) -> Result<IndexDirectory, tantivy::directory::error::OpenDirectoryError> {
        Ok(IndexDirectory { mapped: MmapDirectory::open(root)?, root: root.to_path_buf() })
    }
}

fn is_document_store(path: &Path) -> bool {
    path.extension().is_some_and(|ext| ext == "store")
}

impl Directory for IndexDirectory {
    fn get_file_handle(&self, path: &Path) -> Result<Arc<dyn FileHandle>, OpenReadError> {
        if !is_document_store(path) {
            return self.mapped.get_file_handle(path);
        }
        let file = File::open(self.root.join(path)).map_err(|e| match e.kind() {
            io::ErrorKind::NotFound => OpenReadError::FileDoesNotExist(path.to_path_buf()),
            _ => OpenReadError::wrap_io_error(e, path.to_path_buf()),
        })?;
        let len = file.metadata().map_err(|e| OpenReadError::wrap_io_error(e, path.to_path_buf()))?.len();
        // Index files are written by this process; a length past the address space is corruption.
        let len = usize::try_from(len).map_err(|_| {
            let e = io::Error::new(io::ErrorKind::InvalidData, "index file larger than the address space");
            OpenReadError::wrap_io_error(e, path.to_path_buf())
        })?;
        Ok(Arc::new(ReadAtFile { file, len, path: path.to_path_buf(), mapped: self.mapped.clone() }))
    }

    fn delete(&self, path: &Path) -> Result<(), DeleteError> {
        let deleted = self.mapped.delete(path);
        // tantivy 0.27's `MmapDirectory` keeps an entry (the full path and a weak reference) for
        // every file it ever mapped, deleted or not, and only `get_cache_info` sweeps the dead
        // ones. The writer's garbage collection deletes the files of merged segments after each
        // commit, so sweeping here keeps the map at the files still mapped. Without it the map
        // grew by every file of every segment, a commit a second under load: 2.3 MiB in a
        // 20-minute soak (BENCHMARKS.md, "Soak"), without end.
        self.mapped.get_cache_info();
        deleted
    }

    fn exists(&self, path: &Path) -> Result<bool, OpenReadError> {
        self.mapped.exists(path)
    }

    fn open_write(&self, path: &Path) -> Result<WritePtr, OpenWriteError> {
        self.mapped.open_write(path)
    }

    fn atomic_read(&self, path: &Path) -> Result<Vec<u8>, OpenReadError> {
        self.mapped.atomic_read(path)
    }

    fn atomic_write(&self, path: &Path, data: &[u8]) -> io::Result<()> {
        self.mapped.atomic_write(path, data)
    }

    fn sync_directory(&self) -> io::Result<()> {
        self.mapped.sync_directory()
    }

    fn acquire_lock(&self, lock: &Lock) -> Result<DirectoryLock, LockError> {
        self.mapped.acquire_lock(lock)
    }

    fn watch(&self, watch_callback: WatchCallback) -> tantivy::Result<WatchHandle> {
        self.mapped.watch(watch_callback)
    }
}

/// A file read with `pread` into a buffer per read; reads over [`LARGEST_COPIED_READ`] are
/// served from a mapping opened for that read alone.
struct ReadAtFile {
    file: File,
    len: usize,
    path: PathBuf,
    mapped: MmapDirectory,
}

impl fmt::Debug for ReadAtFile {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("ReadAtFile").field("path", &self.path).field("len", &self.len).finish()
    }
}

impl HasLen for ReadAtFile {
    fn len(&self) -> usize {
        self.len
    }
}

impl FileHandle for ReadAtFile {
    fn read_bytes(&self, range: Range<usize>) -> io::Result<OwnedBytes> {
        if range.start > range.end || range.end > self.len {
            return Err(io::Error::new(
                io::ErrorKind::InvalidInput,
                format!("read of {range:?} past the end of {:?} ({} bytes)", self.path, self.len),
            ));
        }
        if range.is_empty() {
            return Ok(OwnedBytes::empty());
        }
        if range.len() > LARGEST_COPIED_READ {
            // The mapping is shared only with other large reads of this file running now, and
            // unmapped when the last of them drops its bytes.
            let whole = self.mapped.get_file_handle(&self.path).map_err(io::Error::other)?;
            return whole.read_bytes(range);
        }
        let mut buffer = vec![0; range.len()];
        self.file.read_exact_at(&mut buffer, range.start as u64)?;
        Ok(OwnedBytes::new(buffer))
    }
}

#[cfg(test)]
mod tests {
    use std::io::Write;

    use super::*;

    fn directory_with(name: &str, content: &[u8]) -> (tempfile::TempDir, IndexDirectory) {
        let dir = tempfile::tempdir().expect("temp dir");
        std::fs::File::create(dir.path().join(name)).and_then(|mut f| f.write_all(content)).expect("write");
        let index_dir = IndexDirectory::open(dir.path()).expect("open");
        (dir, index_dir)
    }

    #[test]
    fn a_document_store_is_read_into_buffers_and_other_files_are_mapped() {
        let content: Vec<u8> = (0..=255u8).cycle().take(10_000).collect();
        let (_tmp, dir) = directory_with("a.store", &content);
        let store = dir.get_file_handle(Path::new("a.store")).expect("store");
        assert_eq!(store.len(), content.len());
        assert!(format!("{store:?}").starts_with("ReadAtFile"), "{store:?}");
        assert_eq!(store.read_bytes(100..356).expect("read").as_slice(), &content[100..356]);
        assert_eq!(store.read_bytes(9_990..10_000).expect("tail").as_slice(), &content[9_990..]);
        assert!(store.read_bytes(5..5).expect("empty").is_empty());

        std::fs::write(dir.root.join("a.idx"), &content).expect("write idx");
        let postings = dir.get_file_handle(Path::new("a.idx")).expect("postings");
        assert!(!format!("{postings:?}").starts_with("ReadAtFile"), "{postings:?}");
        assert_eq!(postings.read_bytes(0..10).expect("read").as_slice(), &content[..10]);
    }

    #[test]
    fn a_read_past_the_end_is_an_error_not_a_panic() {
        let (_tmp, dir) = directory_with("b.store", b"0123456789");
        let store = dir.get_file_handle(Path::new("b.store")).expect("store");
        let err = store.read_bytes(5..11).expect_err("past the end");
        assert_eq!(err.kind(), io::ErrorKind::InvalidInput);
        #[allow(clippy::reversed_empty_ranges)]
        let reversed = 8..3;
        assert!(store.read_bytes(reversed).is_err());
    }

    #[test]
    fn a_large_read_comes_from_a_mapping_that_ends_with_the_bytes() {
        let content: Vec<u8> = (0..LARGEST_COPIED_READ * 2 + 7).map(|i| (i % 251) as u8).collect();
        let (_tmp, dir) = directory_with("c.store", &content);
        let store = dir.get_file_handle(Path::new("c.store")).expect("store");
        let whole = store.read_bytes(3..content.len()).expect("large read");
        assert_eq!(whole.as_slice(), &content[3..]);
        drop(whole);
        // Nothing holds the mapping now: the next large read maps the file again.
        assert_eq!(store.read_bytes(0..content.len()).expect("again").as_slice(), &content[..]);
    }

    /// Maps, drops and deletes files named like segment files, on this thread.
    #[cfg(all(unix, not(target_env = "musl")))]
    fn map_and_delete(dir: &IndexDirectory, numbers: std::ops::Range<u32>) {
        for n in numbers {
            let name = format!("{n:032x}.idx");
            std::fs::write(dir.root.join(&name), b"postings").expect("write");
            let handle = dir.get_file_handle(Path::new(&name)).expect("map");
            assert_eq!(handle.read_bytes(0..8).expect("read").as_slice(), b"postings");
            drop(handle);
            dir.delete(Path::new(&name)).expect("delete");
        }
    }

    /// What this thread has allocated and not freed, by the allocator's own count.
    #[cfg(all(unix, not(target_env = "musl")))]
    fn held_by_this_thread() -> i128 {
        use tikv_jemalloc_ctl::thread::{allocatedp, deallocatedp};
        let allocated = allocatedp::read().expect("thread.allocatedp").get();
        let freed = deallocatedp::read().expect("thread.deallocatedp").get();
        i128::from(allocated) - i128::from(freed)
    }

    #[cfg(all(unix, not(target_env = "musl")))]
    #[test]
    fn deleted_files_leave_nothing_behind_in_the_mapping_cache() {
        let (_tmp, dir) = directory_with("seed.idx", b"");
        // The first round grows what is reused afterwards (the map's table, buffers).
        map_and_delete(&dir, 0..200);
        let before = held_by_this_thread();
        map_and_delete(&dir, 200..2_200);
        let kept = held_by_this_thread() - before;
        // Without the sweep on delete, each file left its path and a map slot: 376 KiB here.
        assert!(kept < 32 * 1024, "{kept} bytes stayed behind for 2,000 deleted files");
    }

    #[test]
    fn a_missing_store_reads_as_missing() {
        let (_tmp, dir) = directory_with("x.idx", b"");
        let err = dir.get_file_handle(Path::new("gone.store")).expect_err("missing");
        assert!(matches!(err, OpenReadError::FileDoesNotExist(_)), "{err:?}");
    }
}
