//! Checks of names and URLs that several subsystems' forms share (the admin console's providers
//! and MCP servers); a leaf every subsystem may use.

use crate::domain::{DomainError, DomainResult};

/// Whether a provider or endpoint name is well-formed: `[a-z0-9_-]{1,40}`, not starting with `-`.
pub fn valid_name(name: &str) -> bool {
    (1..=40).contains(&name.len())
        && !name.starts_with('-')
        && name.bytes().all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'-' || b == b'_')
}

/// Checks a URL an admin sets: http(s) with a host and no credentials in it (admins may point at
/// private addresses). `what` names it ("base URL"), `secrets_go` says where credentials belong.
pub fn check_http_url(raw: &str, what: &str, secrets_go: &str) -> DomainResult<reqwest::Url> {
    let url = reqwest::Url::parse(raw)
        .map_err(|_| DomainError::Invalid(format!("The {what} is not a valid URL.")))?;
    if !matches!(url.scheme(), "http" | "https") || url.host_str().is_none() {
        return Err(DomainError::Invalid(format!("The {what} must start with http:// or https://.")));
    }
    if !url.username().is_empty() || url.password().is_some() {
        return Err(DomainError::Invalid(format!("Put credentials in {secrets_go}, not in the {what}.")));
    }
    Ok(url)
}
