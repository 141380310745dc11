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

#[cfg(test)]
mod tests {
    use super::*;

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
