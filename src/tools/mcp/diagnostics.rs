//! What a failing server says, made safe to show and log: errors explained in one line, secrets
//! redacted, stderr logged.

use super::*;

/// `scheme://host[:port]`, without path or query (which may hold a key).
pub(super) fn url_origin(url: &str) -> String {
    match reqwest::Url::parse(url.trim()) {
        Ok(parsed) => match parsed.host_str() {
            Some(host) => match parsed.port() {
                Some(port) => format!("{}://{host}:{port}", parsed.scheme()),
                None => format!("{}://{host}", parsed.scheme()),
            },
            None => format!("{}:", parsed.scheme()),
        },
        Err(_) => "(invalid URL)".to_string(),
    }
}

/// Replaces secret values (and a URL's path and query) in text that came from errors or the server.
pub(super) struct Redactor {
    /// (text, replacement), longest first so a secret containing another is replaced whole.
    pairs: Vec<(String, String)>,
}

impl Redactor {
    pub(super) fn new<'a>(secrets: impl Iterator<Item = &'a str>, url: Option<&str>) -> Redactor {
        let mut pairs: Vec<(String, String)> = Vec::new();
        if let Some(url) = url {
            let origin = url_origin(url);
            pairs.push((url.trim().to_string(), origin.clone()));
            if let Ok(parsed) = reqwest::Url::parse(url.trim()) {
                pairs.push((parsed.to_string(), origin));
                if let Some(query) = parsed.query().filter(|q| q.len() >= MIN_REDACTED_LEN) {
                    pairs.push((query.to_string(), "[redacted]".to_string()));
                }
            }
        }
        for secret in secrets.map(str::trim).filter(|s| s.len() >= MIN_REDACTED_LEN) {
            pairs.push((secret.to_string(), "[redacted]".to_string()));
        }
        pairs.sort_by_key(|(text, _)| (std::cmp::Reverse(text.len()), text.clone()));
        pairs.dedup_by(|a, b| a.0 == b.0);
        Redactor { pairs }
    }

    pub(super) fn redact(&self, text: &str) -> String {
        let mut text = text.to_string();
        for (secret, replacement) in &self.pairs {
            if text.contains(secret.as_str()) {
                text = text.replace(secret.as_str(), replacement);
            }
        }
        text
    }

    /// An error as one redacted line for messages and logs, with rmcp's wrappers (which name Rust
    /// types) peeled off and reqwest's errors described without their URL.
    pub(super) fn describe(&self, error: &(dyn std::error::Error + 'static)) -> String {
        cut(&one_line(&self.redact(&explain(error))), 500)
    }
}

pub(super) fn explain(error: &(dyn std::error::Error + 'static)) -> String {
    if let Some(error) = error.downcast_ref::<ClientInitializeError>() {
        match error {
            ClientInitializeError::TransportError { error, .. } => return explain(error.error.as_ref()),
            ClientInitializeError::ConnectionClosed(_) => {
                return "the connection closed during the MCP handshake.".to_string();
            }
            ClientInitializeError::JsonRpcError(data) => {
                return format!("it refused the MCP handshake: {}", data.message);
            }
            _ => {}
        }
    }
    if let Some(ServiceError::TransportSend(error)) = error.downcast_ref::<ServiceError>() {
        return explain(error.error.as_ref());
    }
    if let Some(error) = error.downcast_ref::<DynamicTransportError>() {
        return explain(error.error.as_ref());
    }
    if let Some(error) = error.downcast_ref::<StreamableHttpError<reqwest::Error>>() {
        match error {
            StreamableHttpError::Client(error) => return explain_reqwest(error),
            StreamableHttpError::AuthRequired(_) => {
                return "the server requires authorization (HTTP 401); check the configured headers."
                    .to_string();
            }
            StreamableHttpError::InsufficientScope(_) => {
                return "the server refused access (HTTP 403); check the configured headers.".to_string();
            }
            _ => {}
        }
    }
    let mut text = error.to_string();
    let mut source = error.source();
    while let Some(cause) = source {
        let line = cause.to_string();
        if !text.contains(&line) {
            text.push_str(": ");
            text.push_str(&line);
        }
        source = cause.source();
    }
    text
}

/// Whether a child's handshake failed because it went away (which of the two depends on timing).
pub(super) fn exited(error: &ClientInitializeError) -> bool {
    match error {
        ClientInitializeError::ConnectionClosed(_) => true,
        ClientInitializeError::TransportError { error, .. } => error
            .error
            .downcast_ref::<std::io::Error>()
            .is_some_and(|e| e.kind() == std::io::ErrorKind::BrokenPipe),
        _ => false,
    }
}

/// A reqwest error by kind and innermost cause: its own text carries the URL.
pub(super) fn explain_reqwest(error: &reqwest::Error) -> String {
    let what = if error.is_connect() {
        "could not connect".to_string()
    } else if error.is_timeout() {
        "the request timed out".to_string()
    } else if let Some(status) = error.status() {
        format!("HTTP {status}")
    } else {
        "the HTTP request failed".to_string()
    };
    let mut innermost = None;
    let mut source = std::error::Error::source(error);
    while let Some(cause) = source {
        innermost = Some(cause.to_string());
        source = cause.source();
    }
    match innermost {
        Some(cause) => format!("{what}: {cause}"),
        None => what,
    }
}

/// Control characters (newlines included) become spaces, so a message stays one line.
pub(super) fn one_line(text: &str) -> String {
    text.chars().map(|c| if c.is_control() { ' ' } else { c }).collect::<String>().trim().to_string()
}

/// At most `max` characters, with "…" when cut.
pub(super) fn cut(text: &str, max: usize) -> String {
    match text.char_indices().nth(max) {
        Some((end, _)) => format!("{}…", &text[..end]),
        None => text.to_string(),
    }
}

/// Logs a child's stderr at debug, line by line (lines cut, secrets redacted); never inherited.
pub(super) async fn log_stderr(
    server: String,
    mut stderr: tokio::process::ChildStderr,
    redactor: Arc<Redactor>,
) {
    let emit = |line: &[u8], cut_off: bool| {
        let text = one_line(&redactor.redact(&String::from_utf8_lossy(line)));
        if !text.is_empty() {
            let ellipsis = if cut_off { "…" } else { "" };
            tracing::debug!(server = %server, "MCP server stderr: {text}{ellipsis}");
        }
    };
    let mut buf = [0u8; 4096];
    let mut line: Vec<u8> = Vec::new();
    let mut cut_off = false;
    loop {
        match stderr.read(&mut buf).await {
            Ok(0) | Err(_) => break,
            Ok(n) => {
                for &byte in &buf[..n] {
                    if byte == b'\n' {
                        emit(&line, cut_off);
                        line.clear();
                        cut_off = false;
                    } else if line.len() < MAX_STDERR_LINE {
                        line.push(byte);
                    } else {
                        cut_off = true;
                    }
                }
            }
        }
    }
    emit(&line, cut_off);
}
