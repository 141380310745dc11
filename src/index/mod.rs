//! Full-text search over messages (DESIGN.md §8): a Tantivy index in the data directory.
//!
//! - [`SearchIndex`] owns the index, its one `IndexWriter` and a reader; every search is scoped
//!   to one user by a required term that the server builds, never by the user's text.
//! - [`SearchQuery`] parses what a person typed into words, phrases, exclusions and filters;
//!   the text never reaches Tantivy's query parser, so field syntax in it is only text.
//! - [`Indexer`] is the task that feeds the writer: it batches changes and commits about once
//!   per interval, reporting the last committed sequence number so the caller can keep a
//!   watermark for crash healing.
//! - [`IndexId`] names the index in a directory (several instances, each with its own index,
//!   keep their watermarks apart in one database).
//!
//! No function here logs message text.

mod identity;
mod indexer;
mod phrase;
mod query;
mod schema;
mod search_index;

pub use identity::{ID_FILE, IndexId};
pub use indexer::Indexer;
pub use query::SearchQuery;
pub use search_index::{MAX_LIMIT, MAX_OFFSET, SearchHit, SearchIndex, SearchResults};

use chrono::{DateTime, Utc};
use uuid::Uuid;

/// Upserts per [`SearchIndex::apply`] call when rebuilding the index: each call is a commit, and
/// bigger batches make fewer, larger segments (about 60,000 messages/s on 2 cores, against
/// 50,000 with batches of 10,000; see `benches/search.rs`).
pub const REINDEX_BATCH: usize = 50_000;

/// One searchable message.
#[derive(Debug, Clone, PartialEq)]
pub struct IndexDoc {
    /// The message; an upsert replaces any earlier document with this id.
    pub message_id: Uuid,
    /// The owner: searches only ever see their own user's documents.
    pub user_id: Uuid,
    /// The workspace the session belongs to (a filter).
    pub workspace_id: Uuid,
    /// The session the message belongs to.
    pub session_id: Uuid,
    /// `user`, `assistant` or `tool`.
    pub role: String,
    /// When the message was written (date filters, ties in ranking).
    pub created_at: DateTime<Utc>,
    /// Whether the message carries an attachment (`has:attachment`).
    pub has_attachment: bool,
    /// The searchable text.
    pub text: String,
    /// The session's title, searchable too and shown with the hit.
    pub session_title: String,
}

/// A change for the indexer.
#[derive(Debug, Clone)]
pub enum IndexOp {
    /// Adds the message, replacing an earlier version of it.
    Upsert(IndexDoc),
    /// Removes one message.
    DeleteMessage(Uuid),
    /// Removes every message of a session.
    DeleteSession(Uuid),
    /// Removes every message of a user.
    DeleteUser(Uuid),
}

/// Why the search index could not be opened, written or read.
#[derive(Debug, thiserror::Error)]
pub enum IndexError {
    /// Tantivy failed (I/O, a dead writer thread, a lock held by another process…).
    #[error("search index: {0}")]
    Tantivy(#[from] tantivy::TantivyError),
    /// The index directory could not be opened by Tantivy.
    #[error("search index directory: {0}")]
    Directory(#[from] tantivy::directory::error::OpenDirectoryError),
    /// The index directory could not be created, read or cleaned.
    #[error("search index directory: {0}")]
    Io(#[from] std::io::Error),
    /// A stored document lacks a field or holds a malformed value.
    #[error("search index holds a malformed document ({0})")]
    Malformed(&'static str),
}
