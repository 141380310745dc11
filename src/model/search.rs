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
