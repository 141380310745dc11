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
        format!("URL: {url}\nStatus: 200 OK\n\n# Hello & welcome\n\nSee the docs (https://example.com/).\n")
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
    let s =
        server("127.0.0.1", canned("200 OK", &["Content-Type: text/plain"], b"plain <b>text</b>\n")).await;
    let out = get(&env, &format!("http://127.0.0.1:{}/a.txt", s.addr.port())).await;
    assert!(out.content.ends_with("Status: 200 OK\n\nplain <b>text</b>\n"), "{}", out.content);
    let s = server("127.0.0.1", canned("200 OK", &["Content-Type: application/vnd.api+json"], b"{\"a\":1}"))
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
    let s = server("127.0.0.1", canned("200 OK", &["Content-Type: image/png"], b"\x89PNG\r\n\x1a\n")).await;
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
    assert!(out.content.ends_with("\n\néééééééééé\n[text cut at 10 of 15 characters]"), "{}", out.content);
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
    let s =
        server("127.0.0.1", canned("404 Not Found", &["Content-Type: text/html"], b"<h1>No such page</h1>"))
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
        server("127.0.0.2", canned("301 Moved Permanently", &["Location: file:///etc/passwd"], b"")).await;
    let out = get(&env("127.0.0.2/32"), &format!("http://127.0.0.2:{}/", bad.addr.port())).await;
    assert!(out.is_error && out.content.contains("Only http and https URLs are allowed."), "{}", out.content);
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
    assert_eq!(classify(Some("application/octet-stream")), Kind::Other("application/octet-stream".into()));
}
