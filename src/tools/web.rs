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
        let builder = crate::tls::client_builder().user_agent(USER_AGENT).connect_timeout(limits.timeout);
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
mod tests;
