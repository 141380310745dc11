//! A search hit's snippet: a piece of the message's text and where the matched words are in it.

use std::ops::Range;

use serde::Serialize;

/// A piece of a message's text with the byte ranges of the matched words in it. The text is
/// plain (an ellipsis marks where it was cut); the web layer escapes it and marks the ranges.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
pub struct Snippet {
    /// The piece, with `…` where it was cut from a longer text.
    pub text: String,
    /// Byte ranges of `text` to highlight, in order and not overlapping.
    pub marks: Vec<Range<usize>>,
}

/// A message as the search feeder reads it: the stored names of its role and status are kept
/// as they are, so one row the feeder cannot make sense of is skipped, not an error.
#[derive(Debug, Clone, PartialEq)]
pub struct ChangedMessage {
    /// Stable id.
    pub id: uuid::Uuid,
    /// Its session.
    pub session_id: uuid::Uuid,
    /// Stored role name.
    pub role: String,
    /// Stored status name.
    pub status: String,
    /// Its parts, as stored.
    pub parts: serde_json::Value,
    /// Creation time.
    pub created_at: chrono::DateTime<chrono::Utc>,
    /// Last change (the feeder's cursor).
    pub updated_at: chrono::DateTime<chrono::Utc>,
}
