//! A streamed request to a provider and the connection that carries it.
//!
//! Streamed calls go through a hyper client of Arbor's own when they can, not through
//! reqwest's: with many streams on a busy core the chunks queue in each socket, and hyper's
//! adaptive read buffer then doubles on every full read up to 64 KiB a connection, kept while
//! the connection lives (half of the heap at 1,000 streams; BENCHMARKS step 17). reqwest has
//! no setting for that buffer; hyper's `max_buf_size` bounds it. A call that a proxy from the
//! environment would carry, and every call of a pinned client (the SSRF guard's addresses),
//! stays on reqwest, which does both.

use std::pin::Pin;
use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use futures_util::{Stream, StreamExt};
use http::{HeaderMap, HeaderValue, header};
use http_body_util::{BodyDataStream, Full};
use hyper_rustls::HttpsConnector;
use hyper_util::client::legacy::Client;
use hyper_util::client::legacy::connect::HttpConnector;
use hyper_util::client::proxy::matcher::Matcher;
use hyper_util::rt::{TokioExecutor, TokioTimer};

/// The largest read buffer of a streamed connection, hyper's smallest: far more than one
/// chunk, and room for 8 KiB of response headers (nginx's own default limit for what it reads
/// of an upstream's headers is 4 or 8 KiB). With 16 KiB a stream at 1,000 held 25 KB of read
/// buffer (BENCHMARKS step 18).
const MAX_READ_BUFFER: usize = 8 * 1024;

/// A request ready to send: where, its headers and its JSON body.
pub(super) struct Outgoing {
    pub url: String,
    pub headers: HeaderMap,
    pub body: Bytes,
}

/// The connection failed or timed out.
#[derive(Debug, Clone, Copy)]
pub(super) struct Broken {
    pub timeout: bool,
}

impl Broken {
    /// A timeout when any error in the chain is one.
    fn of(e: &(dyn std::error::Error + 'static)) -> Broken {
        let mut cur = Some(e);
        while let Some(err) = cur {
            if err
                .downcast_ref::<std::io::Error>()
                .is_some_and(|io| io.kind() == std::io::ErrorKind::TimedOut)
            {
                return Broken { timeout: true };
            }
            cur = err.source();
        }
        Broken { timeout: false }
    }
}

/// An answer's body, chunk by chunk.
pub(super) type Body = Pin<Box<dyn Stream<Item = Result<Bytes, Broken>> + Send>>;

/// An answer: its status, its `retry-after`, its length when announced, and its body.
pub(super) struct Incoming {
    pub status: u16,
    pub retry_after: Option<String>,
    pub content_length: Option<u64>,
    pub body: Body,
}

fn retry_after(headers: &HeaderMap) -> Option<String> {
    headers.get(header::RETRY_AFTER).and_then(|v| v.to_str().ok()).map(str::to_string)
}

/// How connections are made and kept.
struct Pool {
    connect_timeout: Duration,
    idle_per_host: usize,
    idle_timeout: Duration,
}

/// Connections made by Arbor's own hyper client (see the module's comment).
#[derive(Clone)]
pub(super) struct Direct {
    client: Client<HttpsConnector<HttpConnector>, Full<Bytes>>,
    /// The environment's proxy settings, read once as reqwest reads them.
    proxies: Arc<Matcher>,
}

impl Direct {
    /// A client with reqwest's connection settings: TCP keep-alive and no delay, the platform's
    /// certificate verifier, HTTP/2 where the server offers it, few idle connections kept briefly,
    /// and the environment's proxy settings.
    pub(super) fn new(
        connect_timeout: Duration,
        idle_per_host: usize,
        idle_timeout: Duration,
    ) -> Result<Direct, String> {
        // No ALPN here: the connector offers its own (HTTP/2 and HTTP/1.1).
        let tls = crate::tls::client_config(&[])?;
        let pool = Pool { connect_timeout, idle_per_host, idle_timeout };
        Ok(Direct::with(tls, Matcher::from_system(), &pool))
    }

    /// A client with this TLS configuration and these proxy settings.
    fn with(tls: rustls::ClientConfig, proxies: Matcher, pool: &Pool) -> Direct {
        let mut tcp = HttpConnector::new();
        tcp.enforce_http(false);
        tcp.set_nodelay(true);
        tcp.set_keepalive(Some(Duration::from_secs(15)));
        tcp.set_connect_timeout(Some(pool.connect_timeout));
        let connector = hyper_rustls::HttpsConnectorBuilder::new()
            .with_tls_config(tls)
            .https_or_http()
            .enable_all_versions()
            .wrap_connector(tcp);
        let client = Client::builder(TokioExecutor::new())
            .pool_timer(TokioTimer::new())
            .pool_max_idle_per_host(pool.idle_per_host)
            .pool_idle_timeout(pool.idle_timeout)
            .http1_max_buf_size(MAX_READ_BUFFER)
            .build(connector);
        Direct { client, proxies: Arc::new(proxies) }
    }

    /// The URL as hyper takes it, when this client may carry it: no proxy of the environment
    /// applies to it.
    pub(super) fn carries(&self, url: &str) -> Option<http::Uri> {
        let uri =
            url.parse::<http::Uri>().ok().filter(|u| u.scheme().is_some() && u.authority().is_some())?;
        self.proxies.intercept(&uri).is_none().then_some(uri)
    }

    /// POSTs `out` to `uri`.
    pub(super) async fn post(&self, uri: http::Uri, out: Outgoing) -> Result<Incoming, Broken> {
        let mut req = http::Request::new(Full::new(out.body));
        *req.method_mut() = http::Method::POST;
        *req.uri_mut() = uri;
        *req.headers_mut() = out.headers;
        let res = self.client.request(req).await.map_err(|e| Broken::of(&e))?;
        let status = res.status().as_u16();
        let retry_after = retry_after(res.headers());
        let content_length = hyper::body::Body::size_hint(res.body()).exact();
        let body = BodyDataStream::new(res.into_body()).map(|r| r.map_err(|e| Broken::of(&e)));
        Ok(Incoming { status, retry_after, content_length, body: Box::pin(body) })
    }
}

/// POSTs `out` through reqwest.
pub(super) async fn post_with(http: &reqwest::Client, out: Outgoing) -> Result<Incoming, Broken> {
    let res = http
        .post(&out.url)
        .headers(out.headers)
        .body(out.body)
        .send()
        .await
        .map_err(|e| Broken { timeout: e.is_timeout() })?;
    Ok(from_reqwest(res))
}

/// A reqwest answer as an [`Incoming`].
pub(super) fn from_reqwest(res: reqwest::Response) -> Incoming {
    Incoming {
        status: res.status().as_u16(),
        retry_after: retry_after(res.headers()),
        content_length: res.content_length(),
        body: Box::pin(res.bytes_stream().map(|r| r.map_err(|e| Broken { timeout: e.is_timeout() }))),
    }
}

/// The headers every JSON request carries, as reqwest's `json()` and defaults would set them.
pub(super) fn json_headers() -> HeaderMap {
    let mut headers = HeaderMap::with_capacity(6);
    headers.insert(header::ACCEPT, HeaderValue::from_static("*/*"));
    headers.insert(header::CONTENT_TYPE, HeaderValue::from_static("application/json"));
    headers
}

#[cfg(test)]
mod tests;
