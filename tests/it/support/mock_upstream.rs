//! A scripted stand-in for the OpenAI, Anthropic and Gemini HTTP APIs, for the provider tests.
//!
//! It speaks just enough HTTP/1.1 to serve what Arbor sends those APIs, and answers each request
//! with the next [`Reply`] a test queued for that provider: fixture files from
//! `tests/fixtures/providers/` sent byte for byte, hand-written SSE events, JSON (error) bodies, a
//! connection dropped mid-stream, or no answer at all. Every request is recorded for assertions.
//!
//! # Routing: one path prefix per provider
//!
//! Each provider is mounted under its own prefix; `{model}` is an id without `/` (as Arbor
//! percent-encodes it), `?query` is kept in the recorded path but not used for routing.
//!
//! - OpenAI, base URL `{base_url}/openai/v1`: `POST /openai/v1/chat/completions`,
//!   `POST /openai/v1/responses`,
//!   `POST /openai/v1/embeddings`, `POST /openai/v1/images/generations` (JSON) and
//!   `POST /openai/v1/images/edits` (multipart/form-data), `GET /openai/v1/models`, and Ollama's native
//!   `GET /openai/api/version`, `GET /openai/api/tags` and `POST /openai/api/show` (beside the OpenAI-compatible base,
//!   as on an Ollama server), LM Studio's `GET /openai/api/v0/models/{model}` and llama.cpp's
//!   `GET /openai/props`.
//! - Anthropic, base URL `{base_url}/anthropic` (or `{base_url}/anthropic/v1`):
//!   `POST /anthropic/v1/messages`, `POST /anthropic/v1/messages/count_tokens`,
//!   `GET /anthropic/v1/models`.
//! - Gemini, base URL `{base_url}/gemini` (or `{base_url}/gemini/v1beta`):
//!   `POST /gemini/v1beta/models/{model}:streamGenerateContent?alt=sse`, `…:generateContent`,
//!   `…:countTokens`, `…:batchEmbedContents`, `GET /gemini/v1beta/models`.
//!
//! The base URLs follow the official SDKs' conventions (OpenAI's includes `/v1`, Anthropic's and
//! Gemini's do not); [`MockUpstream::url`] returns them. Anything else (a doubled `/v1`, a
//! missing prefix) is answered 404 and listed in [`MockUpstream::problems`].
//!
//! # Scripting
//!
//! Each provider has a FIFO queue; every routed request of that provider, whatever its endpoint
//! (models and token counts included), takes the next reply. An empty queue falls back to the
//! provider's responder ([`MockUpstream::respond_with`]), which builds a reply from the request;
//! without one it is answered 500 with a body naming the provider and request, and listed in
//! [`MockUpstream::problems`].
//!
//! # Wire behaviour
//!
//! Every response carries `Connection: close` and the connection is closed after it: one request
//! per connection, no keep-alive, so a pooled client can never race a closing connection. Bodies
//! of known length carry `Content-Length`; streams are sent with `Transfer-Encoding: chunked`, one
//! HTTP chunk per SSE event, written and flushed on a `TCP_NODELAY` socket so each reaches the
//! client as written. Request bodies may be `Content-Length` or chunked.

use std::collections::{HashMap, VecDeque};
use std::path::{Component, Path, PathBuf};
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};
use std::time::{Duration, Instant};

use serde_json::{Value, json};
use tokio::io::{AsyncReadExt as _, AsyncWriteExt as _};
use tokio::net::{TcpListener, TcpStream};
use tokio::task::{AbortHandle, JoinSet};

/// Largest request head accepted.
const MAX_HEAD: usize = 64 * 1024;
/// Largest request body accepted (requests may carry inline images).
const MAX_BODY: usize = 64 * 1024 * 1024;

/// Which upstream API a request or a scripted reply belongs to.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Provider {
    /// OpenAI Chat Completions, mounted under `/openai`.
    OpenAi,
    /// Anthropic Messages, mounted under `/anthropic`.
    Anthropic,
    /// Gemini `generativelanguage` API, mounted under `/gemini`.
    Gemini,
}

impl Provider {
    /// Every provider.
    pub const ALL: [Provider; 3] = [Provider::OpenAi, Provider::Anthropic, Provider::Gemini];

    /// The path prefix this provider is mounted under, e.g. `/openai`.
    pub fn prefix(self) -> &'static str {
        match self {
            Provider::OpenAi => "/openai",
            Provider::Anthropic => "/anthropic",
            Provider::Gemini => "/gemini",
        }
    }

    /// What follows the mock's origin in the base URL Arbor should be given for this provider.
    pub fn base_path(self) -> &'static str {
        match self {
            Provider::OpenAi => "/openai/v1",
            Provider::Anthropic => "/anthropic",
            Provider::Gemini => "/gemini",
        }
    }
}

/// One scripted answer to one request.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Reply {
    /// A file under `tests/fixtures/providers/` (e.g. `openai/text.sse`). A `.sse` file is streamed
    /// one chunk per event (split after blank lines, CRLF, LF or CR, each event's bytes untouched);
    /// anything else is sent whole with status 200 (`application/json` for `.json`).
    /// `first_byte_delay_ms` passes before the status line, `chunk_delay_ms` between two events.
    Fixture {
        /// Path relative to `tests/fixtures/providers`.
        path: String,
        /// Pause between two consecutive events.
        chunk_delay_ms: u64,
        /// Pause before anything (the status line included) is sent.
        first_byte_delay_ms: u64,
    },
    /// A `text/event-stream` 200 whose chunks are these strings, each written verbatim as one
    /// HTTP chunk (so include each event's terminating blank line; empty strings are skipped).
    Sse {
        /// Raw event blocks, e.g. `"data: {\"a\":1}\n\n"`.
        events: Vec<String>,
        /// Pause between two consecutive chunks.
        chunk_delay_ms: u64,
    },
    /// A whole body with this status; `headers` are added to (or replace, by name) the defaults.
    Json {
        /// HTTP status, e.g. 429.
        status: u16,
        /// Extra headers, e.g. `("retry-after", "7")`; framing headers are the mock's own.
        headers: Vec<(String, String)>,
        /// The body, verbatim.
        body: String,
    },
    /// Streams the first `events` events of a `.sse` fixture, then closes the connection without
    /// the chunked body's terminating chunk, so the client sees an incomplete body (an error).
    ResetAfterEvents {
        /// Path relative to `tests/fixtures/providers`.
        path: String,
        /// How many events to send before closing.
        events: usize,
    },
    /// Reads the request, then never answers (not even a status line) until the client hangs up.
    Hang,
    /// Like [`Reply::Sse`], but after the `before` chunks it holds until the test opens the gate
    /// named `gate` ([`MockUpstream::open_gate`]), then sends `after` and ends: a stream a test
    /// can pause at a known point however slow the machine is.
    Gated {
        /// Sent at once.
        before: Vec<String>,
        /// The gate's name.
        gate: String,
        /// Sent once the gate is open.
        after: Vec<String>,
    },
}

impl Reply {
    /// A fixture sent without delays.
    pub fn fixture(path: &str) -> Reply {
        Reply::Fixture { path: path.to_owned(), chunk_delay_ms: 0, first_byte_delay_ms: 0 }
    }

    /// A whole body with this status and no extra headers.
    pub fn json(status: u16, body: impl Into<String>) -> Reply {
        Reply::Json { status, headers: Vec::new(), body: body.into() }
    }
}

/// One request as the mock received it.
#[derive(Clone, Debug)]
pub struct RecordedRequest {
    /// The provider whose route matched, `None` when none did.
    pub provider: Option<Provider>,
    /// `GET`, `POST`…
    pub method: String,
    /// The request target as sent, path and query: `/gemini/v1beta/models/m:generateContent?a=b`.
    pub path: String,
    /// Header names lower-cased, values trimmed, in the order received (repeats kept).
    pub headers: Vec<(String, String)>,
    /// The body bytes (chunked request bodies decoded).
    pub body: Vec<u8>,
    /// When the request was fully read.
    pub received_at: Instant,
}

impl RecordedRequest {
    /// The first value of a header, by case-insensitive name.
    pub fn header(&self, name: &str) -> Option<&str> {
        self.headers.iter().find(|(n, _)| n.eq_ignore_ascii_case(name)).map(|(_, v)| v.as_str())
    }

    /// The body parsed as JSON.
    pub fn json(&self) -> Result<Value, String> {
        serde_json::from_slice(&self.body).map_err(|e| format!("request body is not JSON: {e}"))
    }

    /// The body as (lossy) UTF-8 text.
    pub fn body_text(&self) -> String {
        String::from_utf8_lossy(&self.body).into_owned()
    }

    /// The path without the query.
    pub fn path_only(&self) -> &str {
        self.path.split_once('?').map_or(self.path.as_str(), |(path, _)| path)
    }

    /// The raw (not percent-decoded) value of a query parameter.
    pub fn query_param(&self, name: &str) -> Option<&str> {
        let (_, query) = self.path.split_once('?')?;
        query.split('&').filter_map(|pair| pair.split_once('=')).find(|(n, _)| *n == name).map(|(_, v)| v)
    }
}

/// A running mock upstream; dropping it stops it.
pub struct MockUpstream {
    /// `http://127.0.0.1:PORT`, the origin; see [`MockUpstream::url`] for per-provider base URLs.
    pub base_url: String,
    /// The port it listens on.
    pub port: u16,
    shared: Arc<Shared>,
    task: AbortHandle,
}

struct Shared {
    fixtures: PathBuf,
    inner: Mutex<Inner>,
}

/// Answers a request from what it asks (see [`MockUpstream::respond_with`]).
pub type Responder = Arc<dyn Fn(&RecordedRequest) -> Reply + Send + Sync>;

#[derive(Default)]
struct Inner {
    queues: HashMap<Provider, VecDeque<Reply>>,
    responders: HashMap<Provider, Responder>,
    requests: Vec<RecordedRequest>,
    chunk_times: Vec<Instant>,
    open_gates: std::collections::HashSet<String>,
    problems: Vec<String>,
    counter: u64,
}

struct Request {
    method: String,
    target: String,
    headers: Vec<(String, String)>,
    body: Vec<u8>,
}

/// The directory fixture paths are relative to: `<crate>/tests/fixtures/providers`.
pub fn fixtures_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests").join("fixtures").join("providers")
}

/// Starts a mock on 127.0.0.1 serving fixtures from [`fixtures_dir`].
pub async fn start() -> Result<MockUpstream, String> {
    start_with_fixtures(fixtures_dir()).await
}

/// Starts a mock on 127.0.0.1 serving fixtures from `fixtures`.
pub async fn start_with_fixtures(fixtures: PathBuf) -> Result<MockUpstream, String> {
    let listener = TcpListener::bind("127.0.0.1:0").await.map_err(|e| format!("bind: {e}"))?;
    let port = listener.local_addr().map_err(|e| format!("local_addr: {e}"))?.port();
    let shared = Arc::new(Shared { fixtures, inner: Mutex::new(Inner::default()) });
    let task = tokio::spawn(serve(listener, Arc::clone(&shared))).abort_handle();
    Ok(MockUpstream { base_url: format!("http://127.0.0.1:{port}"), port, shared, task })
}

impl MockUpstream {
    /// The base URL Arbor should use for `provider` (e.g. `http://127.0.0.1:PORT/openai/v1`).
    pub fn url(&self, provider: Provider) -> String {
        format!("{}{}", self.base_url, provider.base_path())
    }

    /// Queues `reply` as the answer to the next unanswered request for `provider`.
    pub fn enqueue(&self, provider: Provider, reply: Reply) {
        self.shared.lock().queues.entry(provider).or_default().push_back(reply);
    }

    /// Answers `provider`'s requests that find its queue empty with `respond(request)`: a
    /// scripted upstream for clients whose number and order of calls a test cannot know (the
    /// coding CLIs make side calls of their own).
    pub fn respond_with(
        &self,
        provider: Provider,
        respond: impl Fn(&RecordedRequest) -> Reply + Send + Sync + 'static,
    ) {
        self.shared.lock().responders.insert(provider, Arc::new(respond));
    }

    /// How many queued replies for `provider` no request has taken yet.
    pub fn pending(&self, provider: Provider) -> usize {
        self.shared.lock().queues.get(&provider).map_or(0, VecDeque::len)
    }

    /// Every request received so far, in arrival order.
    pub fn requests(&self) -> Vec<RecordedRequest> {
        self.shared.lock().requests.clone()
    }

    /// The requests received so far that were routed to `provider`.
    pub fn requests_for(&self, provider: Provider) -> Vec<RecordedRequest> {
        self.shared.lock().requests.iter().filter(|r| r.provider == Some(provider)).cloned().collect()
    }

    /// When each streamed chunk (of any response) finished being written, in write order.
    pub fn sent_chunk_times(&self) -> Vec<Instant> {
        self.shared.lock().chunk_times.clone()
    }

    /// Opens the gate a [`Reply::Gated`] stream waits at (now or later).
    pub fn open_gate(&self, gate: &str) {
        self.shared.lock().open_gates.insert(gate.to_owned());
    }

    /// What went wrong on the mock's side: unknown routes, empty queues, unreadable fixtures.
    pub fn problems(&self) -> Vec<String> {
        self.shared.lock().problems.clone()
    }

    /// The text of a fixture file (e.g. to put an error body into a [`Reply::Json`]).
    pub fn fixture_text(&self, path: &str) -> Result<String, String> {
        let file = fixture_path(&self.shared.fixtures, path)?;
        std::fs::read_to_string(&file).map_err(|e| format!("fixture {}: {e}", file.display()))
    }
}

impl Drop for MockUpstream {
    fn drop(&mut self) {
        self.task.abort();
    }
}

impl Shared {
    fn lock(&self) -> MutexGuard<'_, Inner> {
        self.inner.lock().unwrap_or_else(PoisonError::into_inner)
    }

    fn problem(&self, message: String) {
        self.lock().problems.push(message);
    }
}

/// `base/path`, refusing absolute paths and `..`.
fn fixture_path(base: &Path, path: &str) -> Result<PathBuf, String> {
    let relative = Path::new(path);
    if relative.components().any(|c| !matches!(c, Component::Normal(_) | Component::CurDir)) {
        return Err(format!("fixture path {path:?} must be relative, without `..`"));
    }
    Ok(base.join(relative))
}

async fn serve(listener: TcpListener, shared: Arc<Shared>) {
    // Connections live in the JoinSet, so aborting this task aborts them too.
    let mut connections = JoinSet::new();
    loop {
        while connections.try_join_next().is_some() {}
        let Ok((stream, _)) = listener.accept().await else {
            tokio::time::sleep(Duration::from_millis(10)).await;
            continue;
        };
        let shared = Arc::clone(&shared);
        connections.spawn(async move {
            let _ = handle(stream, &shared).await;
        });
    }
}

async fn handle(mut stream: TcpStream, shared: &Shared) -> std::io::Result<()> {
    let _ = stream.set_nodelay(true);
    let request = match read_request(&mut stream).await? {
        Ok(Some(request)) => request,
        Ok(None) => return Ok(()),
        Err(reason) => {
            shared.problem(format!("bad request: {reason}"));
            let body = error_body("mock_upstream_bad_request", &reason);
            return write_whole(&mut stream, 400, &json_type(), &body).await;
        }
    };
    let path_only = request.target.split_once('?').map_or(request.target.as_str(), |(path, _)| path);
    let provider = route(&request.method, path_only);
    let reply = {
        let mut inner = shared.lock();
        inner.counter += 1;
        inner.requests.push(RecordedRequest {
            provider,
            method: request.method.clone(),
            path: request.target.clone(),
            headers: request.headers,
            body: request.body,
            received_at: Instant::now(),
        });
        let queued =
            provider.map(|p| (p, inner.counter, inner.queues.get_mut(&p).and_then(VecDeque::pop_front)));
        // An empty queue falls back to the provider's responder, if a test set one.
        match queued {
            Some((p, n, None)) => {
                let answer = inner.responders.get(&p).cloned().zip(inner.requests.last().cloned());
                Some((p, n, answer.map(|(respond, recorded)| respond(&recorded))))
            }
            other => other,
        }
    };
    let what = format!("{} {}", request.method, request.target);
    match reply {
        None => {
            let message = format!(
                "mock_upstream: no route for {what}; providers are mounted at /openai/v1, /anthropic/v1 \
                 and /gemini/v1beta (base URLs: /openai/v1, /anthropic, /gemini)"
            );
            shared.problem(message.clone());
            let body = error_body("mock_upstream_no_route", &message);
            write_whole(&mut stream, 404, &json_type(), &body).await
        }
        Some((provider, _, None)) => {
            let message = format!(
                "mock_upstream: no scripted reply for {provider:?} ({what}); \
                 call enqueue(Provider::{provider:?}, Reply::...) before this request"
            );
            shared.problem(message.clone());
            let body = error_body("mock_upstream_missing_script", &message);
            write_whole(&mut stream, 500, &json_type(), &body).await
        }
        Some((provider, n, Some(reply))) => send_reply(&mut stream, shared, provider, n, reply, &what).await,
    }
}

/// Which provider serves `method path` (the path without its query), if any.
fn route(method: &str, path: &str) -> Option<Provider> {
    match (method, path) {
        (
            "POST",
            "/openai/v1/chat/completions"
            | "/openai/v1/responses"
            | "/openai/v1/embeddings"
            | "/openai/v1/images/generations"
            | "/openai/v1/images/edits"
            | "/openai/api/show",
        )
        | ("GET", "/openai/v1/models" | "/openai/api/version" | "/openai/api/tags" | "/openai/props") => {
            Some(Provider::OpenAi)
        }
        ("GET", _)
            if path
                .strip_prefix("/openai/api/v0/models/")
                .is_some_and(|m| !m.is_empty() && !m.contains('/')) =>
        {
            Some(Provider::OpenAi)
        }
        ("POST", "/anthropic/v1/messages" | "/anthropic/v1/messages/count_tokens")
        | ("GET", "/anthropic/v1/models") => Some(Provider::Anthropic),
        ("GET", "/gemini/v1beta/models") => Some(Provider::Gemini),
        ("POST", _) => {
            let (model, action) = path.strip_prefix("/gemini/v1beta/models/")?.rsplit_once(':')?;
            let known = matches!(
                action,
                "streamGenerateContent" | "generateContent" | "countTokens" | "batchEmbedContents"
            );
            (known && !model.is_empty() && !model.contains('/')).then_some(Provider::Gemini)
        }
        _ => None,
    }
}

fn error_body(kind: &str, message: &str) -> Vec<u8> {
    json!({ "error": { "type": kind, "message": message } }).to_string().into_bytes()
}

async fn send_reply(
    stream: &mut TcpStream,
    shared: &Shared,
    provider: Provider,
    n: u64,
    reply: Reply,
    what: &str,
) -> std::io::Result<()> {
    match reply {
        Reply::Json { status, headers, body } => {
            let mut all = default_headers(provider, n, false);
            for (name, value) in headers {
                all.retain(|(default, _)| !default.eq_ignore_ascii_case(&name));
                all.push((name.to_ascii_lowercase(), value));
            }
            write_whole(stream, status, &all, body.as_bytes()).await
        }
        Reply::Fixture { path, chunk_delay_ms, first_byte_delay_ms } => {
            let bytes = match load_fixture(shared, &path, what).await {
                Ok(bytes) => bytes,
                Err(body) => return write_whole(stream, 500, &json_type(), &body).await,
            };
            sleep_ms(first_byte_delay_ms).await;
            if path.ends_with(".sse") {
                let events = split_events(&bytes);
                stream_chunks(stream, shared, provider, n, &events, chunk_delay_ms, StreamEnd::Finish).await
            } else {
                let mut headers = default_headers(provider, n, false);
                if !path.ends_with(".json") {
                    headers.retain(|(name, _)| name != "content-type");
                    headers.push(("content-type".into(), "application/octet-stream".into()));
                }
                write_whole(stream, 200, &headers, &bytes).await
            }
        }
        Reply::Sse { events, chunk_delay_ms } => {
            let chunks: Vec<&[u8]> = events.iter().map(String::as_bytes).collect();
            stream_chunks(stream, shared, provider, n, &chunks, chunk_delay_ms, StreamEnd::Finish).await
        }
        Reply::ResetAfterEvents { path, events } => {
            let bytes = match load_fixture(shared, &path, what).await {
                Ok(bytes) => bytes,
                Err(body) => return write_whole(stream, 500, &json_type(), &body).await,
            };
            let all = split_events(&bytes);
            let sent = all.get(..events).unwrap_or(&all);
            stream_chunks(stream, shared, provider, n, sent, 0, StreamEnd::Reset).await
        }
        Reply::Gated { before, gate, after } => {
            let before: Vec<&[u8]> = before.iter().map(String::as_bytes).collect();
            stream_chunks(stream, shared, provider, n, &before, 0, StreamEnd::Open).await?;
            while !shared.lock().open_gates.contains(&gate) {
                sleep_ms(20).await;
            }
            for chunk in after.iter().filter(|c| !c.is_empty()) {
                let mut frame = format!("{:x}\r\n", chunk.len()).into_bytes();
                frame.extend_from_slice(chunk.as_bytes());
                frame.extend_from_slice(b"\r\n");
                stream.write_all(&frame).await?;
                shared.lock().chunk_times.push(Instant::now());
            }
            stream.write_all(b"0\r\n\r\n").await?;
            stream.flush().await?;
            stream.shutdown().await
        }
        Reply::Hang => {
            // Never answer; return once the client gives up (EOF or error), to free the task.
            let mut sink = [0u8; 1024];
            while matches!(stream.read(&mut sink).await, Ok(n) if n > 0) {}
            Ok(())
        }
    }
}

fn json_type() -> Vec<(String, String)> {
    vec![("content-type".to_owned(), "application/json".to_owned())]
}

/// The fixture's bytes, or (after recording the problem) a JSON error body to answer 500 with.
async fn load_fixture(shared: &Shared, path: &str, what: &str) -> Result<Vec<u8>, Vec<u8>> {
    let file = fixture_path(&shared.fixtures, path);
    let loaded = match file {
        Ok(file) => tokio::fs::read(&file).await.map_err(|e| format!("fixture {}: {e}", file.display())),
        Err(e) => Err(e),
    };
    loaded.map_err(|e| {
        let message = format!("mock_upstream: cannot serve {what}: {e}");
        shared.problem(message.clone());
        error_body("mock_upstream_fixture", &message)
    })
}

/// The headers each provider sends on every response (content type by body kind, a request id).
fn default_headers(provider: Provider, n: u64, stream: bool) -> Vec<(String, String)> {
    let content_type = match (provider, stream) {
        (Provider::OpenAi | Provider::Anthropic, true) => "text/event-stream; charset=utf-8",
        (Provider::Gemini, true) => "text/event-stream",
        (Provider::OpenAi | Provider::Anthropic, false) => "application/json",
        (Provider::Gemini, false) => "application/json; charset=UTF-8",
    };
    let mut headers = vec![("content-type".into(), content_type.to_owned())];
    match provider {
        Provider::OpenAi => headers.push(("x-request-id".into(), format!("req_mock_{n}"))),
        Provider::Anthropic => headers.push(("request-id".into(), format!("req_mock_{n}"))),
        Provider::Gemini => {}
    }
    if stream {
        headers.push(("cache-control".into(), "no-cache".to_owned()));
    }
    headers
}

async fn sleep_ms(ms: u64) {
    if ms > 0 {
        tokio::time::sleep(Duration::from_millis(ms)).await;
    }
}

/// Splits an SSE body into events: a new event starts at the first non-blank line after a blank
/// one. Each piece keeps its own bytes (its trailing blank lines included), so they join back to
/// `bytes` exactly; a last event without its blank line (a truncated stream) stays as it is.
fn split_events(bytes: &[u8]) -> Vec<&[u8]> {
    let mut events = Vec::new();
    let (mut start, mut at) = (0, 0);
    let (mut has_content, mut boundary) = (false, false);
    while at < bytes.len() {
        let rest = bytes.get(at..).unwrap_or_default();
        let (line_len, end_len) = match rest.iter().position(|&b| b == b'\n' || b == b'\r') {
            Some(i) if rest.get(i..i + 2) == Some(b"\r\n") => (i, 2),
            Some(i) => (i, 1),
            None => (rest.len(), 0),
        };
        if line_len == 0 {
            boundary |= has_content;
        } else {
            if boundary {
                events.extend(bytes.get(start..at));
                start = at;
                boundary = false;
            }
            has_content = true;
        }
        at += line_len + end_len;
    }
    events.extend(bytes.get(start..).filter(|rest| !rest.is_empty()));
    events
}

/// A 200 `text/event-stream`, one HTTP chunk per item; `finish` ends the chunked body properly,
/// otherwise the connection is closed right after the last chunk.
async fn stream_chunks(
    stream: &mut TcpStream,
    shared: &Shared,
    provider: Provider,
    n: u64,
    chunks: &[&[u8]],
    chunk_delay_ms: u64,
    end: StreamEnd,
) -> std::io::Result<()> {
    let mut head = status_line(200);
    for (name, value) in default_headers(provider, n, true) {
        head.push_str(&format!("{name}: {value}\r\n"));
    }
    head.push_str("transfer-encoding: chunked\r\nconnection: close\r\n\r\n");
    stream.write_all(head.as_bytes()).await?;
    stream.flush().await?;
    let mut first = true;
    for chunk in chunks.iter().filter(|c| !c.is_empty()) {
        if !first {
            sleep_ms(chunk_delay_ms).await;
        }
        first = false;
        let mut frame = format!("{:x}\r\n", chunk.len()).into_bytes();
        frame.extend_from_slice(chunk);
        frame.extend_from_slice(b"\r\n");
        stream.write_all(&frame).await?;
        stream.flush().await?;
        shared.lock().chunk_times.push(Instant::now());
    }
    if end == StreamEnd::Finish {
        stream.write_all(b"0\r\n\r\n").await?;
    }
    stream.flush().await?;
    if end == StreamEnd::Open {
        return Ok(());
    }
    stream.shutdown().await
}

/// How [`stream_chunks`] leaves the response.
#[derive(Clone, Copy, PartialEq, Eq)]
enum StreamEnd {
    /// The terminating chunk, then the connection is closed: a whole body.
    Finish,
    /// Closed without the terminating chunk: an incomplete body.
    Reset,
    /// Left open for more chunks.
    Open,
}

async fn write_whole(
    stream: &mut TcpStream,
    status: u16,
    headers: &[(String, String)],
    body: &[u8],
) -> std::io::Result<()> {
    let mut head = status_line(status);
    for (name, value) in headers {
        let framing = ["content-length", "transfer-encoding", "connection"];
        if !framing.iter().any(|f| name.eq_ignore_ascii_case(f)) {
            head.push_str(&format!("{name}: {value}\r\n"));
        }
    }
    head.push_str(&format!("content-length: {}\r\nconnection: close\r\n\r\n", body.len()));
    let mut out = head.into_bytes();
    out.extend_from_slice(body);
    stream.write_all(&out).await?;
    stream.flush().await?;
    stream.shutdown().await
}

fn status_line(status: u16) -> String {
    let reason = match status {
        200 => "OK",
        400 => "Bad Request",
        401 => "Unauthorized",
        403 => "Forbidden",
        404 => "Not Found",
        408 => "Request Timeout",
        413 => "Payload Too Large",
        422 => "Unprocessable Entity",
        429 => "Too Many Requests",
        500 => "Internal Server Error",
        502 => "Bad Gateway",
        503 => "Service Unavailable",
        504 => "Gateway Timeout",
        529 => "Site Overloaded",
        _ => "Status",
    };
    format!("HTTP/1.1 {status} {reason}\r\n")
}

/// Reads one request: `Ok(Ok(None))` when the client closed without sending anything.
async fn read_request(stream: &mut TcpStream) -> std::io::Result<Result<Option<Request>, String>> {
    let mut buf = Vec::new();
    let mut chunk = vec![0u8; 64 * 1024];
    let head_end = loop {
        if let Some(at) = buf.windows(4).position(|w| w == b"\r\n\r\n") {
            break at;
        }
        if buf.len() > MAX_HEAD {
            return Ok(Err(format!("request head over {MAX_HEAD} bytes")));
        }
        let n = stream.read(&mut chunk).await?;
        if n == 0 {
            return Ok(if buf.is_empty() { Ok(None) } else { Err("connection closed mid-head".into()) });
        }
        buf.extend_from_slice(chunk.get(..n).unwrap_or_default());
    };
    let head = String::from_utf8_lossy(buf.get(..head_end).unwrap_or_default()).into_owned();
    let mut lines = head.split("\r\n");
    let mut request_line = lines.next().unwrap_or_default().split(' ');
    let (Some(method), Some(target), Some(version)) =
        (request_line.next(), request_line.next(), request_line.next())
    else {
        return Ok(Err(format!("bad request line {:?}", head.lines().next().unwrap_or_default())));
    };
    if !version.starts_with("HTTP/1.") {
        return Ok(Err(format!("unsupported version {version:?}")));
    }
    let mut headers = Vec::new();
    for line in lines {
        let Some((name, value)) = line.split_once(':') else {
            return Ok(Err(format!("bad header line {line:?}")));
        };
        headers.push((name.trim().to_ascii_lowercase(), value.trim().to_owned()));
    }
    let header = |name: &str| headers.iter().find(|(n, _)| n == name).map(|(_, v)| v.as_str());
    if header("expect").is_some_and(|v| v.eq_ignore_ascii_case("100-continue")) {
        stream.write_all(b"HTTP/1.1 100 Continue\r\n\r\n").await?;
    }
    let chunked = header("transfer-encoding").is_some_and(|v| v.to_ascii_lowercase().contains("chunked"));
    let mut rest = buf.split_off(head_end + 4);
    let body = if chunked {
        loop {
            match decode_chunked(&rest) {
                Ok(Some(body)) => break body,
                Ok(None) => {}
                Err(e) => return Ok(Err(e)),
            }
            if rest.len() > MAX_BODY {
                return Ok(Err(format!("chunked body over {MAX_BODY} bytes")));
            }
            let n = stream.read(&mut chunk).await?;
            if n == 0 {
                return Ok(Err("connection closed mid-body".into()));
            }
            rest.extend_from_slice(chunk.get(..n).unwrap_or_default());
        }
    } else {
        let length = match header("content-length").map(str::parse::<usize>) {
            None => 0,
            Some(Ok(length)) if length <= MAX_BODY => length,
            Some(_) => return Ok(Err("bad or too large content-length".into())),
        };
        while rest.len() < length {
            let n = stream.read(&mut chunk).await?;
            if n == 0 {
                return Ok(Err("connection closed mid-body".into()));
            }
            rest.extend_from_slice(chunk.get(..n).unwrap_or_default());
        }
        rest.truncate(length);
        rest
    };
    Ok(Ok(Some(Request { method: method.to_owned(), target: target.to_owned(), headers, body })))
}

/// Decodes a complete chunked body (trailers ignored); `Ok(None)` while more bytes are needed.
fn decode_chunked(mut data: &[u8]) -> Result<Option<Vec<u8>>, String> {
    let mut body = Vec::new();
    loop {
        let Some(line_end) = data.windows(2).position(|w| w == b"\r\n") else {
            return Ok(None);
        };
        let size_line = String::from_utf8_lossy(data.get(..line_end).unwrap_or_default()).into_owned();
        let size_hex = size_line.split(';').next().unwrap_or_default().trim();
        let size = usize::from_str_radix(size_hex, 16).map_err(|_| format!("bad chunk size {size_hex:?}"))?;
        data = data.get(line_end + 2..).unwrap_or_default();
        if size == 0 {
            // Trailers, if any, end with an empty line.
            let done = data.starts_with(b"\r\n") || data.windows(4).any(|w| w == b"\r\n\r\n");
            return Ok(done.then_some(body));
        }
        let (Some(content), Some(b"\r\n")) = (data.get(..size), data.get(size..size + 2)) else {
            return Ok(None);
        };
        body.extend_from_slice(content);
        data = data.get(size + 2..).unwrap_or_default();
    }
}
