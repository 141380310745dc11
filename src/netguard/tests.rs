use super::*;

fn ip(s: &str) -> IpAddr {
    s.parse().unwrap()
}

async fn check(url: &str) -> Result<Target, GuardError> {
    check_url(url, &AllowedRanges::none()).await
}

#[test]
fn blocked_ranges() {
    for (addr, reason) in [
        ("127.0.0.1", LOOPBACK),
        ("127.255.255.254", LOOPBACK),
        ("::1", LOOPBACK),
        ("0.0.0.0", UNSPECIFIED),
        ("0.1.2.3", UNSPECIFIED),
        ("::", UNSPECIFIED),
        ("10.1.2.3", PRIVATE),
        ("172.16.0.1", PRIVATE),
        ("172.31.255.255", PRIVATE),
        ("192.168.1.1", PRIVATE),
        ("169.254.1.1", LINK_LOCAL),
        ("169.254.169.254", METADATA),
        ("fe80::1", LINK_LOCAL),
        ("febf::1", LINK_LOCAL),
        ("100.64.0.1", "a shared (carrier-grade NAT) address"),
        ("100.127.255.255", "a shared (carrier-grade NAT) address"),
        ("fc00::1", "a private (unique local) address"),
        ("fd12:3456::1", "a private (unique local) address"),
        ("fd00:ec2::254", METADATA),
        ("224.0.0.1", MULTICAST),
        ("239.255.255.250", MULTICAST),
        ("ff02::1", MULTICAST),
        ("255.255.255.255", "a broadcast address"),
        ("240.0.0.1", RESERVED),
        ("198.18.0.1", BENCHMARKING),
        ("198.19.255.255", BENCHMARKING),
        ("192.0.2.1", DOCUMENTATION),
        ("198.51.100.1", DOCUMENTATION),
        ("203.0.113.1", DOCUMENTATION),
        ("2001:db8::1", DOCUMENTATION),
        ("192.0.0.8", PROTOCOL),
        ("fec0::1", "a site-local address"),
        ("::ffff:127.0.0.1", LOOPBACK),
        ("::ffff:10.0.0.1", PRIVATE),
        ("::ffff:0:169.254.169.254", METADATA),
        ("::127.0.0.1", LOOPBACK),
        ("64:ff9b::a9fe:a9fe", METADATA),
        ("64:ff9b::192.168.0.1", PRIVATE),
        ("2002:7f00:1::", LOOPBACK),
        ("2002:c0a8:101::1", PRIVATE),
        ("2001::1", "a Teredo tunnel address"),
        ("100::1", "a discard-only address"),
        ("4000::1", RESERVED),
    ] {
        assert_eq!(blocked_reason(ip(addr)), Some(reason), "{addr}");
    }
}

#[test]
fn public_addresses_pass() {
    for addr in [
        "93.184.215.14",
        "1.1.1.1",
        "8.8.8.8",
        "100.63.255.255",
        "100.128.0.1",
        "172.15.255.255",
        "172.32.0.1",
        "169.253.255.255",
        "198.20.0.1",
        "223.255.255.255",
        "2606:4700::1111",
        "2a00:1450:4001::200e",
        "::ffff:93.184.215.14",
        "64:ff9b::8.8.8.8",
        "2002:0808:0808::1",
    ] {
        assert_eq!(blocked_reason(ip(addr)), None, "{addr}");
    }
}

#[test]
fn host_literals_parse_like_inet_aton() {
    let loopback = Some(ip("127.0.0.1"));
    for host in [
        "127.0.0.1",
        "127.1",
        "127.0.1",
        "2130706433",
        "0x7f000001",
        "0X7F000001",
        "017700000001",
        "0x7f.1",
        "0177.0.0.1",
        "0177.0.0.01",
        "0x7f.0x0.0x0.0x1",
        "127.0.0.1.",
        "0000000000000000177.1",
    ] {
        assert_eq!(parse_host_ip(host), loopback, "{host}");
    }
    assert_eq!(parse_host_ip("0"), Some(ip("0.0.0.0")));
    assert_eq!(parse_host_ip("0x"), Some(ip("0.0.0.0")));
    assert_eq!(parse_host_ip("169.254.43518"), Some(ip("169.254.169.254")));
    assert_eq!(parse_host_ip("[::1]"), Some(ip("::1")));
    assert_eq!(parse_host_ip("::1"), Some(ip("::1")));
    assert_eq!(parse_host_ip("[0:0:0:0:0:0:0:1]"), Some(ip("::1")));
    assert_eq!(parse_host_ip("[::ffff:7f00:1]"), Some(ip("::ffff:127.0.0.1")));
    assert_eq!(parse_host_ip("[fe80::1%25eth0]"), Some(ip("fe80::1")));
    for name in [
        "example.com",
        "",
        ".",
        "1.2.3.4.5",
        "256.1.1.1",
        "1.2.3.256",
        "1.2.65536",
        "4294967296",
        "08.0.0.1",
        "0x1g.0.0.1",
        "+1.2.3.4",
        "1..2",
        "127.0.0.1..",
        "[::1",
        "1.2.3.4x",
        "99999999999999999999999",
    ] {
        assert_eq!(parse_host_ip(name), None, "{name:?}");
    }
}

#[test]
fn host_names_blocked_by_name() {
    for host in [
        "localhost",
        "LOCALHOST",
        "localhost.",
        "api.localhost",
        "metadata.google.internal",
        "metadata.google.internal.",
        "metadata",
        "instance-data",
    ] {
        assert!(blocked_host_name(host).is_some(), "{host}");
    }
    for host in ["example.com", "localhost.example.com", "mylocalhost", "metadata.example"] {
        assert_eq!(blocked_host_name(host), None, "{host}");
    }
}

#[tokio::test]
async fn every_notation_is_blocked() {
    for url in [
        "http://127.0.0.1/",
        "http://2130706433/",
        "http://0x7f.1/",
        "http://0x7f000001/",
        "http://017700000001/",
        "http://0177.0.0.1/",
        "http://127.1/",
        "http://127.0.1/",
        "http://127.0.0.1./",
        "http://[::1]/",
        "http://[::ffff:127.0.0.1]/",
        "http://[::ffff:7f00:1]/",
        "http://[0:0:0:0:0:ffff:169.254.169.254]/",
        "http://[64:ff9b::169.254.169.254]/",
        "http://[2002:a9fe:a9fe::]/",
        "http://169.254.169.254/latest/meta-data",
        "http://[fd00::1]/",
        "http://[fe80::1]/",
        "http://10.0.0.1/",
        "http://192.168.0.1:8080/",
        "http://172.16.0.1/",
        "http://100.64.0.1/",
        "http://0.0.0.0/",
        "http://0/",
        "http://[::]/",
        "https://255.255.255.255/",
    ] {
        let err = check(url).await.unwrap_err();
        assert!(matches!(err, GuardError::BlockedAddress { .. }), "{url}: {err:?}");
    }
    for url in [
        "http://localhost/",
        "http://localhost./",
        "http://LocalHost:8080/",
        "http://foo.localhost/",
        "http://metadata.google.internal/computeMetadata/v1/",
        "http://metadata/",
        "http://instance-data/",
    ] {
        let err = check(url).await.unwrap_err();
        assert!(matches!(err, GuardError::BlockedHost { .. }), "{url}: {err:?}");
    }
    for url in ["ftp://example.com/", "file:///etc/passwd", "gopher://127.0.0.1/", "javascript:alert(1)"] {
        assert_eq!(check(url).await.unwrap_err(), GuardError::UnsupportedScheme, "{url}");
    }
    for url in ["http://user:pw@example.com/", "http://user@example.com/", "http://:pw@example.com/"] {
        assert_eq!(check(url).await.unwrap_err(), GuardError::Credentials, "{url}");
    }
    for url in ["", "not a url", "http://", "http://[::1/"] {
        assert!(check(url).await.is_err(), "{url:?}");
    }
}

#[tokio::test]
async fn public_literals_pass() {
    let t = check("http://93.184.215.14/").await.unwrap();
    assert_eq!(t.addrs, vec![SocketAddr::new(ip("93.184.215.14"), 80)]);
    assert_eq!(t.host, "93.184.215.14");
    let t = check("https://[2606:4700::1111]/v1?key=x").await.unwrap();
    assert_eq!(t.addrs, vec![SocketAddr::new(ip("2606:4700::1111"), 443)]);
    assert_eq!(t.host, "[2606:4700::1111]");
    assert_eq!(t.url.query(), Some("key=x"));
}

#[tokio::test]
async fn allowed_ranges_let_addresses_through() {
    let allowed = AllowedRanges::parse("10.0.0.0/8, 192.168.1.5/32 fd00::/8,127.0.0.0/8").unwrap();
    let t = check_url("http://127.0.0.1:11434/v1", &allowed).await.unwrap();
    assert_eq!(t.addrs, vec![SocketAddr::new(ip("127.0.0.1"), 11434)]);
    assert!(check_url("http://[::ffff:127.0.0.1]/", &allowed).await.is_ok());
    assert!(check_url("http://10.9.8.7/", &allowed).await.is_ok());
    assert!(check_url("http://192.168.1.5/", &allowed).await.is_ok());
    assert!(check_url("http://[fd00::1]/", &allowed).await.is_ok());
    assert!(check_url("http://192.168.1.6/", &allowed).await.is_err());
    assert!(check_url("http://169.254.169.254/", &allowed).await.is_err());
    assert!(check_url("http://[::1]/", &allowed).await.is_err());
    // A blocked name passes only when all its addresses are allowed.
    let allowed_all = AllowedRanges::parse("127.0.0.0/8 ::1/128").unwrap();
    assert!(check_url("http://localhost:11434/", &allowed_all).await.is_ok());
    let v4_only = AllowedRanges::parse("10.0.0.0/8").unwrap();
    assert!(matches!(check_url("http://localhost/", &v4_only).await, Err(GuardError::BlockedHost { .. })));
}

#[test]
fn allowed_ranges_parse() {
    let r = AllowedRanges::parse("  10.1.2.3/8,\n192.168.1.5 ,, fd00::1/8  ::ffff:172.16.0.0/108").unwrap();
    assert_eq!(r.to_string(), "10.0.0.0/8, 192.168.1.5/32, fd00::/8, 172.16.0.0/12");
    assert!(r.contains(ip("10.255.0.1")));
    assert!(r.contains(ip("::ffff:10.0.0.1")));
    assert!(r.contains(ip("172.31.0.1")));
    assert!(!r.contains(ip("11.0.0.1")));
    assert!(!r.contains(ip("192.168.1.4")));
    assert!(AllowedRanges::parse("").unwrap().is_empty());
    assert!(AllowedRanges::parse("0.0.0.0/0").unwrap().contains(ip("8.8.8.8")));
    assert!(!AllowedRanges::parse("0.0.0.0/0").unwrap().contains(ip("2606:4700::1111")));
    for bad in ["10.0.0.0/33", "fd00::/129", "10.0.0.0/", "10.0.0.0/+8", "localhost", "10.1/8", "/8", "x"] {
        assert!(AllowedRanges::parse(bad).is_err(), "{bad}");
    }
}

#[tokio::test]
async fn no_connection_is_made_to_a_blocked_address() {
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    listener.set_nonblocking(true).unwrap();
    let port = listener.local_addr().unwrap().port();
    let err = check(&format!("http://127.0.0.1:{port}/")).await.unwrap_err();
    assert_eq!(err, GuardError::BlockedAddress { ip: ip("127.0.0.1"), reason: LOOPBACK });
    assert_eq!(err.to_string(), "This address is not allowed: 127.0.0.1 is a loopback address.");
    let err = check(&format!("http://localhost:{port}/")).await.unwrap_err();
    assert!(matches!(err, GuardError::BlockedHost { .. }), "{err:?}");
    assert_eq!(listener.accept().unwrap_err().kind(), std::io::ErrorKind::WouldBlock);
}

#[tokio::test]
async fn messages_name_only_the_host() {
    let err = check("http://169.254.169.254/latest/meta-data?key=sk-secret").await.unwrap_err();
    assert_eq!(err.to_string(), "This address is not allowed: 169.254.169.254 is a cloud metadata address.");
    let err = check("http://metadata.google.internal/x?key=sk-secret").await.unwrap_err();
    let msg = err.to_string();
    assert_eq!(msg, "This host is not allowed: metadata.google.internal is a cloud metadata host name.");
    assert_eq!(GuardError::UnsupportedScheme.to_string(), "Only http and https URLs are allowed.");
    assert_eq!(GuardError::Unresolvable.to_string(), "The host name could not be resolved.");
    let err = check("http://user:sk-secret@example.com/").await.unwrap_err();
    assert!(!err.to_string().contains("sk-secret"));
}

#[test]
fn next_hop_resolves_and_refuses_other_schemes() {
    let current = Url::parse("https://api.example.com/v1/models?key=x").unwrap();
    assert_eq!(next_hop(&current, "/v2/models").unwrap().as_str(), "https://api.example.com/v2/models");
    assert_eq!(next_hop(&current, "list").unwrap().as_str(), "https://api.example.com/v1/list");
    assert_eq!(next_hop(&current, "http://127.0.0.1/").unwrap().as_str(), "http://127.0.0.1/");
    assert_eq!(next_hop(&current, "//other.example/x").unwrap().as_str(), "https://other.example/x");
    assert_eq!(next_hop(&current, "file:///etc/passwd"), Err(GuardError::UnsupportedScheme));
    assert_eq!(next_hop(&current, "gopher://x/"), Err(GuardError::UnsupportedScheme));
    assert_eq!(next_hop(&current, "http://u:p@x/"), Err(GuardError::Credentials));
    assert_eq!(next_hop(&current, "http://[::1"), Err(GuardError::InvalidUrl));
}

/// Accepts one connection, reads its request head, answers `response`; yields the request.
fn answer_once(listener: tokio::net::TcpListener, response: &'static str) -> tokio::task::JoinHandle<String> {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    tokio::spawn(async move {
        let (mut socket, _) = listener.accept().await.unwrap();
        let mut buf = vec![0u8; 4096];
        let mut request = Vec::new();
        while !request.windows(4).any(|w| w == b"\r\n\r\n") {
            let n = socket.read(&mut buf).await.unwrap();
            if n == 0 {
                break;
            }
            request.extend_from_slice(&buf[..n]);
        }
        socket.write_all(response.as_bytes()).await.unwrap();
        String::from_utf8_lossy(&request).into_owned()
    })
}

/// The pinned client connects to the checked address whatever DNS says, keeps the `Host` header
/// and does not follow redirects.
#[tokio::test]
async fn pinned_client_uses_the_checked_addresses() {
    let _ = rustls::crypto::ring::default_provider().install_default();
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    let server = answer_once(
        listener,
        "HTTP/1.1 302 Found\r\nLocation: http://127.0.0.1:1/\r\nContent-Length: 0\r\nConnection: close\r\n\r\n",
    );
    // `.invalid` never resolves, so reaching the listener proves the pin.
    let target = Target {
        url: Url::parse(&format!("http://pinned.invalid:{}/path", addr.port())).unwrap(),
        host: "pinned.invalid".to_string(),
        addrs: vec![addr],
    };
    let client = pinned_client(&target, reqwest::Client::builder()).unwrap();
    let response = client.get(target.url.clone()).send().await.unwrap();
    assert_eq!(response.status(), reqwest::StatusCode::FOUND);
    let request = server.await.unwrap().to_ascii_lowercase();
    assert!(request.starts_with("get /path http/1.1\r\n"), "{request}");
    assert!(request.contains(&format!("host: pinned.invalid:{}\r\n", addr.port())), "{request}");
}

/// A DNS server that answers `first` once, then `later` (a rebinding attack), counting queries.
struct Rebinding {
    first: Vec<SocketAddr>,
    later: Vec<SocketAddr>,
    queries: std::sync::atomic::AtomicUsize,
}

impl Resolver for Rebinding {
    fn lookup<'a>(
        &'a self,
        _host: &'a str,
        _port: u16,
    ) -> futures_util::future::BoxFuture<'a, Vec<SocketAddr>> {
        let n = self.queries.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
        let answer = if n == 0 { self.first.clone() } else { self.later.clone() };
        Box::pin(async move { answer })
    }
}

/// SECURITY.md 2: a resolver that answers a public address and loopback together is refused; one
/// that answers an allowed address at the check and loopback afterwards (rebinding) changes
/// nothing: the connection goes to the checked address, the loopback listener is never touched,
/// and the name is looked up once.
#[tokio::test]
async fn dns_rebinding_cannot_reach_loopback() {
    let _ = rustls::crypto::ring::default_provider().install_default();

    // Public and loopback in one answer: refused, whatever comes first.
    let mixed = Rebinding {
        first: vec!["93.184.216.34:80".parse().unwrap(), "127.0.0.1:80".parse().unwrap()],
        later: vec![],
        queries: Default::default(),
    };
    let refused = check_url_with("http://rebind.example/", &AllowedRanges::none(), &mixed).await;
    assert!(matches!(refused, Err(GuardError::BlockedResolved { .. })), "{refused:?}");

    // The "public" side here is 127.0.0.2, allowed by the admin; loopback 127.0.0.1 is not.
    let checked = tokio::net::TcpListener::bind("127.0.0.2:0").await.unwrap();
    let port = checked.local_addr().unwrap().port();
    let victim = tokio::net::TcpListener::bind(("127.0.0.1", port)).await.unwrap();
    let server = answer_once(checked, "HTTP/1.1 200 OK\r\nContent-Length: 2\r\nConnection: close\r\n\r\nok");
    let dns = Rebinding {
        first: vec![SocketAddr::new("127.0.0.2".parse().unwrap(), port)],
        later: vec![SocketAddr::new("127.0.0.1".parse().unwrap(), port)],
        queries: Default::default(),
    };
    let allowed = AllowedRanges::parse("127.0.0.2/32").unwrap();
    let url = format!("http://rebind.example:{port}/x");
    let target = check_url_with(&url, &allowed, &dns).await.unwrap();
    assert_eq!(target.addrs, dns.first);
    let client = pinned_client(&target, reqwest::Client::builder()).unwrap();
    for _ in 0..2 {
        // Two requests: neither looks the name up again.
        let res = client.get(target.url.clone()).send().await;
        if let Ok(res) = res {
            assert_eq!(res.status(), reqwest::StatusCode::OK);
        }
    }
    let request = server.await.unwrap().to_ascii_lowercase();
    assert!(request.contains(&format!("host: rebind.example:{port}\r\n")), "{request}");
    assert_eq!(dns.queries.load(std::sync::atomic::Ordering::SeqCst), 1, "looked up once");
    let touched = tokio::time::timeout(std::time::Duration::from_millis(300), victim.accept()).await;
    assert!(touched.is_err(), "the loopback listener was reached");
}

/// SECURITY.md 4, every form named: other schemes, `data:`, credentials hiding a host, a
/// backslash before `@`, mixed case and IDN spellings of blocked names, each refused; and the
/// URL that was checked is the one connected (the target keeps the parsed `Url`, whose host is
/// the checked one, with no re-parse of the text).
#[tokio::test]
async fn every_url_trick_is_refused_and_the_checked_url_is_the_one_used() {
    for url in [
        "file:///etc/passwd",
        "gopher://127.0.0.1:70/_x",
        "ftp://127.0.0.1/",
        "data:text/plain,hi",
        "FILE:///x",
    ] {
        assert_eq!(check(url).await.unwrap_err(), GuardError::UnsupportedScheme, "{url}");
    }
    // Credentials are refused outright: `evil@127.0.0.1` is a user name in front of loopback.
    assert_eq!(check("http://evil@127.0.0.1/").await.unwrap_err(), GuardError::Credentials);
    // WHATWG URL parsing reads `\` as `/` for http(s): the host is 127.0.0.1, refused.
    let err = check("http://127.0.0.1\\@example.com/").await.unwrap_err();
    assert!(matches!(err, GuardError::BlockedAddress { .. }), "{err:?}");
    for url in
        ["http://LocalHost/", "http://localhost./", "http://LOCALHOST:8080/", "http://ｌｏｃａｌｈｏｓｔ/"]
    {
        let err = check(url).await.unwrap_err();
        assert!(
            matches!(err, GuardError::BlockedHost { .. } | GuardError::BlockedAddress { .. }),
            "{url}: {err:?}"
        );
    }
    // Full-width digits and dots become ASCII in parsing, so they are loopback too.
    let err = check("http://１２７．０．０．１/").await.unwrap_err();
    assert!(matches!(err, GuardError::BlockedAddress { .. }), "{err:?}");
    // The checked Url is kept: its host is the one that was resolved and checked.
    let t = check("http://93.184.215.14/a/../b?x=1").await.unwrap();
    assert_eq!(t.url.host_str(), Some("93.184.215.14"));
    assert_eq!(t.url.as_str(), "http://93.184.215.14/b?x=1");
}
