//! The index's fields, its settings, its text analyzer, and the mapping from [`IndexDoc`] to a
//! Tantivy document.

use tantivy::schema::{
    FAST, Field, INDEXED, IndexRecordOption, STORED, STRING, Schema, TextFieldIndexing, TextOptions,
};
use tantivy::tokenizer::{AsciiFoldingFilter, LowerCaser, RemoveLongFilter, SimpleTokenizer, TextAnalyzer};
use tantivy::{IndexSettings, IndexSortByField, Order};
use tantivy::{TantivyDocument, Term};

use super::IndexDoc;

/// Bumped whenever the schema or the analyzer changes in a way that needs a rebuild; an index
/// written under another version is wiped and rebuilt from the database.
pub(super) const SCHEMA_VERSION: &str = "arbor-search-2";

/// The name the text analyzer is registered under (it is not persisted by Tantivy, so it is
/// registered again every time the index is opened).
pub(super) const ANALYZER: &str = "arbor_text";

/// Tokens longer than this (base64, hashes, minified code) are dropped: they bloat the term
/// dictionary and nobody types them.
const MAX_TOKEN_BYTES: usize = 40;

/// Stored text per message, for snippets. Long tool outputs would otherwise dominate the size
/// of the index; what is past the cap is still searchable, only not shown.
pub(super) const MAX_STORED_TEXT: usize = 100 * 1024;

/// Indexed text per message: a bound on the work and memory one pathological message costs.
pub(super) const MAX_INDEXED_TEXT: usize = 1024 * 1024;

/// Title text cap (indexed and stored).
const MAX_TITLE: usize = 1024;

/// The field handles, resolved once.
#[derive(Debug, Clone, Copy)]
pub(super) struct Fields {
    pub message_id: Field,
    pub user_id: Field,
    /// The owner as a number the index is sorted by (see [`settings`]).
    pub owner_order: Field,
    pub workspace_id: Field,
    pub session_id: Field,
    pub role: Field,
    pub created_at: Field,
    pub has_attachment: Field,
    /// The message text and the session title, indexed with positions, not stored. One field
    /// rather than two: every word is then one term and every phrase one phrase query, which
    /// lets the intersection with the owner's documents drive the search (a union of two
    /// fields' postings is walked for all users' documents).
    pub text: Field,
    /// The text, stored only (capped), for snippets.
    pub text_stored: Field,
    /// The session title, stored only (it is indexed within `text`).
    pub title: Field,
}

/// Name of the fast field that holds `created_at` in microseconds since the epoch.
pub(super) const CREATED_AT: &str = "created_at";

/// Name of the fast field the index is sorted by.
pub(super) const OWNER_ORDER: &str = "owner_order";

/// The document store compresses this much at a time. Showing a hit decompresses its block:
/// at tantivy's 16 KiB that was a fifth of a search's time; a quarter of it costs 7 % more
/// disk.
const DOCSTORE_BLOCK_BYTES: usize = 4096;

/// Every segment keeps its documents sorted by owner, so one person's messages lie together.
///
/// Every search is for one owner: in an unsorted index a common word's postings hold one of
/// their documents in every block or so, and the search decodes nearly all of them (and their
/// positions, for a phrase); sorted, it decodes the few blocks where that owner's documents
/// are, and the page of hits is read back from a few neighbouring blocks of the document store.
pub(super) fn settings() -> IndexSettings {
    IndexSettings {
        sort_by_field: Some(IndexSortByField { field: OWNER_ORDER.to_string(), order: Order::Asc }),
        docstore_blocksize: DOCSTORE_BLOCK_BYTES,
        ..IndexSettings::default()
    }
}

/// The sort key of an owner: the id's last eight bytes, its random part (the first ones of a
/// version 7 id are a timestamp, shared by users created in the same millisecond). Two owners
/// with one key only interleave; the owner's term still decides what matches.
pub(super) fn owner_order(user_id: uuid::Uuid) -> u64 {
    let bytes = user_id.as_bytes();
    let mut low = [0u8; 8];
    low.copy_from_slice(&bytes[8..]);
    u64::from_be_bytes(low)
}

/// Builds the schema and returns it with its field handles.
pub(super) fn build_schema() -> (Schema, Fields) {
    let mut b = Schema::builder();
    let analyzed = TextOptions::default().set_indexing_options(
        TextFieldIndexing::default()
            .set_tokenizer(ANALYZER)
            .set_index_option(IndexRecordOption::WithFreqsAndPositions),
    );
    let fields = Fields {
        // Ids as 16 raw bytes: less than half the term dictionary work of their text form.
        message_id: b.add_bytes_field("message_id", INDEXED | STORED),
        user_id: b.add_bytes_field("user_id", INDEXED),
        owner_order: b.add_u64_field(OWNER_ORDER, FAST),
        workspace_id: b.add_bytes_field("workspace_id", INDEXED | STORED),
        session_id: b.add_bytes_field("session_id", INDEXED | STORED),
        role: b.add_text_field("role", STRING | STORED),
        created_at: b.add_i64_field(CREATED_AT, FAST | STORED),
        has_attachment: b.add_bool_field("has_attachment", INDEXED),
        text: b.add_text_field("text", analyzed),
        text_stored: b.add_text_field("text_stored", STORED),
        title: b.add_text_field("title", STORED),
    };
    (b.build(), fields)
}

/// Splits on anything that is not alphanumeric, lowercases and folds accents (é → e) so that
/// people find words whichever way they type them.
pub(super) fn analyzer() -> TextAnalyzer {
    TextAnalyzer::builder(SimpleTokenizer::default())
        .filter(RemoveLongFilter::limit(MAX_TOKEN_BYTES))
        .filter(LowerCaser)
        .filter(AsciiFoldingFilter)
        .build()
}

/// The longest prefix of `s` that is at most `max` bytes and ends on a character boundary.
pub(super) fn truncate(s: &str, max: usize) -> &str {
    if s.len() <= max {
        return s;
    }
    let mut end = max;
    while !s.is_char_boundary(end) {
        end -= 1;
    }
    &s[..end]
}

/// The term for an id in one of the id fields, the same at write and at query time.
pub(super) fn id_term(field: Field, id: uuid::Uuid) -> Term {
    Term::from_field_bytes(field, id.as_bytes())
}

/// The Tantivy document for one message.
pub(super) fn to_document(f: &Fields, d: &IndexDoc) -> TantivyDocument {
    let mut doc = TantivyDocument::new();
    doc.add_bytes(f.message_id, d.message_id.as_bytes());
    doc.add_bytes(f.user_id, d.user_id.as_bytes());
    doc.add_u64(f.owner_order, owner_order(d.user_id));
    doc.add_bytes(f.workspace_id, d.workspace_id.as_bytes());
    doc.add_bytes(f.session_id, d.session_id.as_bytes());
    doc.add_text(f.role, &d.role);
    doc.add_i64(f.created_at, d.created_at.timestamp_micros());
    doc.add_bool(f.has_attachment, d.has_attachment);
    let title = truncate(&d.session_title, MAX_TITLE);
    // Two values: Tantivy leaves a position gap between them, so no phrase spans both.
    doc.add_text(f.text, truncate(&d.text, MAX_INDEXED_TEXT));
    doc.add_text(f.text, title);
    doc.add_text(f.text_stored, truncate(&d.text, MAX_STORED_TEXT));
    doc.add_text(f.title, title);
    doc
}

#[cfg(test)]
mod tests {
    use super::*;

    fn tokens(text: &str) -> Vec<String> {
        let mut a = analyzer();
        let mut out = Vec::new();
        let mut stream = a.token_stream(text);
        while let Some(t) = stream.next() {
            out.push(t.text.clone());
        }
        out
    }

    #[test]
    fn analyzer_lowercases_folds_and_splits() {
        assert_eq!(tokens("Café RÉSUMÉ naïve"), ["cafe", "resume", "naive"]);
        assert_eq!(tokens("user_id:abc +owner:*"), ["user", "id", "abc", "owner"]);
        assert_eq!(tokens(&"x".repeat(41)), Vec::<String>::new());
    }

    #[test]
    fn truncate_respects_char_boundaries() {
        assert_eq!(truncate("héllo", 2), "h");
        assert_eq!(truncate("héllo", 3), "hé");
        assert_eq!(truncate("abc", 10), "abc");
    }
}
