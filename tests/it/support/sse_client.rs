//! A small SSE reader for tests: raw frames, parsed as the EventSource spec says.

use futures_util::StreamExt;

/// One received frame: an event, or a comment (keep-alive).
#[derive(Debug, Clone, PartialEq)]
pub enum Frame {
    /// `event:` name (default "message") and the joined `data:` lines.
    Event { name: String, data: String },
    /// A `:` comment line.
    Comment(String),
}

/// Reads frames from a `text/event-stream` response.
pub struct SseReader {
    stream: futures_util::stream::BoxStream<'static, reqwest::Result<bytes::Bytes>>,
    buf: String,
    /// Every byte received, for assertions on framing.
    pub raw: String,
}

impl SseReader {
    /// Wraps a response.
    pub fn new(resp: reqwest::Response) -> Self {
        SseReader { stream: resp.bytes_stream().boxed(), buf: String::new(), raw: String::new() }
    }

    /// The next frame, `None` when the server closed the stream.
    pub async fn next(&mut self) -> Option<Frame> {
        loop {
            if let Some(pos) = self.buf.find("\n\n") {
                let block: String = self.buf.drain(..pos + 2).collect();
                let mut name = String::from("message");
                let mut data: Vec<String> = Vec::new();
                let mut comment = None;
                for line in block.lines() {
                    if let Some(c) = line.strip_prefix(':') {
                        comment = Some(c.trim_start().to_string());
                    } else if let Some(v) = line.strip_prefix("event:") {
                        name = v.trim_start().to_string();
                    } else if let Some(v) = line.strip_prefix("data:") {
                        data.push(v.strip_prefix(' ').unwrap_or(v).to_string());
                    }
                }
                if data.is_empty() {
                    if let Some(c) = comment {
                        return Some(Frame::Comment(c));
                    }
                    continue;
                }
                return Some(Frame::Event { name, data: data.join("\n") });
            }
            match self.stream.next().await {
                Some(Ok(chunk)) => {
                    let text = String::from_utf8_lossy(&chunk).replace("\r\n", "\n");
                    self.raw.push_str(&text);
                    self.buf.push_str(&text);
                }
                _ => return None,
            }
        }
    }

    /// The next event, skipping comments.
    pub async fn next_event(&mut self) -> Option<(String, String)> {
        loop {
            match self.next().await? {
                Frame::Event { name, data } => return Some((name, data)),
                Frame::Comment(_) => continue,
            }
        }
    }
}
