//! web_fetch: GET a member-controlled URL through the SSRF guard and return readable text.
//!
//! Every hop is checked by [`check_url`] and fetched with a client pinned to the checked addresses
//! ([`pinned_client`]); redirects are followed by hand so each target is checked again. The body is
//! streamed and cut at the download cap; only text types are returned (HTML turned into text).

use std::time::Duration;

use reqwest::Url;
use reqwest::header::{ACCEPT, CONTENT_TYPE, LOCATION};
use serde_json::Value;

use super::html::html_to_text;
use super::{Args, FetchLimits, ToolEnv, ToolOutput, WEB_FETCH};
use crate::netguard::{MAX_REDIRECTS, check_url, next_hop, pinned_client};

const USER_AGENT: &str = concat!("Arbor/", env!("CARGO_PKG_VERSION"), " (web_fetch)");

/// How much of an error page is shown.
const ERROR_SNIPPET_BYTES: usize = 4096;
const ERROR_SNIPPET_CHARS: usize = 500;

/// Runs the call; every failure is an error output.
pub(super) async fn web_fetch(arguments: &Value, env: &ToolEnv) -> ToolOutput {
    fetch(arguments, &env.fetch).await.into()
}

async fn fetch(arguments: &Value, limits: &FetchLimits) -> Result<ToolOutput, String> {
    let args = Args::new(WEB_FETCH, arguments, &["url"])?;
    let url = args.string("url")?.trim();
    if url.is_empty() {
        return Err("The url is empty; give an http or https URL.".to_string());
    }
    let url = github_raw(url).unwrap_or_else(|| url.to_string());
    match tokio::time::timeout(limits.timeout, follow(&url, limits)).await {
        Ok(result) => result,
        Err(_) => Err(format!("Fetching {url} timed out after {} s.", secs(limits.timeout))),
    }
}

fn secs(d: Duration) -> String {
    if d.subsec_millis() == 0 { d.as_secs().to_string() } else { format!("{:.1}", d.as_secs_f64()) }
}

/// `https://github.com/{owner}/{repo}/blob/{ref}/{path}` as its raw file URL, or None for any other URL.
pub(crate) fn github_raw(url: &str) -> Option<String> {
    let parsed = Url::parse(url).ok()?;
    let host = parsed.host_str()?;
    if !matches!(parsed.scheme(), "http" | "https")
        || !(host.eq_ignore_ascii_case("github.com") || host.eq_ignore_ascii_case("www.github.com"))
        || !parsed.username().is_empty()
        || parsed.password().is_some()
        || parsed.port().is_some()
    {
        return None;
    }
    let segments: Vec<&str> = parsed.path_segments()?.collect();
    match segments.as_slice() {
        [owner, repo, "blob", reference, rest @ ..]
            if !rest.is_empty()
                && !rest.iter().all(|s| s.is_empty())
                && !owner.is_empty()
                && !repo.is_empty() =>
        {
            Some(format!("https://raw.githubusercontent.com/{owner}/{repo}/{reference}/{}", rest.join("/")))
        }
        _ => None,
    }
}

/// Fetches `url`, following up to [`MAX_REDIRECTS`] redirects, each checked like the first URL.
async fn follow(url: &str, limits: &FetchLimits) -> Result<ToolOutput, String> {
    let mut current = url.to_string();
    for hop in 0..=MAX_REDIRECTS {
        let target = check_url(&current, &limits.allowed).await.map_err(|e| {
            if hop == 0 {
                format!("Refused to fetch {current}: {e}")
            } else {
                format!("The page redirected to {current}, which was refused: {e}")
            }
        })?;
        let builder = reqwest::Client::builder().user_agent(USER_AGENT).connect_timeout(limits.timeout);
        let client = pinned_client(&target, builder)
            .map_err(|e| format!("Could not prepare the request for {current}: {}.", describe(e)))?;
        let response = client
            .get(target.url.clone())
            .header(ACCEPT, "text/html,application/xhtml+xml,text/plain;q=0.9,*/*;q=0.5")
            .send()
            .await
            .map_err(|e| format!("Fetching {current} failed: {}.", describe(e)))?;
        let status = response.status().as_u16();
        if matches!(status, 301 | 302 | 303 | 307 | 308)
            && let Some(location) = response.headers().get(LOCATION)
        {
            if hop == MAX_REDIRECTS {
                break;
            }
            let location = location
                .to_str()
                .map_err(|_| format!("{current} redirected to a location that is not valid text."))?;
            current = next_hop(&target.url, location)
                .map_err(|e| format!("{current} redirected to a URL that was refused: {e}"))?
                .to_string();
            continue;
        }
        return read(response, &target.url, limits).await;
    }
    Err(format!("Too many redirects: {url} redirected more than {MAX_REDIRECTS} times; stopped."))
}

/// The message of a reqwest error and its causes, without the URL (the caller names it).
fn describe(err: reqwest::Error) -> String {
    if err.is_timeout() {
        return "the request timed out".to_string();
    }
    let err = err.without_url();
    let mut text = err.to_string();
    let mut source = std::error::Error::source(&err);
    while let Some(cause) = source {
        text.push_str(": ");
        text.push_str(&cause.to_string());
        source = cause.source();
    }
    text
}

/// How a body is turned into text.
#[derive(Debug, PartialEq, Eq)]
enum Kind {
    Html,
    Text,
    /// No Content-Type: decided from the bytes.
    Unknown,
    /// Not text.
    Other(String),
}

fn classify(content_type: Option<&str>) -> Kind {
    let Some(mime) = content_type.and_then(|t| t.split(';').next()).map(|t| t.trim().to_ascii_lowercase())
    else {
        return Kind::Unknown;
    };
    match mime.as_str() {
        "" => Kind::Unknown,
        "text/html" | "application/xhtml+xml" => Kind::Html,
        m if m.starts_with("text/")
            || m.ends_with("+json")
            || m.ends_with("+xml")
            || matches!(
                m,
                "application/json"
                    | "application/xml"
                    | "application/javascript"
                    | "application/x-javascript"
                    | "application/ecmascript"
                    | "application/x-ndjson"
                    | "application/yaml"
                    | "application/x-yaml"
                    | "application/toml"
                    | "application/x-sh"
                    | "application/csv"
                    | "application/sql"
                    | "application/graphql"
            ) =>
        {
            Kind::Text
        }
        m => Kind::Other(m.to_string()),
    }
}

/// Reads up to `max` bytes of the body; says whether there was more.
async fn body(response: &mut reqwest::Response, max: usize) -> Result<(Vec<u8>, bool), reqwest::Error> {
    let mut body = Vec::new();
    while let Some(chunk) = response.chunk().await? {
        let room = max - body.len();
        if chunk.len() > room {
            body.extend_from_slice(&chunk[..room]);
            return Ok((body, true));
        }
        body.extend_from_slice(&chunk);
    }
    Ok((body, false))
}

async fn read(
    mut response: reqwest::Response,
    url: &Url,
    limits: &FetchLimits,
) -> Result<ToolOutput, String> {
    let status = response.status();
    let content_type = response.headers().get(CONTENT_TYPE).and_then(|v| v.to_str().ok()).map(str::to_string);
    let mut kind = classify(content_type.as_deref());

    if !status.is_success() {
        let mut message = format!("{url} answered HTTP {status}.");
        if matches!(kind, Kind::Html | Kind::Text)
            && let Ok((bytes, _)) = body(&mut response, ERROR_SNIPPET_BYTES).await
        {
            let text = String::from_utf8_lossy(&bytes);
            let text = if kind == Kind::Html { html_to_text(&text) } else { text.into_owned() };
            let snippet: String = text.trim().chars().take(ERROR_SNIPPET_CHARS).collect();
            if !snippet.is_empty() {
                message.push_str("\n\n");
                message.push_str(&snippet);
            }
        }
        return Err(message);
    }
    if let Kind::Other(mime) = &kind {
        return Err(format!("{url} is {mime}, not text; web_fetch only returns text and HTML pages."));
    }
    let (bytes, cut) = body(&mut response, limits.max_bytes)
        .await
        .map_err(|e| format!("Reading {url} failed: {}.", describe(e)))?;
    if kind == Kind::Unknown {
        if bytes.iter().take(1024).any(|&b| b == 0) {
            return Err(format!("{url} has no content type and looks binary; web_fetch only returns text."));
        }
        let start = String::from_utf8_lossy(&bytes[..bytes.len().min(512)]).trim_start().to_ascii_lowercase();
        kind = if start.starts_with("<!doctype html") || start.starts_with("<html") {
            Kind::Html
        } else {
            Kind::Text
        };
    }
    let raw = String::from_utf8_lossy(&bytes);
    let mut text = if kind == Kind::Html { html_to_text(&raw) } else { raw.into_owned() };

    let mut notes = Vec::new();
    if cut {
        notes.push(format!("[download stopped at {} bytes; the rest was not fetched]", limits.max_bytes));
    }
    if let Some((at, _)) = text.char_indices().nth(limits.max_text_chars) {
        let total = text.chars().count();
        text.truncate(at);
        notes.push(format!("[text cut at {} of {total} characters]", limits.max_text_chars));
    }
    let mut content = format!("URL: {url}\nStatus: {status}\n\n{text}");
    for note in notes {
        if !content.ends_with('\n') {
            content.push('\n');
        }
        content.push_str(&note);
    }
    Ok(ToolOutput::ok(content))
}

#[cfg(test)]
mod tests {
    use std::net::SocketAddr;
    use std::sync::atomic::{AtomicUsize, Ordering};
    use std::sync::{Arc, Mutex};
    use std::time::Instant;

    use serde_json::json;
    use tokio::io::{AsyncReadExt, AsyncWriteExt};

    use super::*;
    use crate::netguard::AllowedRanges;
    use crate::tools::run_builtin;

    type Respond = dyn Fn(&str) -> Option<Vec<u8>> + Send + Sync;

    /// A canned HTTP/1.1 server counting connections; `None` from `respond` means never answer.
    struct Server {
        addr: SocketAddr,
        hits: Arc<AtomicUsize>,
        requests: Arc<Mutex<Vec<String>>>,
    }

    async fn server(ip: &str, respond: Arc<Respond>) -> Server {
        let listener = tokio::net::TcpListener::bind((ip, 0)).await.unwrap();
        let addr = listener.local_addr().unwrap();
        let hits = Arc::new(AtomicUsize::new(0));
        let requests = Arc::new(Mutex::new(Vec::new()));
        let (h, r) = (hits.clone(), requests.clone());
        tokio::spawn(async move {
            loop {
                let Ok((mut socket, _)) = listener.accept().await else { return };
                h.fetch_add(1, Ordering::SeqCst);
                let (respond, r) = (respond.clone(), r.clone());
                tokio::spawn(async move {
                    let mut request = Vec::new();
                    let mut buf = [0u8; 4096];
                    while !request.windows(4).any(|w| w == b"\r\n\r\n") {
                        match socket.read(&mut buf).await {
                            Ok(0) | Err(_) => return,
                            Ok(n) => request.extend_from_slice(&buf[..n]),
                        }
                    }
                    let request = String::from_utf8_lossy(&request).into_owned();
                    r.lock().unwrap().push(request.clone());
                    match respond(&request) {
                        Some(bytes) => {
                            let _ = socket.write_all(&bytes).await;
                            let _ = socket.shutdown().await;
                        }
                        None => tokio::time::sleep(Duration::from_secs(60)).await,
                    }
                });
            }
        });
        Server { addr, hits, requests }
    }

    fn response(status: &str, headers: &[&str], body: &[u8]) -> Vec<u8> {
        let mut out = format!("HTTP/1.1 {status}\r\nConnection: close\r\n").into_bytes();
        for h in headers {
            out.extend_from_slice(format!("{h}\r\n").as_bytes());
        }
        out.extend_from_slice(b"\r\n");
        out.extend_from_slice(body);
        out
    }

    fn canned(status: &'static str, headers: &'static [&'static str], body: &'static [u8]) -> Arc<Respond> {
        Arc::new(move |_| Some(response(status, headers, body)))
    }

    fn env(allowed: &str) -> ToolEnv {
        let _ = rustls::crypto::ring::default_provider().install_default();
        let mut env = ToolEnv::default();
        env.fetch.allowed = AllowedRanges::parse(allowed).unwrap();
        env
    }

    async fn get(env: &ToolEnv, url: &str) -> ToolOutput {
        run_builtin("web_fetch", &json!({"url": url}), env).await
    }

    #[tokio::test]
    async fn html_becomes_text() {
        let s = server(
            "127.0.0.1",
            canned(
                "200 OK",
                &["Content-Type: text/html; charset=utf-8"],
                b"<html><head><title>T</title><script>x()</script></head><body><h1>Hello &amp; welcome</h1>\
                  <p>See <a href=\"https://example.com/\">the docs</a>.</p></body></html>",
            ),
        )
        .await;
        let url = format!("http://127.0.0.1:{}/page?q=1", s.addr.port());
        let out = get(&env("127.0.0.0/8"), &url).await;
        assert!(!out.is_error, "{}", out.content);
        assert_eq!(
            out.content,
            format!(
                "URL: {url}\nStatus: 200 OK\n\n# Hello & welcome\n\nSee the docs (https://example.com/).\n"
            )
        );
        let request = s.requests.lock().unwrap()[0].to_ascii_lowercase();
        assert!(request.starts_with("get /page?q=1 http/1.1\r\n"), "{request}");
        assert!(
            request.contains(&format!("user-agent: arbor/{} (web_fetch)\r\n", env!("CARGO_PKG_VERSION"))),
            "{request}"
        );
    }

    #[tokio::test]
    async fn text_and_json_are_returned_as_is() {
        let env = env("127.0.0.0/8");
        let s = server("127.0.0.1", canned("200 OK", &["Content-Type: text/plain"], b"plain <b>text</b>\n"))
            .await;
        let out = get(&env, &format!("http://127.0.0.1:{}/a.txt", s.addr.port())).await;
        assert!(out.content.ends_with("Status: 200 OK\n\nplain <b>text</b>\n"), "{}", out.content);
        let s =
            server("127.0.0.1", canned("200 OK", &["Content-Type: application/vnd.api+json"], b"{\"a\":1}"))
                .await;
        let out = get(&env, &format!("http://127.0.0.1:{}/", s.addr.port())).await;
        assert!(!out.is_error && out.content.ends_with("\n\n{\"a\":1}"), "{}", out.content);
        // No content type: sniffed.
        let s = server("127.0.0.1", canned("200 OK", &[], b"  <!DOCTYPE html><p>sniffed</p>")).await;
        let out = get(&env, &format!("http://127.0.0.1:{}/", s.addr.port())).await;
        assert!(out.content.ends_with("\n\nsniffed\n"), "{}", out.content);
        let s = server("127.0.0.1", canned("200 OK", &[], b"\x00\x01\x02")).await;
        let out = get(&env, &format!("http://127.0.0.1:{}/", s.addr.port())).await;
        assert!(out.is_error && out.content.contains("looks binary"), "{}", out.content);
        // Invalid UTF-8 is replaced, not an error.
        let s = server("127.0.0.1", canned("200 OK", &["Content-Type: text/plain"], b"caf\xe9")).await;
        let out = get(&env, &format!("http://127.0.0.1:{}/", s.addr.port())).await;
        assert!(out.content.ends_with("caf\u{FFFD}"), "{}", out.content);
    }

    #[tokio::test]
    async fn binary_is_refused() {
        let s =
            server("127.0.0.1", canned("200 OK", &["Content-Type: image/png"], b"\x89PNG\r\n\x1a\n")).await;
        let url = format!("http://127.0.0.1:{}/logo.png", s.addr.port());
        let out = get(&env("127.0.0.0/8"), &url).await;
        assert!(out.is_error);
        assert_eq!(
            out.content,
            format!("{url} is image/png, not text; web_fetch only returns text and HTML pages.")
        );
    }

    #[tokio::test]
    async fn size_and_text_caps() {
        let mut env = env("127.0.0.0/8");
        env.fetch.max_bytes = 1000;
        let s = server(
            "127.0.0.1",
            Arc::new(|_| Some(response("200 OK", &["Content-Type: text/plain"], &[b'a'; 50_000]))),
        )
        .await;
        let out = get(&env, &format!("http://127.0.0.1:{}/", s.addr.port())).await;
        assert!(!out.is_error, "{}", out.content);
        assert!(
            out.content.contains(&format!("\n\n{}\n[download stopped at 1000 bytes;", "a".repeat(1000))),
            "{}",
            out.content
        );
        env.fetch.max_bytes = 100_000;
        env.fetch.max_text_chars = 10;
        let s = server(
            "127.0.0.1",
            canned("200 OK", &["Content-Type: text/plain; charset=utf-8"], "ééééééééééééééé".as_bytes()),
        )
        .await;
        let out = get(&env, &format!("http://127.0.0.1:{}/", s.addr.port())).await;
        assert!(
            out.content.ends_with("\n\néééééééééé\n[text cut at 10 of 15 characters]"),
            "{}",
            out.content
        );
    }

    #[tokio::test]
    async fn a_server_that_never_answers_times_out() {
        let mut env = env("127.0.0.0/8");
        env.fetch.timeout = Duration::from_secs(1);
        let s = server("127.0.0.1", Arc::new(|_| None)).await;
        let url = format!("http://127.0.0.1:{}/slow", s.addr.port());
        let started = Instant::now();
        let out = get(&env, &url).await;
        assert!(started.elapsed() < Duration::from_secs(5));
        assert!(out.is_error);
        assert_eq!(out.content, format!("Fetching {url} timed out after 1 s."));
        assert_eq!(s.hits.load(Ordering::SeqCst), 1);
    }

    #[tokio::test]
    async fn non_2xx_is_an_error_with_the_status() {
        let s = server(
            "127.0.0.1",
            canned("404 Not Found", &["Content-Type: text/html"], b"<h1>No such page</h1>"),
        )
        .await;
        let url = format!("http://127.0.0.1:{}/missing", s.addr.port());
        let out = get(&env("127.0.0.0/8"), &url).await;
        assert!(out.is_error);
        assert_eq!(out.content, format!("{url} answered HTTP 404 Not Found.\n\n# No such page"));
        let s = server("127.0.0.1", canned("500 Internal Server Error", &[], b"")).await;
        let out = get(&env("127.0.0.0/8"), &format!("http://127.0.0.1:{}/", s.addr.port())).await;
        assert!(
            out.is_error && out.content.ends_with("answered HTTP 500 Internal Server Error."),
            "{}",
            out.content
        );
    }

    #[tokio::test]
    async fn private_addresses_are_refused_without_connecting() {
        let s = server("127.0.0.1", canned("200 OK", &["Content-Type: text/plain"], b"secret")).await;
        let url = format!("http://127.0.0.1:{}/", s.addr.port());
        let out = get(&env(""), &url).await;
        assert!(out.is_error);
        assert_eq!(
            out.content,
            format!("Refused to fetch {url}: This address is not allowed: 127.0.0.1 is a loopback address.")
        );
        let out = get(&env(""), &format!("http://localhost:{}/", s.addr.port())).await;
        assert!(out.is_error && out.content.contains("loopback host name"), "{}", out.content);
        tokio::time::sleep(Duration::from_millis(100)).await;
        assert_eq!(s.hits.load(Ordering::SeqCst), 0);
    }

    #[tokio::test]
    async fn every_redirect_hop_is_checked_again() {
        let inner = server("127.0.0.1", canned("200 OK", &["Content-Type: text/plain"], b"internal")).await;
        let target = format!("http://127.0.0.1:{}/", inner.addr.port());
        let location: &'static str = Box::leak(format!("Location: {target}").into_boxed_str());
        let outer = server(
            "127.0.0.2",
            Arc::new(move |_| Some(response("302 Found", &[location, "Content-Length: 0"], b""))),
        )
        .await;
        let url = format!("http://127.0.0.2:{}/start", outer.addr.port());
        let out = get(&env("127.0.0.2/32"), &url).await;
        assert!(out.is_error);
        assert_eq!(
            out.content,
            format!(
                "The page redirected to {target}, which was refused: This address is not allowed: 127.0.0.1 is a loopback address."
            )
        );
        assert_eq!(outer.hits.load(Ordering::SeqCst), 1);
        assert_eq!(inner.hits.load(Ordering::SeqCst), 0);
        // A redirect to a file: URL is refused by the hop check itself.
        let bad =
            server("127.0.0.2", canned("301 Moved Permanently", &["Location: file:///etc/passwd"], b""))
                .await;
        let out = get(&env("127.0.0.2/32"), &format!("http://127.0.0.2:{}/", bad.addr.port())).await;
        assert!(
            out.is_error && out.content.contains("Only http and https URLs are allowed."),
            "{}",
            out.content
        );
    }

    #[tokio::test]
    async fn allowed_redirects_are_followed_and_loops_stop() {
        let env = env("127.0.0.0/8");
        let s = server(
            "127.0.0.1",
            Arc::new(|req: &str| {
                Some(if req.starts_with("GET /final ") {
                    response("200 OK", &["Content-Type: text/plain"], b"arrived")
                } else if req.starts_with("GET /loop ") {
                    response("307 Temporary Redirect", &["Location: /loop"], b"")
                } else {
                    response("302 Found", &["Location: /final"], b"")
                })
            }),
        )
        .await;
        let out = get(&env, &format!("http://127.0.0.1:{}/start", s.addr.port())).await;
        assert_eq!(
            out.content,
            format!("URL: http://127.0.0.1:{}/final\nStatus: 200 OK\n\narrived", s.addr.port())
        );
        let before = s.hits.load(Ordering::SeqCst);
        let out = get(&env, &format!("http://127.0.0.1:{}/loop", s.addr.port())).await;
        assert!(out.is_error && out.content.to_lowercase().contains("too many redirects"), "{}", out.content);
        assert_eq!(s.hits.load(Ordering::SeqCst) - before, MAX_REDIRECTS + 1);
    }

    #[tokio::test]
    async fn bad_urls_and_arguments() {
        let env = env("127.0.0.0/8");
        for (url, expect) in [
            ("file:///etc/passwd", "Only http and https URLs are allowed."),
            ("gopher://127.0.0.1/", "Only http and https URLs are allowed."),
            ("http://user@127.0.0.1/", "URLs with a user name or password are not allowed."),
            ("http://user:pw@127.0.0.1/", "URLs with a user name or password are not allowed."),
            ("not a url", "This is not a valid URL."),
            ("http://169.254.169.254/latest/meta-data", "cloud metadata address"),
            ("", "The url is empty"),
        ] {
            let out = get(&env, url).await;
            assert!(out.is_error && out.content.contains(expect), "{url}: {}", out.content);
        }
        let out = run_builtin("web_fetch", &json!({}), &env).await;
        assert_eq!(out.content, "web_fetch needs the argument \"url\" (a string).");
        let out = run_builtin("web_fetch", &json!({"url": ["http://x/"]}), &env).await;
        assert_eq!(out.content, "The argument \"url\" must be a string, not an array.");
    }

    #[test]
    fn github_blob_urls_become_raw_urls() {
        assert_eq!(
            github_raw("https://github.com/rust-lang/rust/blob/master/src/lib%20x.rs?plain=1#L10").as_deref(),
            Some("https://raw.githubusercontent.com/rust-lang/rust/master/src/lib%20x.rs")
        );
        assert_eq!(
            github_raw("https://www.github.com/o/r/blob/v1.0/a/b/c.md").as_deref(),
            Some("https://raw.githubusercontent.com/o/r/v1.0/a/b/c.md")
        );
        for url in [
            "https://github.com/o/r",
            "https://github.com/o/r/tree/main/src",
            "https://github.com/o/r/blob/main",
            "https://github.com/o/r/blob/main/",
            "https://gist.github.com/o/r/blob/main/a.rs",
            "https://github.com.evil.test/o/r/blob/main/a.rs",
            "https://user@github.com/o/r/blob/main/a.rs",
            "https://github.com:8443/o/r/blob/main/a.rs",
            "ftp://github.com/o/r/blob/main/a.rs",
            "not a url",
        ] {
            assert_eq!(github_raw(url), None, "{url}");
        }
    }

    #[test]
    fn content_types() {
        assert_eq!(classify(Some("text/html; charset=utf-8")), Kind::Html);
        assert_eq!(classify(Some("Application/XHTML+XML")), Kind::Html);
        assert_eq!(classify(Some("text/markdown")), Kind::Text);
        assert_eq!(classify(Some("application/atom+xml")), Kind::Text);
        assert_eq!(classify(Some("application/json")), Kind::Text);
        assert_eq!(classify(None), Kind::Unknown);
        assert_eq!(classify(Some("")), Kind::Unknown);
        assert_eq!(classify(Some("application/pdf")), Kind::Other("application/pdf".into()));
        assert_eq!(
            classify(Some("application/octet-stream")),
            Kind::Other("application/octet-stream".into())
        );
    }
}
