//! The HTTP side of every provider: send a request in its wire format, turn the streamed answer
//! into [`ProviderEvent`]s, and retry what may be retried.
//!
//! Retries (429 honouring `retry-after`, 5xx, connection errors, retryable in-stream errors)
//! happen only while nothing has been produced yet: events are held back until the first
//! content event (text, thought or tool call), and only then released. After that an error is
//! reported as [`ProviderEvent::Error`] and the stream ends; it is never retried, so no token is
//! ever sent twice.

use std::pin::Pin;
use std::time::Duration;

use futures_util::{Stream, StreamExt};

mod reading;
mod upstream;

use reading::Reading;
use upstream::Outgoing;

use super::discovery::{self, Discovered};
use super::sse::SseEvent;
use super::types::{ChatRequest, Embeddings, ProviderError, ProviderEvent, StreamParseError};
use super::{anthropic, gemini, openai};
use crate::secret::Secret;

/// Which wire format an endpoint speaks.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum WireFormat {
    /// OpenAI Chat Completions and every compatible server.
    OpenAi,
    /// Anthropic Messages.
    Anthropic,
    /// Google Gemini `streamGenerateContent`.
    Gemini,
}

/// Where and how to call a provider.
#[derive(Debug, Clone)]
pub struct Endpoint {
    /// Wire format.
    pub format: WireFormat,
    /// Base URL as configured (e.g. `https://api.openai.com/v1`).
    pub base_url: String,
    /// The key to send; empty for servers without auth (a local Ollama).
    pub api_key: Secret,
    /// OpenAI itself: its reasoning models are called through the Responses API, the only
    /// one that streams their reasoning summaries.
    pub reasoning_via_responses: bool,
}

impl Endpoint {
    /// Whether `req` goes to the Responses API rather than Chat Completions.
    fn via_responses(&self, req: &ChatRequest) -> bool {
        self.reasoning_via_responses
            && self.format == WireFormat::OpenAi
            && openai::responses::is_reasoning_model(&req.model)
    }
}

/// How often and how patiently to retry before the first token.
#[derive(Debug, Clone)]
pub struct RetryPolicy {
    /// Attempts in total (1 = no retry).
    pub max_attempts: u32,
    /// First backoff; doubled each time, with jitter.
    pub base_delay: Duration,
    /// Longest single wait, `retry-after` included.
    pub max_delay: Duration,
}

impl Default for RetryPolicy {
    fn default() -> Self {
        RetryPolicy {
            max_attempts: 3,
            base_delay: Duration::from_millis(500),
            max_delay: Duration::from_secs(30),
        }
    }
}

/// A parser of a non-streamed answer body.
type ParseFn<T> = fn(&[u8]) -> Result<T, StreamParseError>;

/// A stream of provider events; it always ends after `Finish` or `Error`.
pub type EventStream = Pin<Box<dyn Stream<Item = ProviderEvent> + Send>>;

/// The most idle connections kept to one provider host.
const IDLE_CONNECTIONS_PER_HOST: usize = 32;
/// How long an idle connection to a provider is kept.
const IDLE_CONNECTION_TIMEOUT: Duration = Duration::from_secs(20);

/// The settings every provider client shares: the connect timeout, and few idle connections
/// kept briefly (after a burst they would otherwise stay for 90 s, as many as it opened, each
/// with its buffers).
fn builder(connect_timeout: Duration) -> reqwest::ClientBuilder {
    crate::tls::client_builder()
        .connect_timeout(connect_timeout)
        .pool_max_idle_per_host(IDLE_CONNECTIONS_PER_HOST)
        .pool_idle_timeout(IDLE_CONNECTION_TIMEOUT)
}

/// Sends requests to providers.
#[derive(Clone)]
pub struct ProviderClient {
    http: reqwest::Client,
    /// Arbor's own client for streamed calls (see `upstream`); none on a pinned client.
    direct: Option<upstream::Direct>,
    idle_timeout: Duration,
    connect_timeout: Duration,
}

enum Decoder {
    OpenAi(openai::StreamDecoder),
    OpenAiResponses(openai::responses::StreamDecoder),
    Anthropic(anthropic::StreamDecoder),
    Gemini(gemini::StreamDecoder),
}

impl Decoder {
    fn new(format: WireFormat) -> Decoder {
        match format {
            WireFormat::OpenAi => Decoder::OpenAi(openai::StreamDecoder::new()),
            WireFormat::Anthropic => Decoder::Anthropic(anthropic::StreamDecoder::new()),
            WireFormat::Gemini => Decoder::Gemini(gemini::StreamDecoder::new()),
        }
    }

    fn on_event(&mut self, ev: &SseEvent) -> Result<Vec<ProviderEvent>, StreamParseError> {
        match self {
            Decoder::OpenAi(d) => d.on_event(ev),
            Decoder::OpenAiResponses(d) => d.on_event(ev),
            Decoder::Anthropic(d) => d.on_event(ev),
            Decoder::Gemini(d) => d.on_event(ev),
        }
    }

    fn finish(&mut self) -> Result<Vec<ProviderEvent>, StreamParseError> {
        match self {
            Decoder::OpenAi(d) => d.finish(),
            Decoder::OpenAiResponses(d) => d.finish(),
            Decoder::Anthropic(d) => d.finish(),
            Decoder::Gemini(d) => d.finish(),
        }
    }
}

/// The caller's `anthropic-beta` header on a passed-through Anthropic request: only plain
/// feature names (letters, digits, `-`, `_`, `.`, commas), at most 1 KiB.
fn beta_of(req: &ChatRequest) -> Option<&str> {
    req.passthrough
        .as_ref()
        .and_then(|p| p.beta.as_deref())
        .filter(|v| v.len() <= 1024 && v.bytes().all(|c| c.is_ascii_alphanumeric() || b"-_.,".contains(&c)))
}

/// [`beta_of`] added to a request.
fn with_beta(b: reqwest::RequestBuilder, req: &ChatRequest) -> reqwest::RequestBuilder {
    match beta_of(req) {
        Some(v) => b.header("anthropic-beta", v),
        None => b,
    }
}

/// The format's authentication and version headers.
fn auth_headers(ep: &Endpoint) -> Vec<(&'static str, String)> {
    match ep.format {
        WireFormat::OpenAi if ep.api_key.is_empty() => Vec::new(),
        WireFormat::OpenAi => vec![("authorization", format!("Bearer {}", ep.api_key.expose()))],
        WireFormat::Anthropic => anthropic::headers(ep.api_key.expose()),
        // The key travels in a header, never in the URL.
        WireFormat::Gemini => gemini::headers(ep.api_key.expose()),
    }
}

/// Replaces every occurrence of the key, and `key=…` query values, in a message.
pub fn redact(message: &str, key: &Secret) -> String {
    let mut out =
        if key.expose().len() >= 4 { message.replace(key.expose(), "****") } else { message.to_string() };
    let mut from = 0;
    while let Some(found) = out[from..].find("key=") {
        let start = from + found + 4;
        let end = out[start..].find(['&', ' ', '"', '\'', ',']).map_or(out.len(), |e| start + e);
        out.replace_range(start..end, "****");
        from = start + 4;
    }
    out
}

fn transport_error(timeout: bool) -> ProviderError {
    let kind = if timeout { "timeout" } else { "connection" };
    ProviderError {
        status: 0,
        kind: kind.into(),
        // Without the URL: a Gemini-style URL could carry a key.
        message: format!("could not reach the provider ({kind})"),
        retryable: true,
        retry_after_secs: None,
    }
}

/// The most a whole (non-streamed) answer may hold: model lists, token counts, discovery and
/// embeddings (2,048 inputs of 3,072 dimensions as JSON fit).
const MAX_ANSWER_BYTES: usize = 96 * 1024 * 1024;
/// The most of an error body that is read (its message is shown shortened anyway).
const MAX_ERROR_BYTES: usize = 64 * 1024;

/// Reads a whole body, refusing one longer than `cap` before it is read (by its
/// `Content-Length`) or as soon as it passes it, so a provider cannot make Arbor hold more.
/// With `cut`, a longer body is cut at the cap instead (an error body: its start says what
/// went wrong).
async fn read_capped(
    mut body: upstream::Body,
    content_length: Option<u64>,
    cap: usize,
    cut: bool,
) -> Result<bytes::Bytes, ProviderError> {
    let too_large = || ProviderError {
        status: 0,
        kind: "too_large".into(),
        message: format!("the provider's answer is larger than {} MiB", cap / (1024 * 1024)),
        retryable: false,
        retry_after_secs: None,
    };
    if !cut && content_length.is_some_and(|n| n > cap as u64) {
        return Err(too_large());
    }
    let mut out = bytes::BytesMut::new();
    while let Some(chunk) = body.next().await {
        let chunk = chunk.map_err(|e| transport_error(e.timeout))?;
        let room = cap - out.len();
        if chunk.len() > room {
            if cut {
                out.extend_from_slice(&chunk[..room]);
                break;
            }
            return Err(too_large());
        }
        out.extend_from_slice(&chunk);
    }
    Ok(out.freeze())
}

/// The provider sent nothing for longer than the idle timeout.
fn idle_timeout_error() -> ProviderError {
    ProviderError {
        status: 0,
        kind: "timeout".into(),
        message: "the provider sent nothing for too long (timeout)".into(),
        retryable: true,
        retry_after_secs: None,
    }
}

pub(super) fn parse_failure(e: &StreamParseError) -> ProviderError {
    ProviderError {
        status: 0,
        kind: "bad_stream".into(),
        message: e.to_string(),
        retryable: false,
        retry_after_secs: None,
    }
}

/// A 2xx status.
fn is_success(status: u16) -> bool {
    (200..300).contains(&status)
}

fn is_content(e: &ProviderEvent) -> bool {
    matches!(e, ProviderEvent::TextDelta(_) | ProviderEvent::ThoughtDelta(_) | ProviderEvent::ToolCall { .. })
}

impl ProviderClient {
    /// A client with the given connect timeout and idle (between chunks) timeout.
    pub fn new(connect_timeout: Duration, idle_timeout: Duration) -> Result<ProviderClient, String> {
        let http = builder(connect_timeout)
            .redirect(reqwest::redirect::Policy::none())
            .build()
            .map_err(|e| e.to_string())?;
        let direct =
            upstream::Direct::new(connect_timeout, IDLE_CONNECTIONS_PER_HOST, IDLE_CONNECTION_TIMEOUT)?;
        Ok(ProviderClient { http, direct: Some(direct), idle_timeout, connect_timeout })
    }

    /// A client like this one whose connections go only to the addresses the SSRF guard
    /// checked (for base URLs a member chose).
    pub fn pinned(&self, target: &crate::netguard::Target) -> Result<ProviderClient, String> {
        let http = crate::netguard::pinned_client(target, builder(self.connect_timeout))
            .map_err(|e| e.to_string())?;
        Ok(ProviderClient {
            http,
            direct: None,
            idle_timeout: self.idle_timeout,
            connect_timeout: self.connect_timeout,
        })
    }

    /// Adds the format's authentication and version headers, marked sensitive.
    fn authorize(ep: &Endpoint, mut b: reqwest::RequestBuilder) -> reqwest::RequestBuilder {
        for (name, value) in auth_headers(ep) {
            b = match reqwest::header::HeaderValue::from_str(&value) {
                Ok(mut v) => {
                    v.set_sensitive(true);
                    b.header(name, v)
                }
                // reqwest reports the bad value when the request is sent.
                Err(_) => b.header(name, value),
            };
        }
        b
    }

    /// The streamed chat request for `ep`: its URL, headers and body.
    fn outgoing(ep: &Endpoint, req: &ChatRequest) -> Result<Outgoing, ProviderError> {
        let (url, body) = if ep.via_responses(req) {
            (
                openai::responses::endpoint(&ep.base_url),
                serde_json::to_vec(&openai::responses::build_request(req)),
            )
        } else {
            match ep.format {
                WireFormat::OpenAi => {
                    (openai::endpoint(&ep.base_url), serde_json::to_vec(&openai::build_request(req, true)))
                }
                WireFormat::Anthropic => (
                    anthropic::endpoint(&ep.base_url),
                    serde_json::to_vec(&anthropic::build_request(req, true)),
                ),
                WireFormat::Gemini => (
                    gemini::endpoint(&ep.base_url, &req.model, true),
                    serde_json::to_vec(&gemini::build_request(req)),
                ),
            }
        };
        let body = body.map_err(|e| {
            parse_failure(&StreamParseError(format!("the request could not be written: {e}")))
        })?;
        let mut headers = upstream::json_headers();
        let beta = beta_of(req).filter(|_| ep.format == WireFormat::Anthropic);
        let extra = auth_headers(ep).into_iter().chain(beta.map(|v| ("anthropic-beta", v.to_string())));
        for (name, value) in extra {
            // A key that cannot be a header value fails as reqwest's request would.
            let mut value =
                reqwest::header::HeaderValue::from_str(&value).map_err(|_| transport_error(false))?;
            value.set_sensitive(true);
            headers.insert(name, value);
        }
        Ok(Outgoing { url, headers, body: body.into() })
    }

    /// Sends a streamed request: through Arbor's own client when it may carry the URL,
    /// otherwise through reqwest.
    async fn send(&self, out: Outgoing) -> Result<upstream::Incoming, upstream::Broken> {
        match self.direct.as_ref().and_then(|d| d.carries(&out.url).map(|uri| (d, uri))) {
            Some((direct, uri)) => direct.post(uri, out).await,
            None => upstream::post_with(&self.http, out).await,
        }
    }

    /// The HTTP client (for the requests of the other call kinds, such as images).
    pub(super) fn http(&self) -> &reqwest::Client {
        &self.http
    }

    /// Sends a non-streaming request and returns the body of a successful answer.
    async fn exchange(
        &self,
        ep: &Endpoint,
        b: reqwest::RequestBuilder,
    ) -> Result<bytes::Bytes, ProviderError> {
        self.exchange_capped(ep, b, MAX_ANSWER_BYTES).await
    }

    /// [`Self::exchange`] with an answer of at most `cap` bytes.
    pub(super) async fn exchange_capped(
        &self,
        ep: &Endpoint,
        b: reqwest::RequestBuilder,
        cap: usize,
    ) -> Result<bytes::Bytes, ProviderError> {
        let res = Self::authorize(ep, b)
            .timeout(self.idle_timeout)
            .send()
            .await
            .map_err(|e| transport_error(e.is_timeout()))?;
        let res = upstream::from_reqwest(res);
        let ok = is_success(res.status);
        let body = if ok {
            read_capped(res.body, res.content_length, cap, false).await?
        } else {
            read_capped(res.body, res.content_length, MAX_ERROR_BYTES, true).await?
        };
        if !ok {
            return Err(Self::refusal(ep, res.status, res.retry_after.as_deref(), &body));
        }
        Ok(body)
    }

    /// The model ids the provider lists. An OpenAI-compatible server whose `GET /models` is
    /// missing (404) or empty is asked Ollama's native `GET /api/tags` beside it (an older
    /// Ollama, or one whose OpenAI-compatible list is off); the first answer stands when that
    /// says nothing either.
    pub async fn list_models(&self, ep: &Endpoint) -> Result<Vec<String>, ProviderError> {
        let (url, parse): (String, ParseFn<Vec<String>>) = match ep.format {
            WireFormat::OpenAi => (openai::models_endpoint(&ep.base_url), openai::parse_models),
            WireFormat::Anthropic => (anthropic::models_endpoint(&ep.base_url), anthropic::parse_models),
            WireFormat::Gemini => (gemini::models_endpoint(&ep.base_url), gemini::parse_models),
        };
        let listed = match self.exchange(ep, self.http.get(url)).await {
            Ok(body) => parse(&body).map_err(|e| parse_failure(&e)),
            Err(e) => Err(e),
        };
        let missing = match &listed {
            Ok(ids) => ids.is_empty(),
            Err(e) => e.status == 404,
        };
        if ep.format != WireFormat::OpenAi || !missing {
            return listed;
        }
        let tags = self.http.get(openai::native_endpoint(&ep.base_url, "api/tags"));
        match self.exchange(ep, tags).await.map(|body| openai::parse_models(&body)) {
            Ok(Ok(ids)) if !ids.is_empty() => Ok(ids),
            _ => listed,
        }
    }

    /// The prompt's size in tokens, where the provider can count it (`None`: it cannot).
    pub async fn count_tokens(&self, ep: &Endpoint, req: &ChatRequest) -> Result<Option<u64>, ProviderError> {
        let (b, parse): (_, ParseFn<u64>) = match ep.format {
            WireFormat::OpenAi => return Ok(None),
            WireFormat::Anthropic => (
                with_beta(
                    self.http
                        .post(anthropic::count_tokens_endpoint(&ep.base_url))
                        .json(&anthropic::build_count_tokens(req)),
                    req,
                ),
                anthropic::parse_count_tokens,
            ),
            WireFormat::Gemini => (
                self.http
                    .post(gemini::count_tokens_endpoint(&ep.base_url, &req.model))
                    .json(&gemini::build_count_tokens(req)),
                gemini::parse_count_tokens,
            ),
        };
        let body = self.exchange(ep, b).await?;
        parse(&body).map(Some).map_err(|e| parse_failure(&e))
    }

    /// What the provider's own API says about `model`: its model list, and for an
    /// OpenAI-compatible server that said too little, Ollama's `/api/show` (a server without
    /// it answers 404, which says nothing). Empty for Anthropic, whose list has no limits.
    pub async fn discover(&self, ep: &Endpoint, model: &str) -> Result<Discovered, ProviderError> {
        match ep.format {
            WireFormat::Anthropic => Ok(Discovered::default()),
            WireFormat::Gemini => {
                let body = self.exchange(ep, self.http.get(gemini::models_endpoint(&ep.base_url))).await?;
                Ok(discovery::from_gemini_models(&body, model))
            }
            WireFormat::OpenAi => {
                // The model list, then the native routes of the servers that speak OpenAI's
                // format too (Ollama, LM Studio, llama.cpp), each asked only while something
                // is still unknown; one that is not there answers 404 and says nothing.
                let ask = |b: reqwest::RequestBuilder, parse: fn(&[u8]) -> Discovered| async move {
                    self.exchange(ep, b).await.map(|body| parse(&body)).unwrap_or_default()
                };
                let body = self.exchange(ep, self.http.get(openai::models_endpoint(&ep.base_url))).await;
                let mut found = body.map(|b| discovery::from_openai_models(&b, model)).unwrap_or_default();
                if !found.is_complete() {
                    let show = self.http.post(openai::ollama_show_endpoint(&ep.base_url));
                    found = found.or(ask(
                        show.json(&serde_json::json!({ "model": model })),
                        discovery::from_ollama_show,
                    )
                    .await);
                }
                if !found.is_complete()
                    && model.bytes().all(|c| c.is_ascii_alphanumeric() || b"._:-".contains(&c))
                {
                    let native = openai::native_endpoint(&ep.base_url, &format!("api/v0/models/{model}"));
                    found = found.or(ask(self.http.get(native), discovery::from_lmstudio_model).await);
                }
                if found.context_window.is_none() || found.vision.is_none() {
                    let props = self.http.get(openai::native_endpoint(&ep.base_url, "props"));
                    found = found.or(ask(props, discovery::from_llamacpp_props).await);
                }
                Ok(found)
            }
        }
    }

    /// Embeddings of `inputs`, where the provider has an embeddings endpoint (`None`: it has
    /// none; Anthropic offers no embeddings).
    pub async fn embed(
        &self,
        ep: &Endpoint,
        model: &str,
        inputs: &[String],
    ) -> Result<Option<Embeddings>, ProviderError> {
        let (b, parse): (_, ParseFn<Embeddings>) = match ep.format {
            WireFormat::Anthropic => return Ok(None),
            WireFormat::OpenAi => (
                self.http
                    .post(openai::embeddings_endpoint(&ep.base_url))
                    .json(&openai::build_embeddings(model, inputs)),
                openai::parse_embeddings,
            ),
            WireFormat::Gemini => (
                self.http
                    .post(gemini::embeddings_endpoint(&ep.base_url, model))
                    .json(&gemini::build_embeddings(model, inputs)),
                gemini::parse_embeddings,
            ),
        };
        let body = self.exchange(ep, b).await?;
        let out = parse(&body).map_err(|e| parse_failure(&e))?;
        if out.vectors.len() != inputs.len() {
            return Err(parse_failure(&StreamParseError(
                "the provider returned a different number of embeddings".into(),
            )));
        }
        Ok(Some(out))
    }

    /// The error an unsuccessful answer stands for, read from its body in `ep`'s format, with
    /// the key taken out of its message.
    fn refusal(ep: &Endpoint, status: u16, retry_after: Option<&str>, body: &[u8]) -> ProviderError {
        let mut err = match ep.format {
            WireFormat::OpenAi => openai::parse_error(status, retry_after, body),
            WireFormat::Anthropic => anthropic::parse_error(status, retry_after, body),
            WireFormat::Gemini => gemini::parse_error(status, retry_after, body),
        };
        err.message = redact(&err.message, &ep.api_key);
        err
    }

    /// One attempt: the HTTP exchange, then events up to and including the first content event.
    async fn attempt(
        &self,
        ep: &Endpoint,
        req: &ChatRequest,
    ) -> Result<(Vec<ProviderEvent>, Reading), ProviderError> {
        // The idle timeout also bounds the wait for the response headers: a provider that
        // accepts the connection and then says nothing must not hold the run forever.
        let out = Self::outgoing(ep, req)?;
        let res = match tokio::time::timeout(self.idle_timeout, self.send(out)).await {
            Ok(sent) => sent.map_err(|e| transport_error(e.timeout))?,
            Err(_) => return Err(idle_timeout_error()),
        };
        if !is_success(res.status) {
            let read = read_capped(res.body, res.content_length, MAX_ERROR_BYTES, true);
            let body = tokio::time::timeout(self.idle_timeout, read)
                .await
                .ok()
                .and_then(Result::ok)
                .unwrap_or_default();
            return Err(Self::refusal(ep, res.status, res.retry_after.as_deref(), &body));
        }
        let decoder = if ep.via_responses(req) {
            Decoder::OpenAiResponses(openai::responses::StreamDecoder::new())
        } else {
            Decoder::new(ep.format)
        };
        let mut reading = Reading::new(res.body, decoder, self.idle_timeout, ep.api_key.clone());
        let mut held = Vec::new();
        while let Some(ev) = reading.next().await {
            if let ProviderEvent::Error(e) = ev {
                // Nothing shown yet: the caller may retry.
                return Err(e);
            }
            let content = is_content(&ev);
            held.push(ev);
            if content || matches!(held.last(), Some(ProviderEvent::Finish(_))) {
                break;
            }
        }
        Ok((held, reading))
    }

    /// Streams a chat request, retrying before the first content event as the policy allows.
    pub async fn stream(
        &self,
        ep: &Endpoint,
        req: &ChatRequest,
        policy: &RetryPolicy,
    ) -> Result<EventStream, ProviderError> {
        let mut attempt = 0;
        loop {
            attempt += 1;
            match self.attempt(ep, req).await {
                Ok((held, reading)) => {
                    return Ok(Box::pin(futures_util::stream::iter(held).chain(reading)));
                }
                Err(e) if e.retryable && attempt < policy.max_attempts => {
                    let backoff = policy.base_delay.saturating_mul(1 << (attempt - 1).min(10));
                    let wait =
                        e.retry_after_secs.map(Duration::from_secs).unwrap_or(backoff).min(policy.max_delay);
                    // Up to a quarter of jitter, so many clients do not retry in step.
                    let jitter = wait.mul_f64(rand::random::<f64>() * 0.25);
                    tracing::info!(attempt, status = e.status, kind = %e.kind, wait_ms = (wait + jitter).as_millis() as u64, "provider call retried");
                    tokio::time::sleep(wait + jitter).await;
                }
                Err(e) => return Err(e),
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn redaction_hides_keys_and_key_parameters() {
        let key = Secret::new("sk-ARBOR-CANARY-42");
        let msg = "bad key sk-ARBOR-CANARY-42 at https://x/models?key=AIzaSECRET&alt=sse and key=other";
        let out = redact(msg, &key);
        assert!(!out.contains("sk-ARBOR-CANARY-42") && !out.contains("AIzaSECRET") && !out.contains("other"));
        assert!(out.contains("key=****&alt=sse"));
        assert_eq!(redact("no secrets", &Secret::new("")), "no secrets");
    }
}
