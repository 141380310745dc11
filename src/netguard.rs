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

/// Where host names are looked up: the system resolver in the server, a stub in tests (to play a
/// rebinding DNS server).
pub trait Resolver: Send + Sync {
    /// The host's addresses, each once, in the resolver's order; none if it does not resolve.
    fn lookup<'a>(&'a self, host: &'a str, port: u16)
    -> futures_util::future::BoxFuture<'a, Vec<SocketAddr>>;
}

/// The system's resolver, with [`RESOLVE_TIMEOUT`].
pub struct SystemResolver;

impl Resolver for SystemResolver {
    fn lookup<'a>(
        &'a self,
        host: &'a str,
        port: u16,
    ) -> futures_util::future::BoxFuture<'a, Vec<SocketAddr>> {
        Box::pin(resolve(host, port))
    }
}

/// Checks a member-supplied URL and resolves its host; refuses it if any address is blocked and not allowed.
pub async fn check_url(url: &str, allowed: &AllowedRanges) -> Result<Target, GuardError> {
    check_url_with(url, allowed, &SystemResolver).await
}

/// [`check_url`] with the given resolver, consulted once: the [`Target`] carries the addresses
/// it answered, and [`pinned_client`] connects to those only.
pub async fn check_url_with(
    url: &str,
    allowed: &AllowedRanges,
    resolver: &dyn Resolver,
) -> Result<Target, GuardError> {
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
    let addrs = resolver.lookup(&host, port).await;
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
mod tests;
