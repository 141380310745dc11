//! An incremental Server-Sent Events parser, following the WHATWG HTML "event stream
//! interpretation" rules (<https://html.spec.whatwg.org/multipage/server-sent-events.html#event-stream-interpretation>).
//!
//! Bytes go in as they arrive from the network, split anywhere (inside a UTF-8 character, between
//! the CR and the LF of a CRLF, inside the leading byte order mark); complete events come out.
//!
//! What the spec asks, and what this parser does:
//! - The stream is UTF-8; invalid sequences become U+FFFD (the spec's "UTF-8 decode").
//! - One leading byte order mark (EF BB BF) is skipped; a later one is ordinary text.
//! - Lines end with CRLF, LF or CR.
//! - An empty line dispatches the event being built. A line starting with `:` is a comment
//!   and is ignored (e.g. DeepSeek's and OpenRouter's keep-alives).
//! - `name:value` splits at the first colon; one space after the colon is removed, not more.
//!   A line without a colon is a field name with an empty value (`data` alone appends an empty line).
//! - `data` lines are joined with `\n`. An event with no `data` line at all is not dispatched
//!   (its `event` name is forgotten); a `data:` line with an empty value does dispatch, with `data == ""`.
//! - `event` sets the event name; `"message"` when absent or empty.
//! - `id` sets the last event ID, which, as the spec says, stays for the following events until
//!   another `id` changes it; an `id` value containing U+0000 is ignored.
//! - `retry` and unknown fields are ignored (nothing here reconnects).
//! - At end of stream an incomplete event (no final empty line) is discarded: see [`SseParser::finish`].
//!
//! Memory is bounded, which the spec does not ask: a line longer than [`MAX_LINE_BYTES`] is
//! truncated to that length, and an event's data to [`MAX_EVENT_DATA_BYTES`]; see [`SseParser::truncations`].

/// The longest line kept (8 MiB); the bytes of a line past this are dropped until its end.
pub const MAX_LINE_BYTES: usize = 8 * 1024 * 1024;

/// The most data one event keeps (16 MiB, room for one maximal line); further data is dropped.
pub const MAX_EVENT_DATA_BYTES: usize = 16 * 1024 * 1024;

/// A line buffer up to this size is kept for the next line; a larger one is let go.
const KEPT_LINE_CAPACITY: usize = 4 * 1024;

/// The UTF-8 byte order mark, skipped once at the start of the stream.
const BOM: [u8; 3] = [0xEF, 0xBB, 0xBF];

/// One dispatched event.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SseEvent {
    /// The event name (`event:` field); `"message"` when the stream gave none.
    pub event: String,
    /// The `data:` lines joined with `\n` (no trailing newline).
    pub data: String,
    /// The last event ID when the event was dispatched (`None` until the stream sends an `id:`).
    pub id: Option<String>,
}

/// Incremental SSE parser: feed it bytes with [`push`](Self::push), end with [`finish`](Self::finish).
#[derive(Debug, Default)]
pub struct SseParser {
    /// Whether the start of the stream was checked for a byte order mark.
    bom_checked: bool,
    /// Bytes at the very start that so far match a prefix of the byte order mark.
    bom_prefix: Vec<u8>,
    /// The current, unterminated line.
    line: Vec<u8>,
    /// Whether the current line went past [`MAX_LINE_BYTES`] and lost bytes.
    line_truncated: bool,
    /// The previous chunk ended with CR: an LF starting the next one belongs to it.
    after_cr: bool,
    /// The data buffer, each `data` value followed by `\n`, as the spec builds it.
    data: String,
    /// Whether the data buffer went past [`MAX_EVENT_DATA_BYTES`] and lost data.
    data_truncated: bool,
    /// The event type buffer.
    event_type: String,
    /// The last event ID buffer (kept across events).
    last_event_id: Option<String>,
    /// How many lines and events were truncated so far.
    truncations: u64,
}

impl SseParser {
    /// A parser at the start of a stream.
    pub fn new() -> Self {
        Self::default()
    }

    /// Feeds the next bytes of the stream and returns the events they complete, in order.
    pub fn push(&mut self, chunk: &[u8]) -> Vec<SseEvent> {
        let mut out = Vec::new();
        let mut rest = chunk;
        if !self.bom_checked {
            while let Some((&byte, tail)) = rest.split_first() {
                if BOM.get(self.bom_prefix.len()) == Some(&byte) {
                    self.bom_prefix.push(byte);
                    rest = tail;
                    if self.bom_prefix.len() == BOM.len() {
                        self.bom_prefix.clear();
                        self.bom_checked = true;
                        break;
                    }
                } else {
                    // Not a byte order mark: the bytes held back are ordinary input.
                    self.bom_checked = true;
                    let held = std::mem::take(&mut self.bom_prefix);
                    self.feed(&held, &mut out);
                    break;
                }
            }
            if !self.bom_checked {
                return out;
            }
        }
        self.feed(rest, &mut out);
        out
    }

    /// Ends the stream. Always returns no event: per the spec, "once the end of the file is
    /// reached, any pending data must be discarded", so an event without its final empty line
    /// (and any unterminated line) is dropped. The parser is then ready for a new stream.
    pub fn finish(&mut self) -> Vec<SseEvent> {
        let truncations = self.truncations;
        *self = Self::new();
        self.truncations = truncations;
        Vec::new()
    }

    /// How many lines (longer than [`MAX_LINE_BYTES`]) and events (more data than
    /// [`MAX_EVENT_DATA_BYTES`]) were truncated since the parser was made; 0 for any sane stream.
    pub fn truncations(&self) -> u64 {
        self.truncations
    }

    /// Splits `bytes` into lines, processing each complete one.
    fn feed(&mut self, mut bytes: &[u8], out: &mut Vec<SseEvent>) {
        if self.after_cr {
            let Some((&first, tail)) = bytes.split_first() else {
                return;
            };
            self.after_cr = false;
            if first == b'\n' {
                bytes = tail;
            }
        }
        while let Some(pos) = memchr::memchr2(b'\n', b'\r', bytes) {
            let (head, tail) = bytes.split_at(pos);
            self.append_to_line(head);
            self.end_line(out);
            match tail {
                [b'\r', b'\n', after @ ..] => bytes = after,
                [b'\r'] => {
                    self.after_cr = true;
                    bytes = &[];
                }
                [_, after @ ..] => bytes = after,
                [] => bytes = &[],
            }
        }
        self.append_to_line(bytes);
    }

    /// Adds bytes to the current line, dropping what goes past [`MAX_LINE_BYTES`].
    fn append_to_line(&mut self, bytes: &[u8]) {
        if self.line_truncated {
            return;
        }
        let room = MAX_LINE_BYTES.saturating_sub(self.line.len());
        if bytes.len() > room {
            self.line.extend_from_slice(bytes.get(..room).unwrap_or_default());
            self.line_truncated = true;
        } else {
            self.line.extend_from_slice(bytes);
        }
    }

    /// Processes the current line, now complete. The line's buffer is kept for the next one
    /// unless a long line grew it.
    fn end_line(&mut self, out: &mut Vec<SseEvent>) {
        let mut line = std::mem::take(&mut self.line);
        self.take_line(&line, out);
        if line.capacity() <= KEPT_LINE_CAPACITY {
            line.clear();
            self.line = line;
        }
    }

    /// Processes one complete line.
    fn take_line(&mut self, line: &[u8], out: &mut Vec<SseEvent>) {
        if std::mem::take(&mut self.line_truncated) {
            self.truncations += 1;
        }
        if line.is_empty() {
            if let Some(event) = self.dispatch() {
                out.push(event);
            }
            return;
        }
        if line.first() == Some(&b':') {
            return;
        }
        // The common case, valid UTF-8, is checked by the faster validator first.
        let text = match std::str::from_utf8(line) {
            Ok(text) => std::borrow::Cow::Borrowed(text),
            Err(_) => String::from_utf8_lossy(line),
        };
        let (field, value) = match text.split_once(':') {
            Some((field, value)) => (field, value.strip_prefix(' ').unwrap_or(value)),
            None => (text.as_ref(), ""),
        };
        match field {
            "event" => value.clone_into(&mut self.event_type),
            "data" => self.append_data(value),
            "id" if !value.contains('\0') => self.last_event_id = Some(value.to_owned()),
            // `retry` (reconnection time) and unknown fields are ignored.
            _ => {}
        }
    }

    /// Appends one `data` value and its `\n` to the data buffer, within [`MAX_EVENT_DATA_BYTES`].
    fn append_data(&mut self, value: &str) {
        if self.data_truncated {
            return;
        }
        let room = MAX_EVENT_DATA_BYTES.saturating_sub(self.data.len());
        if value.len() < room {
            self.data.reserve(value.len() + 1);
            self.data.push_str(value);
            self.data.push('\n');
            return;
        }
        let mut end = room.min(value.len());
        while !value.is_char_boundary(end) {
            end -= 1;
        }
        self.data.push_str(value.get(..end).unwrap_or_default());
        self.data_truncated = true;
    }

    /// Dispatches the event being built (the spec's "dispatch the event" steps).
    fn dispatch(&mut self) -> Option<SseEvent> {
        let truncated = std::mem::take(&mut self.data_truncated);
        if truncated {
            self.truncations += 1;
        }
        if self.data.is_empty() {
            self.event_type.clear();
            return None;
        }
        let mut data = std::mem::take(&mut self.data);
        if !truncated && data.ends_with('\n') {
            data.pop();
        }
        let event = match std::mem::take(&mut self.event_type) {
            name if name.is_empty() => "message".to_owned(),
            name => name,
        };
        Some(SseEvent { event, data, id: self.last_event_id.clone() })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ev(data: &str) -> SseEvent {
        SseEvent { event: "message".into(), data: data.into(), id: None }
    }

    /// Everything, pushed in one piece, then finish.
    fn parse(input: &[u8]) -> Vec<SseEvent> {
        let mut parser = SseParser::new();
        let mut out = parser.push(input);
        out.extend(parser.finish());
        out
    }

    /// Pushed in pieces of `size` bytes.
    fn parse_in_pieces(input: &[u8], size: usize) -> Vec<SseEvent> {
        let mut parser = SseParser::new();
        let mut out = Vec::new();
        for piece in input.chunks(size) {
            out.extend(parser.push(piece));
        }
        out.extend(parser.finish());
        out
    }

    /// Checks that every split in two, and byte-at-a-time feeding, give the same events.
    fn assert_split_invariant(input: &[u8]) -> Vec<SseEvent> {
        let whole = parse(input);
        for cut in 0..=input.len() {
            let mut parser = SseParser::new();
            let (a, b) = input.split_at(cut);
            let mut out = parser.push(a);
            out.extend(parser.push(b));
            out.extend(parser.finish());
            assert_eq!(out, whole, "split at byte {cut}");
        }
        for size in 1..=4 {
            assert_eq!(parse_in_pieces(input, size), whole, "pieces of {size}");
        }
        whole
    }

    #[test]
    fn lf_crlf_and_cr_line_ends() {
        assert_eq!(parse(b"data: a\n\n"), vec![ev("a")]);
        assert_eq!(parse(b"data: a\r\n\r\n"), vec![ev("a")]);
        assert_eq!(parse(b"data: a\r\r"), vec![ev("a")]);
        assert_eq!(parse(b"data: a\r\ndata: b\rdata: c\n\r\n"), vec![ev("a\nb\nc")]);
        assert_eq!(parse(b"data: a\n\ndata: b\r\rdata: c\r\n\r\n"), vec![ev("a"), ev("b"), ev("c")]);
    }

    #[test]
    fn cr_and_lf_split_across_chunks_are_one_line_end() {
        let mut parser = SseParser::new();
        assert!(parser.push(b"data: a\r").is_empty());
        // If the LF counted as a second line end, "a" would be dispatched alone here.
        assert!(parser.push(b"\ndata: b\r").is_empty());
        assert!(parser.push(b"").is_empty());
        assert_eq!(parser.push(b"\n\r"), vec![ev("a\nb")]);
        assert_eq!(parser.push(b"\n"), vec![]);
        assert!(parser.finish().is_empty());
    }

    #[test]
    fn cr_cr_is_two_line_ends_even_split() {
        let mut parser = SseParser::new();
        assert!(parser.push(b"data: a\r").is_empty());
        assert_eq!(parser.push(b"\r"), vec![ev("a")]);
    }

    #[test]
    fn every_split_point_gives_the_same_events() {
        let input = "\u{feff}: comment\r\nevent: greet\r\ndata: h\u{e9}llo \u{1F600}\r\nid: 7\r\n\r\n\
                     data:x\rdata\r\r: keep-alive\n\ndata:  two\n\n"
            .as_bytes();
        let events = assert_split_invariant(input);
        assert_eq!(
            events,
            vec![
                SseEvent { event: "greet".into(), data: "h\u{e9}llo \u{1F600}".into(), id: Some("7".into()) },
                SseEvent { event: "message".into(), data: "x\n".into(), id: Some("7".into()) },
                SseEvent { event: "message".into(), data: " two".into(), id: Some("7".into()) },
            ]
        );
    }

    #[test]
    fn utf8_split_inside_characters() {
        let input = "data: \u{e9}\u{4e2d}\u{1F980}\n\n".as_bytes();
        let events = assert_split_invariant(input);
        assert_eq!(events, vec![ev("\u{e9}\u{4e2d}\u{1F980}")]);
    }

    #[test]
    fn invalid_utf8_becomes_replacement_character() {
        assert_eq!(parse(b"data: a\xffb\n\n"), vec![ev("a\u{fffd}b")]);
        // A truncated sequence right before the line end.
        assert_eq!(parse(b"data: a\xe2\x82\n\n"), vec![ev("a\u{fffd}")]);
    }

    #[test]
    fn leading_bom_is_skipped_once() {
        assert_eq!(parse(b"\xEF\xBB\xBFdata: a\n\n"), vec![ev("a")]);
        assert_split_invariant(b"\xEF\xBB\xBFdata: a\n\n");
        // A second BOM is part of the field name, so the field is unknown and ignored.
        assert_eq!(parse(b"\xEF\xBB\xBF\xEF\xBB\xBFdata: a\n\n"), vec![]);
        // A BOM later in the stream is ordinary text.
        assert_eq!(parse(b"data: a\n\n\xEF\xBB\xBFdata: b\n\ndata: c\n\n"), vec![ev("a"), ev("c")]);
    }

    #[test]
    fn partial_bom_bytes_are_not_lost() {
        let mut parser = SseParser::new();
        assert!(parser.push(b"\xEF").is_empty());
        // EF BB 'd' is no BOM: the held bytes start the line, which is then no `data` field.
        assert!(parser.push(b"\xBBdata: 1\n\n").is_empty());
        assert_eq!(parser.push(b"data: 2\n\n"), vec![ev("2")]);

        let mut parser = SseParser::new();
        assert!(parser.push(b"\xEF\xBB").is_empty());
        assert!(parser.push(b"\n").is_empty());
        assert_eq!(parser.push(b"data: 3\n\n"), vec![ev("3")]);
    }

    #[test]
    fn no_bom_stream_starting_with_newline() {
        assert_eq!(parse(b"\ndata: a\n\n"), vec![ev("a")]);
    }

    #[test]
    fn comments_are_ignored() {
        assert_eq!(parse(b": keep-alive\n\n"), vec![]);
        assert_eq!(parse(b":\ndata: a\n: x\ndata: b\n\n"), vec![ev("a\nb")]);
        assert_eq!(parse(b": OPENROUTER PROCESSING\n\ndata: a\n\n"), vec![ev("a")]);
    }

    #[test]
    fn only_one_space_after_the_colon_is_removed() {
        assert_eq!(parse(b"data:a\n\n"), vec![ev("a")]);
        assert_eq!(parse(b"data: a\n\n"), vec![ev("a")]);
        assert_eq!(parse(b"data:  a \n\n"), vec![ev(" a ")]);
        assert_eq!(parse(b"data:\ta\n\n"), vec![ev("\ta")]);
        // Only the first colon splits.
        assert_eq!(parse(b"data: {\"a\":1}\n\n"), vec![ev("{\"a\":1}")]);
    }

    #[test]
    fn data_lines_are_joined_with_newlines() {
        assert_eq!(parse(b"data: a\ndata: b\ndata: c\n\n"), vec![ev("a\nb\nc")]);
        assert_eq!(parse(b"data: a\ndata:\ndata: c\n\n"), vec![ev("a\n\nc")]);
        assert_eq!(parse(b"data: a\n\n\n\ndata: b\n\n"), vec![ev("a"), ev("b")]);
    }

    #[test]
    fn event_without_data_is_not_dispatched() {
        assert_eq!(parse(b"event: ping\n\n"), vec![]);
        assert_eq!(parse(b"id: 1\n\n"), vec![]);
        // The event name of an undispatched event is forgotten.
        assert_eq!(
            parse(b"event: ping\n\ndata: a\n\n"),
            vec![SseEvent { event: "message".into(), data: "a".into(), id: None }]
        );
    }

    #[test]
    fn empty_data_value_is_dispatched_as_empty_string() {
        assert_eq!(parse(b"data:\n\n"), vec![ev("")]);
        assert_eq!(parse(b"data\n\n"), vec![ev("")]);
        assert_eq!(parse(b"data\ndata\n\n"), vec![ev("\n")]);
    }

    #[test]
    fn field_names_without_colon() {
        assert_eq!(parse(b"data\n\n"), vec![ev("")]);
        // `event` alone sets an empty name, which means "message".
        assert_eq!(parse(b"event: x\nevent\ndata: a\n\n"), vec![ev("a")]);
        // `id` alone sets the last event ID to the empty string.
        assert_eq!(
            parse(b"id: 5\ndata: a\n\nid\ndata: b\n\n"),
            vec![
                SseEvent { event: "message".into(), data: "a".into(), id: Some("5".into()) },
                SseEvent { event: "message".into(), data: "b".into(), id: Some(String::new()) },
            ]
        );
    }

    #[test]
    fn event_names() {
        assert_eq!(
            parse(b"event: error\ndata: {}\n\ndata: x\n\n"),
            vec![SseEvent { event: "error".into(), data: "{}".into(), id: None }, ev("x")]
        );
        assert_eq!(parse(b"event:\ndata: x\n\n"), vec![ev("x")]);
    }

    #[test]
    fn last_event_id_persists_and_nul_ids_are_ignored() {
        let events = parse(b"id: 1\ndata: a\n\ndata: b\n\nid: 2\0x\ndata: c\n\nid: 3\ndata: d\n\n");
        let ids: Vec<_> = events.iter().map(|e| e.id.as_deref()).collect();
        assert_eq!(ids, vec![Some("1"), Some("1"), Some("1"), Some("3")]);
        // An id set by an undispatched event still counts, as in the spec.
        assert_eq!(
            parse(b"id: 9\n\ndata: a\n\n"),
            vec![SseEvent { event: "message".into(), data: "a".into(), id: Some("9".into()) }]
        );
    }

    #[test]
    fn retry_and_unknown_fields_are_ignored() {
        assert_eq!(parse(b"retry: 1000\ndata: a\nfoo: bar\nDATA: no\nData: no\n\n"), vec![ev("a")]);
        assert_eq!(parse(b"retry: 1000\n\n"), vec![]);
        assert_eq!(parse(b" data: leading space makes another field\n\n"), vec![]);
    }

    #[test]
    fn incomplete_event_at_end_of_stream_is_discarded() {
        assert_eq!(parse(b"data: a\n\ndata: b\n"), vec![ev("a")]);
        assert_eq!(parse(b"data: a\n\ndata: b"), vec![ev("a")]);
        assert_eq!(parse(b"data: a\n\ndata: b\r"), vec![ev("a")]);
    }

    #[test]
    fn finish_resets_for_a_new_stream() {
        let mut parser = SseParser::new();
        assert!(parser.push(b"id: 4\ndata: half").is_empty());
        assert!(parser.finish().is_empty());
        assert_eq!(parser.push(b"\xEF\xBB\xBFdata: new\n\n"), vec![ev("new")]);
    }

    #[test]
    fn empty_pushes_are_harmless() {
        let mut parser = SseParser::new();
        assert!(parser.push(b"").is_empty());
        assert!(parser.push(b"data: a").is_empty());
        assert!(parser.push(b"").is_empty());
        assert_eq!(parser.push(b"\n\n"), vec![ev("a")]);
    }

    #[test]
    fn overlong_line_is_truncated_and_counted() {
        let mut parser = SseParser::new();
        let mut out = parser.push(b"data: ");
        let piece = vec![b'x'; 1024 * 1024];
        for _ in 0..9 {
            out.extend(parser.push(&piece));
        }
        assert!(out.is_empty());
        out.extend(parser.push(b"tail\n\ndata: next\n\n"));
        assert_eq!(parser.truncations(), 1);
        assert_eq!(out.len(), 2);
        let first = out.first().map(|e| e.data.len());
        assert_eq!(first, Some(MAX_LINE_BYTES - b"data: ".len()));
        assert_eq!(out.get(1), Some(&ev("next")));
    }

    #[test]
    fn line_of_exactly_the_limit_is_kept_whole() {
        let mut input = b"data: ".to_vec();
        input.resize(MAX_LINE_BYTES, b'y');
        input.extend_from_slice(b"\n\n");
        let mut parser = SseParser::new();
        let out = parser.push(&input);
        assert_eq!(parser.truncations(), 0);
        assert_eq!(out.first().map(|e| e.data.len()), Some(MAX_LINE_BYTES - 6));
    }

    #[test]
    fn event_data_is_bounded_across_lines() {
        let mut parser = SseParser::new();
        let line = format!("data: {}\n", "z".repeat(MAX_LINE_BYTES - 6));
        let mut out = Vec::new();
        for _ in 0..3 {
            out.extend(parser.push(line.as_bytes()));
        }
        out.extend(parser.push(b"\n"));
        assert_eq!(parser.truncations(), 1);
        assert_eq!(out.first().map(|e| e.data.len()), Some(MAX_EVENT_DATA_BYTES));
        // The next event is whole again.
        assert_eq!(parser.push(b"data: ok\n\n"), vec![ev("ok")]);
    }

    #[test]
    fn a_short_lines_buffer_is_kept_and_a_long_lines_let_go() {
        let mut parser = SseParser::new();
        assert_eq!(parser.push(b"data: short\n\n"), vec![ev("short")]);
        assert!(parser.line.capacity() > 0, "the buffer of a short line serves the next one");
        let long = "x".repeat(KEPT_LINE_CAPACITY * 2);
        assert_eq!(parser.push(format!("data: {long}\n\n").as_bytes()), vec![ev(&long)]);
        assert!(parser.line.capacity() <= KEPT_LINE_CAPACITY, "a long line's buffer is not kept");
        assert_eq!(parser.push(b"data: again\n\n"), vec![ev("again")]);
    }
}
