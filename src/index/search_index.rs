//! The index itself: opening (and rebuilding when outdated), writing in committed batches, and
//! searching one user's messages.

use std::ops::Range;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, MutexGuard};

use chrono::{DateTime, Utc};
use tantivy::collector::sort_key::{SortBySimilarityScore, SortByStaticFastValue};
use tantivy::collector::{Count, TopDocs};
use tantivy::directory::error::OpenReadError;
use tantivy::directory::{Directory, DirectoryLock, INDEX_WRITER_LOCK, Lock};
use tantivy::indexer::IndexWriterOptions;
use tantivy::schema::{Schema, Value};
use tantivy::snippet::SnippetGenerator;

pub use crate::model::search::Snippet;
use tantivy::tokenizer::TextAnalyzer;
use tantivy::{
    DocAddress, Index, IndexReader, IndexWriter, ReloadPolicy, Searcher, TantivyDocument, TantivyError,
};
use uuid::Uuid;

use super::query::{self, SearchQuery};
use super::schema::{self, ANALYZER, CREATED_AT, Fields, SCHEMA_VERSION, id_term};
use super::{IndexError, IndexOp};

mod directory;
use directory::IndexDirectory;

/// The writer's indexing memory, shared by its threads; a segment is flushed when it is full.
const WRITER_HEAP_BYTES: usize = 96 * 1024 * 1024;

/// Indexing threads (the typical host has 2 cores, and the server runs beside the indexer).
const MAX_WRITER_THREADS: usize = 2;

/// A page holds at most this many hits.
pub const MAX_LIMIT: usize = 100;

/// Hits past this offset are not returned (`total` is still exact): deep pages cost memory and
/// time proportional to the offset.
pub const MAX_OFFSET: usize = 10_000;

/// Snippet length, in bytes of message text.
const SNIPPET_BYTES: usize = 200;

/// Marks which [`SCHEMA_VERSION`] wrote the index in its directory.
const VERSION_FILE: &str = "arbor-search-version";

/// Held for as long as an index in a directory is open, so that a second process (another
/// server on the same data directory, `arbor reindex` beside a running one) cannot open it.
/// Tantivy's writer lock cannot do this: the writer is made only while there is something to
/// write (see [`SearchIndex::release_writer`]).
const OPEN_LOCK: &str = "arbor-index.lock";

/// One page of results.
#[derive(Debug, Clone, PartialEq)]
pub struct SearchResults {
    /// How many messages match in all.
    pub total: usize,
    /// The requested page, best first.
    pub hits: Vec<SearchHit>,
}

/// One matching message.
#[derive(Debug, Clone, PartialEq)]
pub struct SearchHit {
    /// The message.
    pub message_id: Uuid,
    /// Its session.
    pub session_id: Uuid,
    /// Its workspace.
    pub workspace_id: Uuid,
    /// `user`, `assistant` or `tool`.
    pub role: String,
    /// When it was written.
    pub created_at: DateTime<Utc>,
    /// The session's title when the message was indexed.
    pub session_title: String,
    /// A piece of the text and the matched words in it (plain text: rendering is the web's job).
    pub snippet: Snippet,
    /// The BM25 score (0 for searches by filters alone).
    pub score: f32,
}

/// The index in a directory (or in memory, for tests), with its single writer.
///
/// Cheap to clone; all clones share the writer, which a mutex serializes.
#[derive(Clone)]
pub struct SearchIndex {
    inner: Arc<Inner>,
}

struct Inner {
    index: Index,
    reader: IndexReader,
    fields: Fields,
    analyzer: TextAnalyzer,
    /// Made by the first write, and again after a failure it could not roll back from or after
    /// [`SearchIndex::release_writer`]: an open writer holds about 3 MB (a channel of 10,000
    /// document slots) and its threads, which an index nobody writes to does not need.
    writer: Mutex<Option<IndexWriter>>,
    /// [`OPEN_LOCK`], for an index in a directory.
    _open: Option<Arc<DirectoryLock>>,
}

impl std::fmt::Debug for SearchIndex {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SearchIndex").field("num_docs", &self.num_docs()).finish()
    }
}

/// Errors that mean "this is not an index we can use": it is rebuilt rather than reported.
fn unusable(e: &TantivyError) -> bool {
    matches!(
        e,
        TantivyError::SchemaError(_)
            | TantivyError::IncompatibleIndex(_)
            | TantivyError::DataCorruption(_)
            | TantivyError::DeserializeError(_)
            | TantivyError::OpenReadError(
                OpenReadError::IncompatibleIndex(_) | OpenReadError::FileDoesNotExist(_)
            )
    )
}

/// Files that belong to a Tantivy index or to us. Wiping removes only these, so a directory
/// configured by mistake (say, the data directory itself) loses nothing else.
fn is_index_file(name: &str) -> bool {
    if matches!(name, "meta.json" | ".managed.json" | VERSION_FILE) {
        return true;
    }
    // Segment files: `<32 hex digits>.<ext>` (and `<id>.<opstamp>.del`).
    name.split_once('.')
        .is_some_and(|(stem, _)| stem.len() == 32 && stem.bytes().all(|b| b.is_ascii_hexdigit()))
}

fn wipe(dir: &Path) -> std::io::Result<()> {
    for entry in std::fs::read_dir(dir)? {
        let entry = entry?;
        let is_ours = entry.file_name().to_str().is_some_and(is_index_file);
        if is_ours && entry.file_type()?.is_file() {
            std::fs::remove_file(entry.path())?;
        }
    }
    Ok(())
}

fn version_matches(dir: &Path) -> bool {
    std::fs::read_to_string(dir.join(VERSION_FILE)).is_ok_and(|v| v.trim() == SCHEMA_VERSION)
}

fn write_version(dir: &Path) -> std::io::Result<()> {
    let tmp = dir.join(format!("{VERSION_FILE}.tmp"));
    std::fs::write(&tmp, SCHEMA_VERSION)?;
    std::fs::rename(tmp, dir.join(VERSION_FILE))
}

fn new_writer(index: &Index) -> Result<IndexWriter, IndexError> {
    let threads = std::thread::available_parallelism().map_or(1, |n| n.get()).clamp(1, MAX_WRITER_THREADS);
    let options = IndexWriterOptions::builder()
        .num_worker_threads(threads)
        .memory_budget_per_thread(WRITER_HEAP_BYTES / threads)
        // Merges run in the background; one thread is plenty and leaves a core to the server.
        .num_merge_threads(1)
        .build();
    Ok(retry_if_locked(|| index.writer_with_options(options.clone()))?)
}

/// Tantivy's locks are `flock`s, which a child process forked at that moment (an agent's
/// command, an MCP server) holds until it execs: a lock taken and released just before (as
/// `open` does while wiping, or a writer just released) can still read as busy for a few
/// milliseconds. Try again for up to a second before calling the index busy.
fn retry_if_locked<T>(mut take: impl FnMut() -> tantivy::Result<T>) -> tantivy::Result<T> {
    let mut tries = 0;
    loop {
        match take() {
            Err(TantivyError::LockFailure(..)) if tries < 50 => {
                tries += 1;
                std::thread::sleep(std::time::Duration::from_millis(20));
            }
            result => return result,
        }
    }
}

fn hold_open_lock(directory: &IndexDirectory) -> tantivy::Result<Arc<DirectoryLock>> {
    let lock = Lock { filepath: PathBuf::from(OPEN_LOCK), is_blocking: false };
    retry_if_locked(|| directory.acquire_lock(&lock).map_err(|e| TantivyError::LockFailure(e, None)))
        .map(Arc::new)
}

impl SearchIndex {
    /// Opens the index in `dir`, creating the directory and the index if missing.
    ///
    /// The flag is `true` when the index was created now — `dir` held none, or one written
    /// under another schema version (which is wiped) — so the caller must reindex from the
    /// database. Fails if another process has the index open for writing.
    pub fn open(dir: &Path) -> Result<(SearchIndex, bool), IndexError> {
        std::fs::create_dir_all(dir)?;
        let (schema, fields) = schema::build_schema();
        let directory = IndexDirectory::open(dir)?;
        let open = hold_open_lock(&directory)?;
        if version_matches(dir)
            && Index::exists(&directory).map_err(TantivyError::from)?
            && let Some(index) = Self::open_existing(&directory, &schema, fields, &open)?
        {
            return Ok((index, false));
        }
        // Hold the writer lock while wiping, so that an index in use by another process makes
        // this fail instead of destroying its files.
        let lock =
            directory.acquire_lock(&INDEX_WRITER_LOCK).map_err(|e| TantivyError::LockFailure(e, None))?;
        match std::fs::remove_file(dir.join(VERSION_FILE)) {
            Err(e) if e.kind() != std::io::ErrorKind::NotFound => return Err(e.into()),
            _ => {}
        }
        wipe(dir)?;
        if Index::exists(&directory).map_err(TantivyError::from)? {
            return Err(TantivyError::IndexAlreadyExists.into());
        }
        let index = Index::builder().schema(schema).settings(schema::settings()).open_or_create(directory)?;
        drop(lock);
        let index = Self::from_index(index, fields, Some(open))?;
        // Written last: a crash before this point rebuilds again at the next start.
        write_version(dir)?;
        Ok((index, true))
    }

    /// `None` when the index on disk is of another schema or unreadable.
    fn open_existing(
        directory: &IndexDirectory,
        schema: &Schema,
        fields: Fields,
        open: &Arc<DirectoryLock>,
    ) -> Result<Option<SearchIndex>, IndexError> {
        let index = match Index::open(directory.clone()) {
            Ok(index)
                if index.schema() == *schema
                    && index.settings().sort_by_field == schema::settings().sort_by_field =>
            {
                index
            }
            Ok(_) => return Ok(None),
            Err(e) if unusable(&e) => return Ok(None),
            Err(e) => return Err(e.into()),
        };
        match Self::from_index(index, fields, Some(open.clone())) {
            Ok(index) => Ok(Some(index)),
            Err(IndexError::Tantivy(e)) if unusable(&e) => Ok(None),
            Err(e) => Err(e),
        }
    }

    /// A new, empty index in memory (for tests).
    pub fn open_in_ram() -> Result<SearchIndex, IndexError> {
        let (schema, fields) = schema::build_schema();
        let index = Index::builder().schema(schema).settings(schema::settings()).create_in_ram()?;
        Self::from_index(index, fields, None)
    }

    fn from_index(
        index: Index,
        fields: Fields,
        open: Option<Arc<DirectoryLock>>,
    ) -> Result<SearchIndex, IndexError> {
        // Tokenizers are not persisted with the index: register ours on every open.
        index.tokenizers().register(ANALYZER, schema::analyzer());
        // Manual: `apply` reloads after each commit, so searches see it as soon as it returns.
        let reader = index.reader_builder().reload_policy(ReloadPolicy::Manual).try_into()?;
        Ok(SearchIndex {
            inner: Arc::new(Inner {
                index,
                reader,
                fields,
                analyzer: schema::analyzer(),
                writer: Mutex::new(None),
                _open: open,
            }),
        })
    }

    /// Closes the writer, if one is open, once its merges are done; the next write opens a new
    /// one. The indexer calls it when the index has been quiet for a while, so that a server
    /// nobody is chatting on does not keep the writer's memory and threads. Blocking (it waits
    /// for merges): call it from `spawn_blocking` in async code. `true` if a writer was closed.
    pub fn release_writer(&self) -> Result<bool, IndexError> {
        // The slot stays locked until the writer is gone: a write meanwhile waits instead of
        // finding Tantivy's writer lock still held.
        let mut slot = self.writer_slot();
        match slot.take() {
            Some(writer) => {
                writer.wait_merging_threads()?;
                Ok(true)
            }
            None => Ok(false),
        }
    }

    fn writer_slot(&self) -> MutexGuard<'_, Option<IndexWriter>> {
        self.inner.writer.lock().unwrap_or_else(|poisoned| {
            // A panic while writing took the writer out of the slot (it was dropped).
            self.inner.writer.clear_poison();
            poisoned.into_inner()
        })
    }

    /// Whether a writer is open (for tests of [`SearchIndex::release_writer`]).
    #[cfg(test)]
    pub(crate) fn has_writer(&self) -> bool {
        self.writer_slot().is_some()
    }

    /// Runs `f` with the writer. If `f` fails, what it added since the last commit is rolled
    /// back so a retry starts clean; a writer that cannot roll back is dropped and replaced on
    /// the next call.
    fn with_writer<T>(
        &self,
        f: impl FnOnce(&mut IndexWriter) -> Result<T, IndexError>,
    ) -> Result<T, IndexError> {
        let mut slot = self.writer_slot();
        let mut writer = match slot.take() {
            Some(w) => w,
            None => new_writer(&self.inner.index)?,
        };
        match f(&mut writer) {
            Ok(v) => {
                *slot = Some(writer);
                Ok(v)
            }
            Err(e) => {
                if writer.rollback().is_ok() {
                    *slot = Some(writer);
                }
                Err(e)
            }
        }
    }

    /// Applies `ops` in order and commits them as one batch; returns once the commit is visible
    /// to searches. On error nothing of the batch is committed. Blocking (it writes and syncs
    /// files): call it from `spawn_blocking` in async code.
    pub fn apply(&self, ops: Vec<IndexOp>) -> Result<(), IndexError> {
        self.apply_ops(&ops)
    }

    /// [`SearchIndex::apply`] without taking the ops, so a failed batch can be retried.
    pub(super) fn apply_ops(&self, ops: &[IndexOp]) -> Result<(), IndexError> {
        if ops.is_empty() {
            return Ok(());
        }
        let f = &self.inner.fields;
        self.with_writer(|w| {
            for op in ops {
                match op {
                    IndexOp::Upsert(doc) => {
                        // Deletes only what was added before it, so the new version survives.
                        w.delete_term(id_term(f.message_id, doc.message_id));
                        w.add_document(schema::to_document(f, doc))?;
                    }
                    IndexOp::DeleteMessage(id) => {
                        w.delete_term(id_term(f.message_id, *id));
                    }
                    IndexOp::DeleteSession(id) => {
                        w.delete_term(id_term(f.session_id, *id));
                    }
                    IndexOp::DeleteUser(id) => {
                        w.delete_term(id_term(f.user_id, *id));
                    }
                }
            }
            w.commit()?;
            Ok(())
        })?;
        self.inner.reader.reload()?;
        Ok(())
    }

    /// Removes every document and commits (a reindex starts from here).
    pub fn clear(&self) -> Result<(), IndexError> {
        self.with_writer(|w| {
            w.delete_all_documents()?;
            w.commit()?;
            Ok(())
        })?;
        self.inner.reader.reload()?;
        Ok(())
    }

    /// Number of (live) documents visible to searches.
    pub fn num_docs(&self) -> u64 {
        self.inner.reader.searcher().num_docs()
    }

    /// One page of `user_id`'s messages matching `query`: best BM25 score first, newer first
    /// among equal scores. `limit` is capped at [`MAX_LIMIT`]; past [`MAX_OFFSET`] no hits are
    /// returned. `total` counts every match. Blocking, but short (about a millisecond at a
    /// million messages); `spawn_blocking` keeps it off the async workers.
    pub fn search(
        &self,
        user_id: Uuid,
        query: &SearchQuery,
        offset: usize,
        limit: usize,
    ) -> Result<SearchResults, IndexError> {
        self.search_shared(user_id, &[], query, offset, limit)
    }

    /// [`SearchIndex::search`] over `user_id`'s messages and those of the workspaces `shared`
    /// with them (which the caller checked).
    pub fn search_shared(
        &self,
        user_id: Uuid,
        shared: &[Uuid],
        query: &SearchQuery,
        offset: usize,
        limit: usize,
    ) -> Result<SearchResults, IndexError> {
        let f = &self.inner.fields;
        let mut analyzer = self.inner.analyzer.clone();
        let Some(built) = query::build(query, user_id, shared, f, &mut analyzer) else {
            return Ok(SearchResults { total: 0, hits: Vec::new() });
        };
        let searcher = self.inner.reader.searcher();
        let limit = limit.min(MAX_LIMIT);
        if limit == 0 || offset > MAX_OFFSET {
            let total = searcher.search(&built.query, &Count)?;
            return Ok(SearchResults { total, hits: Vec::new() });
        }
        let top = TopDocs::with_limit(limit)
            .and_offset(offset)
            .order_by((SortBySimilarityScore, SortByStaticFastValue::<i64>::for_field(CREATED_AT)));
        let (total, top) = searcher.search(&built.query, &(Count, top))?;
        let snippets = match &built.highlight {
            Some(h) => {
                let mut g = SnippetGenerator::create(&searcher, h, f.text)?;
                g.set_max_num_chars(SNIPPET_BYTES);
                Some(g)
            }
            None => None,
        };
        let hits = top
            .into_iter()
            .map(|((score, _), addr)| self.hit(&searcher, addr, score, snippets.as_ref()))
            .collect::<Result<_, _>>()?;
        Ok(SearchResults { total, hits })
    }

    fn hit(
        &self,
        searcher: &Searcher,
        addr: DocAddress,
        score: f32,
        snippets: Option<&SnippetGenerator>,
    ) -> Result<SearchHit, IndexError> {
        let f = &self.inner.fields;
        let doc: TantivyDocument = searcher.doc(addr)?;
        // Text may legitimately be empty (a tool call, an untitled session): never an error.
        let text = |field| doc.get_first(field).and_then(|v| v.as_str()).unwrap_or_default();
        let id = |field, what| {
            doc.get_first(field)
                .and_then(|v| v.as_bytes())
                .and_then(|b| Uuid::from_slice(b).ok())
                .ok_or(IndexError::Malformed(what))
        };
        let created_at = doc
            .get_first(f.created_at)
            .and_then(|v| v.as_i64())
            .and_then(DateTime::from_timestamp_micros)
            .ok_or(IndexError::Malformed("created_at"))?;
        Ok(SearchHit {
            message_id: id(f.message_id, "message_id")?,
            session_id: id(f.session_id, "session_id")?,
            workspace_id: id(f.workspace_id, "workspace_id")?,
            role: text(f.role).to_string(),
            created_at,
            session_title: text(f.title).to_string(),
            snippet: snippet(snippets, text(f.text_stored)),
            score,
        })
    }
}

/// The best-matching piece of `text`, or its beginning when no matched word is in the stored
/// text (a match in the title only, or past the stored cap).
fn snippet(generator: Option<&SnippetGenerator>, text: &str) -> Snippet {
    if let Some(g) = generator {
        let s = g.snippet(text);
        if !s.highlighted().is_empty() {
            return piece(text, s.fragment_range(), s.highlighted());
        }
    }
    piece(text, 0..schema::truncate(text, SNIPPET_BYTES).len(), &[])
}

/// `text[range]` with an ellipsis where it was cut from a longer text, and the `marks`
/// (relative to the range) moved to the piece's own offsets.
fn piece(text: &str, range: Range<usize>, marks: &[Range<usize>]) -> Snippet {
    let Some(inner) = text.get(range.clone()) else {
        return Snippet::default();
    };
    let lead = if range.start > 0 { "…" } else { "" };
    let mut out = Snippet { text: format!("{lead}{inner}"), marks: Vec::new() };
    let mut at = 0;
    for m in marks {
        // Ranges come from the tokenizer and are ordered; anything odd is left unmarked.
        if m.start < at || inner.get(m.clone()).is_none() {
            continue;
        }
        out.marks.push(lead.len() + m.start..lead.len() + m.end);
        at = m.end;
    }
    if range.end < text.len() {
        out.text.push('…');
    }
    out
}

#[cfg(test)]
impl SearchIndex {
    /// Adds documents through the writer without committing, as if the process died before
    /// the commit.
    pub(super) fn add_uncommitted(&self, docs: &[super::IndexDoc]) {
        let f = self.inner.fields;
        self.with_writer(|w| {
            for d in docs {
                w.add_document(schema::to_document(&f, d))?;
            }
            Ok(())
        })
        .unwrap();
    }
}

#[cfg(test)]
mod tests;
