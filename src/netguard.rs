//! The SSRF guard for every outbound URL a member controls (provider base URLs now, the agent's
//! web fetches later).
//!
//! A member must not be able to make the server talk to itself, to the private network it sits in,
//! or to a cloud metadata service. So before any connection is made, [`check_url`] accepts only
//! http(s) without credentials, parses host literals the way browsers, curl and `inet_aton` do (so
//! `http://0x7f.1/` or `http://[::ffff:7f00:1]/` cannot sneak past), refuses blocked host names,
//! resolves the host and rejects it if *any* resolved address is blocked. [`pinned_client`] then
//! connects to exactly the checked addresses, so a DNS answer that changes between the check and the
//! connection (DNS rebinding) has no effect, and it does not follow redirects: each hop must be
//! checked again ([`next_hop`], [`MAX_REDIRECTS`]). An administrator may allow ranges
//! ([`AllowedRanges`]), e.g. for a local model server.
//!
//! Error messages are safe to show to the member: they name at most the host, never the path or
//! query string (which could carry a key).

use std::fmt;
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr, SocketAddr};
use std::time::Duration;

use reqwest::Url;

/// How many redirects a caller following them by hand may follow, each checked with [`check_url`].
pub const MAX_REDIRECTS: usize = 5;

/// How long a host name may take to resolve.
const RESOLVE_TIMEOUT: Duration = Duration::from_secs(10);

const UNSPECIFIED: &str = "an unspecified address";
const LOOPBACK: &str = "a loopback address";
const PRIVATE: &str = "a private address";
const LINK_LOCAL: &str = "a link-local address";
const METADATA: &str = "a cloud metadata address";
const DOCUMENTATION: &str = "a documentation address";
const BENCHMARKING: &str = "a benchmarking address";
const MULTICAST: &str = "a multicast address";
const RESERVED: &str = "a reserved address";
const PROTOCOL: &str = "an IETF protocol assignment address";

/// Why a URL was refused; every message is safe to show to the member who entered it.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum GuardError {
    /// The text is not a URL (or a redirect target could not be resolved against the current URL).
    #[error("This is not a valid URL.")]
    InvalidUrl,
    /// A scheme other than http or https.
    #[error("Only http and https URLs are allowed.")]
    UnsupportedScheme,
    /// The URL carries a user name or password.
    #[error("URLs with a user name or password are not allowed.")]
    Credentials,
    /// The URL has no host.
    #[error("The URL has no host.")]
    MissingHost,
    /// The host is an address literal in a blocked range.
    #[error("This address is not allowed: {ip} is {reason}.")]
    BlockedAddress {
        /// The literal address.
        ip: IpAddr,
        /// What kind of address it is, with its article (e.g. "a loopback address").
        reason: &'static str,
    },
    /// The host name resolves to at least one address in a blocked range.
    #[error("This address is not allowed: {host} resolves to {reason}.")]
    BlockedResolved {
        /// The host name.
        host: String,
        /// What kind of address it resolves to (the address itself is not revealed).
        reason: &'static str,
    },
    /// The host name itself is blocked (e.g. `localhost`, `metadata.google.internal`).
    #[error("This host is not allowed: {host} is {reason}.")]
    BlockedHost {
        /// The host name.
        host: String,
        /// What kind of name it is, with its article (e.g. "a loopback host name").
        reason: &'static str,
    },
    /// The host name did not resolve (or not in time).
    #[error("The host name could not be resolved.")]
    Unresolvable,
    /// More than [`MAX_REDIRECTS`] redirects.
    #[error("The URL redirected too many times.")]
    TooManyRedirects,
}

/// A checked URL with the addresses it was checked against; connect only to these.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Target {
    /// The parsed URL.
    pub url: Url,
    /// The host as written in the URL (lowercase; an IPv6 literal keeps its brackets).
    pub host: String,
    /// The checked addresses, with the URL's port.
    pub addrs: Vec<SocketAddr>,
}

/// Address ranges an administrator allows even though [`blocked_reason`] blocks them.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct AllowedRanges(Vec<(IpAddr, u8)>);

impl AllowedRanges {
    /// No ranges allowed: every blocked address stays blocked.
    pub fn none() -> AllowedRanges {
        AllowedRanges(Vec::new())
    }

    /// Parses comma- or whitespace-separated CIDRs (`10.0.0.0/8, fd00::/8`); a bare address is one host.
    pub fn parse(text: &str) -> Result<AllowedRanges, String> {
        let mut ranges = Vec::new();
        for item in text.split(|c: char| c == ',' || c.is_whitespace()).filter(|s| !s.is_empty()) {
            let invalid = || format!("\"{item}\" is not an address range like 10.0.0.0/8 or fd00::/8.");
            let (addr, len) = match item.split_once('/') {
                Some((addr, len)) => (addr, Some(len)),
                None => (item, None),
            };
            let addr: IpAddr = addr.parse().map_err(|_| invalid())?;
            let max = if addr.is_ipv4() { 32 } else { 128 };
            let len = match len {
                Some(len) if !len.is_empty() && len.bytes().all(|b| b.is_ascii_digit()) => {
                    len.parse::<u8>().map_err(|_| invalid())?
                }
                Some(_) => return Err(invalid()),
                None => max,
            };
            if len > max {
                return Err(invalid());
            }
            ranges.push(normalize_range(addr, len));
        }
        Ok(AllowedRanges(ranges))
    }

    /// Whether `ip` (an IPv4-mapped IPv6 address counting as its IPv4 address) is in an allowed range.
    pub fn contains(&self, ip: IpAddr) -> bool {
        let ip = ip.to_canonical();
        self.0.iter().any(|&(net, len)| in_range(ip, net, len))
    }

    /// Whether no range is allowed.
    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }
}

impl fmt::Display for AllowedRanges {
    /// The ranges in canonical form, comma separated (`10.0.0.0/8, fd00::/8`).
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        for (i, (net, len)) in self.0.iter().enumerate() {
            if i > 0 {
                f.write_str(", ")?;
            }
            write!(f, "{net}/{len}")?;
        }
        Ok(())
    }
}

/// The range's network address with host bits cleared; an IPv4-mapped range becomes an IPv4 range.
fn normalize_range(addr: IpAddr, len: u8) -> (IpAddr, u8) {
    match addr {
        IpAddr::V4(v4) => (IpAddr::V4(Ipv4Addr::from(u32::from(v4) & mask_v4(len))), len),
        IpAddr::V6(v6) => match v6.to_ipv4_mapped() {
            Some(v4) if len >= 96 => normalize_range(IpAddr::V4(v4), len - 96),
            _ => (IpAddr::V6(Ipv6Addr::from(u128::from(v6) & mask_v6(len))), len),
        },
    }
}

fn mask_v4(len: u8) -> u32 {
    u32::MAX.checked_shl(32 - u32::from(len.min(32))).unwrap_or(0)
}

fn mask_v6(len: u8) -> u128 {
    u128::MAX.checked_shl(128 - u32::from(len.min(128))).unwrap_or(0)
}

fn in_range(ip: IpAddr, net: IpAddr, len: u8) -> bool {
    match (ip, net) {
        (IpAddr::V4(ip), IpAddr::V4(net)) => u32::from(ip) & mask_v4(len) == u32::from(net),
        (IpAddr::V6(ip), IpAddr::V6(net)) => u128::from(ip) & mask_v6(len) == u128::from(net),
        _ => false,
    }
}

/// Why an outbound connection to `ip` is refused (e.g. "a loopback address"), or None if it is public.
pub fn blocked_reason(ip: IpAddr) -> Option<&'static str> {
    match ip {
        IpAddr::V4(v4) => v4_reason(v4),
        IpAddr::V6(v6) => v6_reason(v6),
    }
}

fn v4_reason(ip: Ipv4Addr) -> Option<&'static str> {
    let [a, b, c, _] = ip.octets();
    let reason = match (a, b, c) {
        _ if ip.is_broadcast() => "a broadcast address",
        (0, ..) => UNSPECIFIED,
        (10, ..) | (172, 16..=31, _) | (192, 168, _) => PRIVATE,
        (100, 64..=127, _) => "a shared (carrier-grade NAT) address",
        (127, ..) => LOOPBACK,
        _ if ip == Ipv4Addr::new(169, 254, 169, 254) => METADATA,
        (169, 254, _) => LINK_LOCAL,
        (192, 0, 0) => PROTOCOL,
        (192, 0, 2) | (198, 51, 100) | (203, 0, 113) => DOCUMENTATION,
        (192, 88, 99) => RESERVED,
        (198, 18..=19, _) => BENCHMARKING,
        (224..=239, ..) => MULTICAST,
        (240..=255, ..) => RESERVED,
        _ => return None,
    };
    Some(reason)
}

fn v6_reason(ip: Ipv6Addr) -> Option<&'static str> {
    if ip.is_unspecified() {
        return Some(UNSPECIFIED);
    }
    if ip.is_loopback() {
        return Some(LOOPBACK);
    }
    if let Some(v4) = embedded_v4(ip) {
        return v4_reason(v4);
    }
    let s = ip.segments();
    let reason = match s {
        // AWS's IPv6 instance metadata service.
        [0xfd00, 0x0ec2, 0, 0, 0, 0, 0, 0x0254] => METADATA,
        [0x2001, 0x0db8, ..] => DOCUMENTATION,
        [0x3fff, b, ..] if b < 0x1000 => DOCUMENTATION,
        [0x2001, 0x0000, ..] => "a Teredo tunnel address",
        [0x2001, 0x0002, 0, ..] => BENCHMARKING,
        [0x2001, b, ..] if b < 0x0200 => PROTOCOL,
        [0x0100, 0, 0, 0, ..] => "a discard-only address",
        [0x0064, 0xff9b, 0x0001, ..] => "a local-use NAT64 address",
        [a, ..] if a & 0xfe00 == 0xfc00 => "a private (unique local) address",
        [a, ..] if a & 0xffc0 == 0xfe80 => LINK_LOCAL,
        [a, ..] if a & 0xffc0 == 0xfec0 => "a site-local address",
        [a, ..] if a & 0xff00 == 0xff00 => MULTICAST,
        // Only 2000::/3 is global unicast; everything else is unassigned or special.
        [a, ..] if a & 0xe000 != 0x2000 => RESERVED,
        _ => return None,
    };
    Some(reason)
}

/// The IPv4 address an IPv6 address carries and is routed by: IPv4-mapped (`::ffff:0:0/96`),
/// IPv4-translated (`::ffff:0:0:0/96`), IPv4-compatible (`::/96`), NAT64 (`64:ff9b::/96`), 6to4 (`2002::/16`).
fn embedded_v4(ip: Ipv6Addr) -> Option<Ipv4Addr> {
    let o = ip.octets();
    let last = Ipv4Addr::new(o[12], o[13], o[14], o[15]);
    match ip.segments() {
        [0, 0, 0, 0, 0, 0xffff, _, _]
        | [0, 0, 0, 0, 0xffff, 0, _, _]
        | [0, 0, 0, 0, 0, 0, _, _]
        | [0x0064, 0xff9b, 0, 0, 0, 0, _, _] => Some(last),
        [0x2002, ..] => Some(Ipv4Addr::new(o[2], o[3], o[4], o[5])),
        _ => None,
    }
}

/// Why a host name is refused by name alone (e.g. `localhost`, `metadata.google.internal`), if it is.
pub fn blocked_host_name(host: &str) -> Option<&'static str> {
    let name = host.trim_end_matches('.').to_ascii_lowercase();
    match name.as_str() {
        "localhost" | "localhost.localdomain" | "ip6-localhost" | "ip6-loopback" => {
            Some("a loopback host name")
        }
        n if n.ends_with(".localhost") => Some("a loopback host name"),
        "metadata"
        | "metadata.google.internal"
        | "metadata.goog"
        | "instance-data"
        | "instance-data.ec2.internal" => Some("a cloud metadata host name"),
        _ => None,
    }
}

/// The address a host literal denotes, read as browsers, curl and `inet_aton` read it, or None for a name.
///
/// IPv4 parts may be decimal, octal (leading `0`) or hex (`0x`), with 1 to 4 parts (`127.1`,
/// `2130706433`, `0x7f000001`) and one trailing dot; IPv6 may be bracketed, in any spelling.
pub fn parse_host_ip(host: &str) -> Option<IpAddr> {
    if let Some(inner) = host.strip_prefix('[') {
        return parse_v6(inner.strip_suffix(']')?);
    }
    if host.contains(':') {
        return parse_v6(host);
    }
    parse_v4(host).map(IpAddr::V4)
}

fn parse_v6(text: &str) -> Option<IpAddr> {
    // A zone index (`fe80::1%eth0`) does not change which address it is.
    let addr = text.split('%').next().unwrap_or(text);
    addr.parse::<Ipv6Addr>().ok().map(IpAddr::V6)
}

fn parse_v4(host: &str) -> Option<Ipv4Addr> {
    let host = host.strip_suffix('.').unwrap_or(host);
    if host.is_empty() {
        return None;
    }
    let mut parts = Vec::with_capacity(4);
    for part in host.split('.') {
        if parts.len() == 4 {
            return None;
        }
        parts.push(parse_v4_part(part)?);
    }
    let (&last, init) = parts.split_last()?;
    let mut value: u64 = 0;
    for (i, &part) in init.iter().enumerate() {
        if part > 255 {
            return None;
        }
        value |= part << (24 - 8 * i);
    }
    // The last part fills all the bytes the others left.
    let last_bits = 8 * (4 - init.len());
    if last >= 1u64 << last_bits {
        return None;
    }
    value |= last;
    u32::try_from(value).ok().map(Ipv4Addr::from)
}

fn parse_v4_part(part: &str) -> Option<u64> {
    let (digits, radix) = if let Some(hex) = part.strip_prefix("0x").or_else(|| part.strip_prefix("0X")) {
        (hex, 16)
    } else if let Some(octal) = part.strip_prefix('0') {
        (octal, 8)
    } else {
        (part, 10)
    };
    if digits.is_empty() {
        // `0`, and `0x` as browsers read it.
        return (!part.is_empty()).then_some(0);
    }
    // Digits only: `from_str_radix` would accept a sign.
    if !digits.chars().all(|c| c.is_digit(radix)) {
        return None;
    }
    let digits = digits.trim_start_matches('0');
    if digits.is_empty() {
        return Some(0);
    }
    if digits.len() > 16 {
        return None;
    }
    u64::from_str_radix(digits, radix).ok()
}

/// Checks a member-supplied URL and resolves its host; refuses it if any address is blocked and not allowed.
pub async fn check_url(url: &str, allowed: &AllowedRanges) -> Result<Target, GuardError> {
    let url = Url::parse(url.trim()).map_err(|_| GuardError::InvalidUrl)?;
    check_shape(&url)?;
    let host = url.host_str().filter(|h| !h.is_empty()).ok_or(GuardError::MissingHost)?.to_string();
    let port = url.port_or_known_default().ok_or(GuardError::InvalidUrl)?;

    if let Some(ip) = parse_host_ip(&host) {
        if let Some(reason) = blocked_reason(ip).filter(|_| !allowed.contains(ip)) {
            return Err(GuardError::BlockedAddress { ip, reason });
        }
        return Ok(Target { url, host, addrs: vec![SocketAddr::new(ip, port)] });
    }

    let name_blocked = blocked_host_name(&host);
    let blocked_host = |reason| GuardError::BlockedHost { host: host.clone(), reason };
    if let Some(reason) = name_blocked
        && allowed.is_empty()
    {
        return Err(blocked_host(reason));
    }
    let addrs = resolve(&host, port).await;
    if addrs.is_empty() {
        return Err(name_blocked.map_or(GuardError::Unresolvable, blocked_host));
    }
    // A blocked name passes only if every address it resolves to was explicitly allowed.
    if let Some(reason) = name_blocked
        && !addrs.iter().all(|a| allowed.contains(a.ip()))
    {
        return Err(blocked_host(reason));
    }
    for addr in &addrs {
        if let Some(reason) = blocked_reason(addr.ip()).filter(|_| !allowed.contains(addr.ip())) {
            return Err(GuardError::BlockedResolved { host, reason });
        }
    }
    Ok(Target { url, host, addrs })
}

/// The host's addresses (each once, in the resolver's order), or none if it does not resolve in time.
async fn resolve(host: &str, port: u16) -> Vec<SocketAddr> {
    let mut addrs: Vec<SocketAddr> = Vec::new();
    if let Ok(Ok(resolved)) =
        tokio::time::timeout(RESOLVE_TIMEOUT, tokio::net::lookup_host((host, port))).await
    {
        for addr in resolved {
            if !addrs.contains(&addr) {
                addrs.push(addr);
            }
        }
    }
    addrs
}

/// Refuses schemes other than http(s) and URLs carrying credentials.
fn check_shape(url: &Url) -> Result<(), GuardError> {
    if !matches!(url.scheme(), "http" | "https") {
        return Err(GuardError::UnsupportedScheme);
    }
    if !url.username().is_empty() || url.password().is_some() {
        return Err(GuardError::Credentials);
    }
    Ok(())
}

/// Applies the target's pinned addresses (SNI and `Host` unchanged), no redirects and no proxy to `builder`.
///
/// A proxy would resolve the host itself and so defeat the pinning; redirects must be checked hop by hop.
pub fn pinned_client(target: &Target, builder: reqwest::ClientBuilder) -> reqwest::Result<reqwest::Client> {
    let mut builder = builder.redirect(reqwest::redirect::Policy::none()).no_proxy();
    if parse_host_ip(&target.host).is_none() {
        builder = builder.resolve_to_addrs(&target.host, &target.addrs);
    }
    builder.build()
}

/// Resolves a `Location` header against the current URL; refuses non-http(s) targets and credentials.
///
/// The result still has to pass [`check_url`] before it is fetched.
pub fn next_hop(current: &Url, location: &str) -> Result<Url, GuardError> {
    let next = current.join(location).map_err(|_| GuardError::InvalidUrl)?;
    check_shape(&next)?;
    Ok(next)
}

#[cfg(test)]
mod tests {
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
        for url in ["ftp://example.com/", "file:///etc/passwd", "gopher://127.0.0.1/", "javascript:alert(1)"]
        {
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
        assert!(matches!(
            check_url("http://localhost/", &v4_only).await,
            Err(GuardError::BlockedHost { .. })
        ));
    }

    #[test]
    fn allowed_ranges_parse() {
        let r =
            AllowedRanges::parse("  10.1.2.3/8,\n192.168.1.5 ,, fd00::1/8  ::ffff:172.16.0.0/108").unwrap();
        assert_eq!(r.to_string(), "10.0.0.0/8, 192.168.1.5/32, fd00::/8, 172.16.0.0/12");
        assert!(r.contains(ip("10.255.0.1")));
        assert!(r.contains(ip("::ffff:10.0.0.1")));
        assert!(r.contains(ip("172.31.0.1")));
        assert!(!r.contains(ip("11.0.0.1")));
        assert!(!r.contains(ip("192.168.1.4")));
        assert!(AllowedRanges::parse("").unwrap().is_empty());
        assert!(AllowedRanges::parse("0.0.0.0/0").unwrap().contains(ip("8.8.8.8")));
        assert!(!AllowedRanges::parse("0.0.0.0/0").unwrap().contains(ip("2606:4700::1111")));
        for bad in ["10.0.0.0/33", "fd00::/129", "10.0.0.0/", "10.0.0.0/+8", "localhost", "10.1/8", "/8", "x"]
        {
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
        assert_eq!(
            err.to_string(),
            "This address is not allowed: 169.254.169.254 is a cloud metadata address."
        );
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

    /// The pinned client connects to the checked address whatever DNS says, keeps the `Host` header
    /// and does not follow redirects.
    #[tokio::test]
    async fn pinned_client_uses_the_checked_addresses() {
        use tokio::io::{AsyncReadExt, AsyncWriteExt};

        let _ = rustls::crypto::ring::default_provider().install_default();
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        let server = tokio::spawn(async move {
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
            let response = "HTTP/1.1 302 Found\r\nLocation: http://127.0.0.1:1/\r\nContent-Length: 0\r\n\
                            Connection: close\r\n\r\n";
            socket.write_all(response.as_bytes()).await.unwrap();
            String::from_utf8_lossy(&request).into_owned()
        });
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
}
