use std::sync::Arc;
use std::time::Duration;

use futures_util::StreamExt;
use http::{HeaderValue, header};
use rustls::pki_types::{CertificateDer, PrivateKeyDer, PrivatePkcs8KeyDer};
use tokio::io::{AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt};
use tokio::net::TcpListener;

use super::{Broken, Direct, Incoming, MAX_READ_BUFFER, Matcher, Outgoing, Pool, json_headers};

const POOL: Pool =
    Pool { connect_timeout: Duration::from_secs(5), idle_per_host: 4, idle_timeout: Duration::from_secs(5) };

fn tls_trusting(roots: &[CertificateDer<'static>]) -> rustls::ClientConfig {
    let mut store = rustls::RootCertStore::empty();
    for root in roots {
        store.add(root.clone()).expect("a test root");
    }
    rustls::ClientConfig::builder_with_provider(Arc::new(rustls::crypto::ring::default_provider()))
        .with_safe_default_protocol_versions()
        .expect("protocol versions")
        .with_root_certificates(store)
        .with_no_client_auth()
}

/// A client with no proxy and the given trusted roots.
fn direct(roots: &[CertificateDer<'static>]) -> Direct {
    Direct::with(tls_trusting(roots), Matcher::builder().build(), &POOL)
}

fn outgoing(url: String, body: &'static str) -> Outgoing {
    let mut headers = json_headers();
    let mut key = HeaderValue::from_static("Bearer sk-test");
    key.set_sensitive(true);
    headers.insert(header::AUTHORIZATION, key);
    Outgoing { url, headers, body: body.into() }
}

/// Reads one request (head and a body of its `Content-Length`), writes `response`, and returns
/// the request as text.
async fn answer_once<S: AsyncRead + AsyncWrite + Unpin>(mut socket: S, response: Vec<u8>) -> String {
    let mut request = Vec::new();
    let mut buf = [0u8; 4096];
    loop {
        let n = socket.read(&mut buf).await.expect("read the request");
        assert!(n > 0, "the client closed before its request was whole");
        request.extend_from_slice(&buf[..n]);
        let text = String::from_utf8_lossy(&request).to_ascii_lowercase();
        if let Some(end) = text.find("\r\n\r\n") {
            let length = text
                .lines()
                .find_map(|l| l.strip_prefix("content-length: "))
                .and_then(|v| v.trim().parse::<usize>().ok())
                .unwrap_or(0);
            if request.len() >= end + 4 + length {
                break;
            }
        }
    }
    // In pieces, as a stream arrives.
    for piece in response.chunks(3000) {
        socket.write_all(piece).await.expect("write the answer");
    }
    socket.shutdown().await.ok();
    String::from_utf8_lossy(&request).into_owned()
}

async fn read_all(res: Incoming) -> Result<Vec<u8>, Broken> {
    let mut body = res.body;
    let mut out = Vec::new();
    while let Some(chunk) = body.next().await {
        out.extend_from_slice(&chunk?);
    }
    Ok(out)
}

/// A body of 1 MiB, 64 times the read buffer, arrives whole and in order, and the request
/// carries what reqwest's would: the path, `Host`, JSON headers, the key and the body.
#[tokio::test]
async fn a_long_answer_arrives_whole_through_the_bounded_read_buffer() {
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let port = listener.local_addr().unwrap().port();
    let body: Vec<u8> = (0..1024 * 1024).map(|i| b"data: abcdefghij\n\n"[i % 18]).collect();
    let mut response = format!(
        "HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\nContent-Length: {}\r\n\r\n",
        body.len()
    )
    .into_bytes();
    response.extend_from_slice(&body);
    let server = tokio::spawn(async move {
        let (socket, _) = listener.accept().await.unwrap();
        answer_once(socket, response).await
    });
    let url = format!("http://127.0.0.1:{port}/v1/chat/completions");
    let uri = direct(&[]).carries(&url).expect("no proxy is set");
    let res = direct(&[]).post(uri, outgoing(url, r#"{"model":"m"}"#)).await.expect("the answer");
    assert_eq!(res.status, 200);
    assert_eq!(res.content_length, Some(body.len() as u64));
    assert_eq!(read_all(res).await.expect("the body"), body);
    let request = server.await.unwrap();
    let lower = request.to_ascii_lowercase();
    assert!(lower.starts_with("post /v1/chat/completions http/1.1\r\n"), "{request}");
    for line in [
        format!("host: 127.0.0.1:{port}"),
        "content-type: application/json".into(),
        "accept: */*".into(),
        "authorization: bearer sk-test".into(),
        "content-length: 13".into(),
    ] {
        assert!(lower.contains(&format!("{line}\r\n")), "{line} missing in {request}");
    }
    assert!(request.ends_with("\r\n\r\n{\"model\":\"m\"}"), "{request}");
}

/// Response headers longer than the bounded buffer are refused as a failed connection, with
/// no more than the bound read into memory; an error status comes back with its body.
#[tokio::test]
async fn headers_past_the_read_buffer_are_refused_and_an_error_status_is_read() {
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let port = listener.local_addr().unwrap().port();
    let big = "x".repeat(MAX_READ_BUFFER + 1024);
    let answers = [
        format!("HTTP/1.1 200 OK\r\nX-Padding: {big}\r\nContent-Length: 2\r\n\r\nok"),
        "HTTP/1.1 429 Too Many Requests\r\nRetry-After: 7\r\nContent-Length: 4\r\n\r\nslow".to_string(),
    ];
    let server = tokio::spawn(async move {
        for answer in answers {
            let (socket, _) = listener.accept().await.unwrap();
            answer_once(socket, answer.into_bytes()).await;
        }
    });
    let url = format!("http://127.0.0.1:{port}/v1/messages");
    let client = direct(&[]);
    let refused = client.post(client.carries(&url).unwrap(), outgoing(url.clone(), "{}")).await;
    assert!(matches!(refused, Err(Broken { timeout: false })), "{:?}", refused.err());
    let limited = client.post(client.carries(&url).unwrap(), outgoing(url, "{}")).await.expect("the answer");
    assert_eq!((limited.status, limited.retry_after.as_deref()), (429, Some("7")));
    assert_eq!(read_all(limited).await.expect("the body"), b"slow");
    server.await.unwrap();
}

/// TLS is verified: a certificate nobody vouches for is refused (by the platform's verifier,
/// as in production), and the same server is reached once its certificate is a trusted root.
#[tokio::test]
async fn a_tls_certificate_is_verified_before_anything_is_sent() {
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let issued = rcgen::generate_simple_self_signed(vec!["localhost".to_string()]).unwrap();
    let cert = issued.cert.der().clone();
    let key = PrivateKeyDer::Pkcs8(PrivatePkcs8KeyDer::from(issued.signing_key.serialize_der()));
    let server_tls = rustls::ServerConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()
        .unwrap()
        .with_no_client_auth()
        .with_single_cert(vec![cert.clone()], key)
        .unwrap();
    let acceptor = tokio_rustls::TlsAcceptor::from(Arc::new(server_tls));
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let port = listener.local_addr().unwrap().port();
    let server = tokio::spawn(async move {
        // The first handshake fails on the client's side; the second is served.
        let mut requests = Vec::new();
        while requests.is_empty() {
            let (socket, _) = listener.accept().await.unwrap();
            if let Ok(tls) = acceptor.accept(socket).await {
                let answer = b"HTTP/1.1 200 OK\r\nContent-Length: 6\r\n\r\nsecure".to_vec();
                requests.push(answer_once(tls, answer).await);
            }
        }
        requests
    });
    let url = format!("https://localhost:{port}/v1/chat/completions");
    let untrusted = Direct::new(Duration::from_secs(5), 4, Duration::from_secs(5)).unwrap();
    let uri: http::Uri = url.parse().unwrap();
    let refused = untrusted.post(uri.clone(), outgoing(url.clone(), "{}")).await;
    assert!(matches!(refused, Err(Broken { timeout: false })), "{:?}", refused.err());
    let trusted = direct(&[cert]);
    let res = trusted.post(uri, outgoing(url, "{}")).await.expect("the trusted server answers");
    assert_eq!(res.status, 200);
    assert_eq!(read_all(res).await.unwrap(), b"secure");
    let requests = server.await.unwrap();
    assert_eq!(requests.len(), 1, "the refused handshake sent no request");
    assert!(requests[0].to_ascii_lowercase().contains("authorization: bearer sk-test\r\n"));
}

/// A URL the environment's proxy would carry is left to reqwest (which goes through the proxy);
/// hosts the proxy settings exclude, schemes without a proxy, and the rest go direct.
#[test]
fn a_url_a_proxy_covers_is_left_to_reqwest() {
    let proxies = Matcher::builder().http("http://proxy.invalid:3128").no("localhost,.internal").build();
    let client = Direct::with(tls_trusting(&[]), proxies, &POOL);
    assert!(client.carries("http://api.example.com/v1/chat/completions").is_none());
    assert!(client.carries("http://localhost:11434/v1/chat/completions").is_some());
    assert!(client.carries("http://llm.internal/v1").is_some());
    assert!(client.carries("https://api.example.com/v1").is_some(), "no proxy for https here");
    assert!(client.carries("not a url").is_none(), "left to reqwest, which reports it");
    assert!(client.carries("localhost:8080").is_none(), "no scheme: left to reqwest");
}
