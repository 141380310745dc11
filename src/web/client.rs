//! Facts about the client: its address (trusting `X-Forwarded-For` only from configured
//! proxies), redirects that work for htmx and plain forms, and safe return paths.

use std::net::IpAddr;

use actix_web::http::header;
use actix_web::{HttpRequest, HttpResponse};

/// The client's address. `X-Forwarded-For` counts only when the peer is a trusted proxy, and
/// then its right-most untrusted entry is the client.
pub fn client_ip(req: &HttpRequest, trusted: &[IpAddr]) -> Option<IpAddr> {
    let peer = req.peer_addr()?.ip();
    if !trusted.contains(&peer) {
        return Some(peer);
    }
    let forwarded = req.headers().get("X-Forwarded-For").and_then(|v| v.to_str().ok()).unwrap_or("");
    forwarded
        .split(',')
        .rev()
        .filter_map(|s| s.trim().parse::<IpAddr>().ok())
        .find(|ip| !trusted.contains(ip))
        .or(Some(peer))
}

/// The client's address as rate limits count it: an IPv4 address as is, an IPv6 address by its
/// /64 (one subscriber gets a whole /64, so counting single addresses would let one client
/// rotate through billions of them). Empty when the address is unknown.
pub fn client_bucket(req: &HttpRequest, trusted: &[IpAddr]) -> String {
    match client_ip(req, trusted) {
        None => String::new(),
        Some(ip) => limit_bucket(ip),
    }
}

/// See [`client_bucket`].
pub fn limit_bucket(ip: IpAddr) -> String {
    match ip {
        IpAddr::V4(v4) => v4.to_string(),
        IpAddr::V6(v6) => match v6.to_ipv4_mapped() {
            Some(v4) => v4.to_string(),
            None => {
                let s = v6.segments();
                format!("{:x}:{:x}:{:x}:{:x}::/64", s[0], s[1], s[2], s[3])
            }
        },
    }
}

/// A redirect after a POST: `HX-Redirect` for htmx, 303 otherwise.
pub fn see_other(req: &HttpRequest, location: &str) -> HttpResponse {
    if super::render::is_htmx(req) {
        HttpResponse::Ok().insert_header(("HX-Redirect", location)).finish()
    } else {
        HttpResponse::SeeOther().insert_header((header::LOCATION, location)).finish()
    }
}

/// A local path to return to after sign-in; anything that could leave the site becomes `/`.
pub fn safe_return_to(next: Option<&str>) -> String {
    let Some(next) = next else { return "/".into() };
    let ok = next.starts_with('/')
        && !next.starts_with("//")
        && !next.starts_with("/\\")
        && next.len() < 1024
        && !next.chars().any(|c| c.is_control() || c == '\\');
    if ok { next.to_string() } else { "/".into() }
}

/// Who is acting and from where, for the audit log.
pub fn origin(
    req: &HttpRequest,
    state: &crate::state::AppState,
    auth: &crate::auth::sessions::Authenticated,
) -> crate::domain::audit::Origin {
    let ip = client_ip(req, &state.config.auth.trusted_proxies).map(|ip| ip.to_string());
    crate::domain::audit::Origin::user(&auth.user, ip)
}

/// Who is acting for a directory provisioning (SCIM) token, for the audit log: the admin who
/// owns it, as "scim".
pub fn origin_of_token(
    req: &HttpRequest,
    state: &crate::state::AppState,
    admin: &crate::domain::authz::Admin,
) -> crate::domain::audit::Origin {
    let ip = client_ip(req, &state.config.auth.trusted_proxies).map(|ip| ip.to_string());
    crate::domain::audit::Origin { actor_id: Some(admin.actor().user_id()), actor: "scim".into(), ip }
}

/// The body length a request declares (`Content-Length`), when it declares a valid one: uploads
/// that cannot fit are refused from it before a byte of their body is read.
pub fn declared_length(req: &HttpRequest) -> Option<u64> {
    req.headers()
        .get(header::CONTENT_LENGTH)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.trim().parse::<u64>().ok())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ipv6_clients_are_counted_by_their_64() {
        let a: IpAddr = "2001:db8:1:2:aaaa::1".parse().unwrap();
        let b: IpAddr = "2001:db8:1:2:ffff:ffff:ffff:ffff".parse().unwrap();
        let other: IpAddr = "2001:db8:1:3::1".parse().unwrap();
        assert_eq!(limit_bucket(a), limit_bucket(b));
        assert_eq!(limit_bucket(a), "2001:db8:1:2::/64");
        assert_ne!(limit_bucket(a), limit_bucket(other));
        assert_eq!(limit_bucket("::ffff:192.0.2.7".parse().unwrap()), "192.0.2.7");
        assert_eq!(limit_bucket("192.0.2.7".parse().unwrap()), "192.0.2.7");
    }

    #[test]
    fn return_paths_never_leave_the_site() {
        assert_eq!(safe_return_to(Some("/s/123?x=1")), "/s/123?x=1");
        for bad in [
            "https://evil.example",
            "//evil.example",
            "/\\evil.example",
            "javascript:alert(1)",
            "/a\\b",
            "/a\nb",
            "",
        ] {
            assert_eq!(safe_return_to(Some(bad)), "/", "{bad:?}");
        }
        assert_eq!(safe_return_to(None), "/");
    }

    #[test]
    fn forwarded_for_is_trusted_only_from_proxies() {
        let proxy: IpAddr = "10.0.0.1".parse().unwrap();
        let req = actix_web::test::TestRequest::default()
            .peer_addr("10.0.0.1:5000".parse().unwrap())
            .insert_header(("X-Forwarded-For", "1.2.3.4, 10.0.0.1"))
            .to_http_request();
        assert_eq!(client_ip(&req, &[proxy]), Some("1.2.3.4".parse().unwrap()));
        assert_eq!(client_ip(&req, &[]), Some(proxy), "untrusted peer: header ignored");
        let spoofed = actix_web::test::TestRequest::default()
            .peer_addr("5.6.7.8:5000".parse().unwrap())
            .insert_header(("X-Forwarded-For", "1.2.3.4"))
            .to_http_request();
        assert_eq!(client_ip(&spoofed, &[proxy]), Some("5.6.7.8".parse().unwrap()));
    }
}
