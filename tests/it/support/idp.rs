//! A real OpenID provider for the positive sign-in tests: `oidc-provider` (npm) run by Node.
//!
//! [`Idp::start`] spawns `tests/services/idp.mjs` on a free loopback port with one client and the
//! given accounts, and [`Idp::sign_in`] plays the browser through the provider's own login form,
//! handing back the redirect to the client's callback without following it. Needs Node.js and
//! `npm ci --prefix tests/services` (scripts/test does it). The provider requires PKCE (S256),
//! accepts `client_secret_basic` and `client_secret_post`, sends RFC 9207 `iss` in the callback,
//! puts the email, profile and `groups` claims in the ID token, and never asks for consent.

use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use reqwest::header::{CONTENT_TYPE, COOKIE, LOCATION, SET_COOKIE};
use reqwest::{Client, Method, Url, redirect};
use serde::Serialize;
use tokio::io::{AsyncBufReadExt as _, AsyncReadExt as _, BufReader};
use tokio::process::{Child, Command};

/// How long the provider may take to print its READY line.
const READY_TIMEOUT: Duration = Duration::from_secs(30);
/// How much of the provider's stderr is kept for error messages.
const STDERR_TAIL: usize = 4000;
/// Most requests one [`Idp::sign_in`] or [`Idp::sign_out`] makes before giving up.
const MAX_STEPS: usize = 12;

/// One account the provider knows; `sub` is also what is typed in the login form.
#[derive(Clone, Debug, Serialize)]
pub struct IdpAccount {
    /// Subject identifier, and the login to type.
    pub sub: String,
    /// `email` claim.
    pub email: String,
    /// `email_verified` claim.
    pub email_verified: bool,
    /// `name` claim.
    pub name: String,
    /// `preferred_username` claim.
    pub preferred_username: String,
    /// `groups` claim (scope `groups`).
    pub groups: Vec<String>,
}

/// The provider's one client and its accounts.
#[derive(Clone, Debug)]
pub struct IdpConfig {
    /// The client's `client_id`.
    pub client_id: String,
    /// The client's secret (basic or post authentication).
    pub client_secret: String,
    /// Registered redirect URIs.
    pub redirect_uris: Vec<String>,
    /// Registered post-logout redirect URIs.
    pub post_logout_redirect_uris: Vec<String>,
    /// Accounts that can sign in.
    pub accounts: Vec<IdpAccount>,
    /// ID token signing algorithm of the client: "RS256" or "ES256".
    pub alg: &'static str,
}

/// A running provider; killed when dropped.
pub struct Idp {
    /// Issuer URL, `http://127.0.0.1:PORT` (no trailing slash).
    pub issuer: String,
    /// Loopback port it listens on.
    pub port: u16,
    child: Child,
    stderr: Arc<Mutex<String>>,
    /// Cookies of the browser of the last [`Idp::sign_in`], for [`Idp::sign_out`].
    browser: Mutex<Jar>,
    _dir: tempfile::TempDir,
}

impl Idp {
    /// Starts `tests/services/idp.mjs` and waits for it to listen. A start that stalls (seen
    /// rarely on a loaded two-core machine) is retried on a fresh port.
    pub async fn start(cfg: IdpConfig) -> Result<Idp, String> {
        let mut last = String::new();
        for _ in 0..3 {
            match Self::start_once(&cfg).await {
                Ok(idp) => return Ok(idp),
                Err(e) => last = e,
            }
        }
        Err(last)
    }

    async fn start_once(cfg: &IdpConfig) -> Result<Idp, String> {
        let services = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/services");
        if !services.join("node_modules/oidc-provider").is_dir() {
            return Err(format!(
                "{} has no node_modules/oidc-provider: run `npm ci --prefix tests/services` (scripts/test does it)",
                services.display()
            ));
        }
        let node = std::env::var_os("NODE").map_or_else(|| PathBuf::from("node"), PathBuf::from);
        let port = free_port()?;
        let dir = tempfile::tempdir().map_err(|e| format!("tempdir: {e}"))?;
        let accounts = dir.path().join("accounts.json");
        let json = serde_json::to_vec(&cfg.accounts).map_err(|e| format!("accounts to JSON: {e}"))?;
        std::fs::write(&accounts, json).map_err(|e| format!("write {}: {e}", accounts.display()))?;

        let mut child = Command::new(&node)
            .arg(services.join("idp.mjs"))
            .current_dir(&services)
            .env("IDP_PORT", port.to_string())
            .env("IDP_CLIENT_ID", &cfg.client_id)
            .env("IDP_CLIENT_SECRET", &cfg.client_secret)
            .env("IDP_REDIRECT_URIS", cfg.redirect_uris.join(","))
            .env("IDP_POST_LOGOUT_REDIRECT_URIS", cfg.post_logout_redirect_uris.join(","))
            .env("IDP_ACCOUNTS", &accounts)
            .env("IDP_ALG", cfg.alg)
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .kill_on_drop(true)
            .spawn()
            .map_err(|e| format!("spawn {} (set NODE to Node.js 20+): {e}", node.display()))?;

        // Keep draining stderr (a full pipe would block Node), remembering its tail.
        let stderr = Arc::new(Mutex::new(String::new()));
        let stderr_task = child.stderr.take().map(|mut pipe| {
            let tail = Arc::clone(&stderr);
            tokio::spawn(async move {
                let mut buf = [0u8; 4096];
                while let Ok(n @ 1..) = pipe.read(&mut buf).await {
                    let mut tail = tail.lock().unwrap_or_else(PoisonError::into_inner);
                    tail.push_str(&String::from_utf8_lossy(&buf[..n]));
                    if tail.len() > 2 * STDERR_TAIL {
                        let cut = tail.len() - STDERR_TAIL;
                        let cut = (cut..tail.len()).find(|&i| tail.is_char_boundary(i)).unwrap_or(0);
                        tail.drain(..cut);
                    }
                }
            })
        });
        let stdout = child.stdout.take().ok_or("no stdout pipe")?;
        let mut lines = BufReader::new(stdout).lines();
        let ready = tokio::time::timeout(READY_TIMEOUT, async {
            while let Ok(Some(line)) = lines.next_line().await {
                if line.starts_with("IDP READY ") {
                    return true;
                }
            }
            false
        })
        .await;

        if ready != Ok(true) {
            let why = if ready.is_err() { "did not get ready in time" } else { "exited before it was ready" };
            let _ = child.start_kill();
            let status = child.wait().await.map_or_else(|e| e.to_string(), |s| s.to_string());
            if let Some(task) = stderr_task {
                let _ = tokio::time::timeout(Duration::from_secs(2), task).await;
            }
            let tail = tail_of(&stderr);
            return Err(format!("OpenID provider (idp.mjs) {why} ({status}); stderr:\n{tail}"));
        }
        // Drain stdout too from now on.
        tokio::spawn(async move { while let Ok(Some(_)) = lines.next_line().await {} });

        let issuer = format!("http://127.0.0.1:{port}");
        Ok(Idp { issuer, port, child, stderr, browser: Mutex::default(), _dir: dir })
    }

    /// The last few kilobytes the provider wrote to stderr (warnings, errors).
    pub fn stderr_tail(&self) -> String {
        tail_of(&self.stderr)
    }

    /// Signs `login` (an account's `sub`) in, in a fresh browser, from the client's authorization
    /// URL; returns the redirect to the client's callback (`…?code=…&state=…&iss=…`, or
    /// `…?error=…` when the provider refuses, e.g. `access_denied` for an unknown login) unfollowed.
    pub async fn sign_in(&self, authorize_url: &str, login: &str) -> Result<String, String> {
        let mut jar = Jar::default();
        let result = self.drive(&mut jar, authorize_url, Some(login)).await;
        *self.browser.lock().unwrap_or_else(PoisonError::into_inner) = jar;
        result
    }

    /// Follows an RP-initiated logout URL (`end_session_endpoint?…`) in the browser of the last
    /// [`Idp::sign_in`], ending its session there; returns the redirect to the post-logout
    /// redirect URI (with `state`) unfollowed. Errs when the provider rejects the request (e.g.
    /// an unregistered URI) or shows its own "signed out" page (no `id_token_hint`/`client_id`).
    pub async fn sign_out(&self, end_session_url: &str) -> Result<String, String> {
        let mut jar = std::mem::take(&mut *self.browser.lock().unwrap_or_else(PoisonError::into_inner));
        self.drive(&mut jar, end_session_url, None).await
    }

    /// Stops the provider with SIGTERM (it exits cleanly), killing it if it has not in 5 s.
    pub async fn stop(mut self) {
        if let Some(pid) = self.child.id() {
            let _ = Command::new("kill").arg("-TERM").arg(pid.to_string()).status().await;
            if tokio::time::timeout(Duration::from_secs(5), self.child.wait()).await.is_ok() {
                return;
            }
        }
        let _ = self.child.kill().await;
    }

    /// Plays a browser from `start` until a redirect leaves the provider: follows redirects on
    /// the provider, submits its forms (hidden fields, plus `login`/`password` on the login form).
    async fn drive(&self, jar: &mut Jar, start: &str, login: Option<&str>) -> Result<String, String> {
        let _ = rustls::crypto::ring::default_provider().install_default();
        let http = Client::builder()
            .redirect(redirect::Policy::none())
            .no_proxy()
            .timeout(Duration::from_secs(10))
            .build()
            .map_err(|e| format!("HTTP client: {e}"))?;
        let issuer = Url::parse(&self.issuer).map_err(|e| format!("issuer: {e}"))?;
        let mut url = Url::parse(start).map_err(|e| format!("bad start URL {start}: {e}"))?;
        let mut form_body: Option<String> = None;
        if url.origin() != issuer.origin() {
            return Err(format!("{url} is not on the provider {}", self.issuer));
        }

        for _ in 0..MAX_STEPS {
            let method = if form_body.is_some() { Method::POST } else { Method::GET };
            let mut req = http.request(method.clone(), url.clone());
            if let Some(cookies) = jar.header_for(&url) {
                req = req.header(COOKIE, cookies);
            }
            if let Some(body) = form_body.take() {
                req = req.header(CONTENT_TYPE, "application/x-www-form-urlencoded").body(body);
            }
            let resp = req.send().await.map_err(|e| format!("{method} {url}: {e}"))?;
            for value in resp.headers().get_all(SET_COOKIE) {
                if let Ok(value) = value.to_str() {
                    jar.store(&url, value);
                }
            }
            let status = resp.status();
            if status.is_redirection() {
                let location = resp
                    .headers()
                    .get(LOCATION)
                    .and_then(|v| v.to_str().ok())
                    .ok_or_else(|| format!("{status} without Location from {method} {url}"))?;
                let next = url.join(location).map_err(|e| format!("bad Location {location}: {e}"))?;
                if next.origin() != issuer.origin() {
                    return Ok(next.to_string());
                }
                url = next;
                continue;
            }
            let html = resp.text().await.map_err(|e| format!("{method} {url}: {e}"))?;
            if !status.is_success() {
                return Err(format!("provider answered {status} to {method} {url}: {}", page_text(&html)));
            }
            let Some(form) = first_form(&html) else {
                return Err(format!("provider showed a page without a form at {url}: {}", page_text(&html)));
            };
            let mut fields: Vec<(String, String)> = Vec::new();
            for input in &form.inputs {
                match (input.name.as_str(), login) {
                    ("login", Some(login)) => fields.push(("login".into(), login.into())),
                    ("login", None) => return Err(format!("provider asked for a login at {url}")),
                    ("password", _) => fields.push(("password".into(), "any password".into())),
                    _ if input.kind == "hidden" => fields.push((input.name.clone(), input.value.clone())),
                    _ => {}
                }
            }
            let action =
                url.join(&form.action).map_err(|e| format!("bad form action {}: {e}", form.action))?;
            if action.origin() != issuer.origin() {
                return Err(format!(
                    "provider posts a form to {action} (response_mode=form_post is not supported here)"
                ));
            }
            if !form.method.eq_ignore_ascii_case("post") {
                return Err(format!("provider's form at {url} is not method=post"));
            }
            form_body = Some(form_encode(&fields)?);
            url = action;
        }
        Err(format!("no redirect off the provider after {MAX_STEPS} requests (last: {url})"))
    }
}

/// A port that was free a moment ago.
fn free_port() -> Result<u16, String> {
    let listener = std::net::TcpListener::bind("127.0.0.1:0").map_err(|e| format!("bind: {e}"))?;
    listener.local_addr().map(|a| a.port()).map_err(|e| format!("local_addr: {e}"))
}

/// The stderr tail, at most [`STDERR_TAIL`] bytes.
fn tail_of(stderr: &Mutex<String>) -> String {
    let all = stderr.lock().unwrap_or_else(PoisonError::into_inner);
    let start = all.len().saturating_sub(STDERR_TAIL);
    let start = (start..all.len()).find(|&i| all.is_char_boundary(i)).unwrap_or(0);
    all[start..].to_owned()
}

/// `application/x-www-form-urlencoded` of the pairs (via `Url`'s serializer: reqwest's `form`
/// feature is off).
fn form_encode(fields: &[(String, String)]) -> Result<String, String> {
    let mut url = Url::parse("http://form.invalid/").map_err(|e| e.to_string())?;
    url.query_pairs_mut().extend_pairs(fields);
    Ok(url.query().unwrap_or_default().to_owned())
}

/// A cookie jar for one host: name, value and path of each cookie, as RFC 6265 stores them.
#[derive(Default)]
struct Jar(Vec<(String, String, String)>);

impl Jar {
    /// Stores (or, when expired, removes) the cookie of one `Set-Cookie` header sent for `url`.
    fn store(&mut self, url: &Url, header: &str) {
        let mut parts = header.split(';');
        let Some((name, value)) = parts.next().and_then(|nv| nv.split_once('=')) else {
            return;
        };
        let (name, value) = (name.trim().to_owned(), value.trim().to_owned());
        let default_path = match url.path().rfind('/') {
            Some(0) | None => "/".to_owned(),
            Some(i) => url.path()[..i].to_owned(),
        };
        let mut path = default_path;
        let mut expired = false;
        for attr in parts {
            let (key, val) = attr.split_once('=').unwrap_or((attr, ""));
            match key.trim().to_ascii_lowercase().as_str() {
                "path" if val.trim().starts_with('/') => path = val.trim().to_owned(),
                "max-age" => expired |= val.trim().parse::<i64>().is_ok_and(|s| s <= 0),
                // Servers delete a cookie by expiring it at the epoch; nothing here lives long
                // enough for any other date in the past to matter.
                "expires" => expired |= val.contains("1970"),
                _ => {}
            }
        }
        self.0.retain(|(n, _, p)| !(*n == name && *p == path));
        if !expired {
            self.0.push((name, value, path));
        }
    }

    /// The `Cookie` header for a request to `url`, if any cookie's path matches.
    fn header_for(&self, url: &Url) -> Option<String> {
        let path = url.path();
        let matching: Vec<String> = self
            .0
            .iter()
            .filter(|(_, _, p)| {
                path == p
                    || (path.starts_with(p.as_str())
                        && (p.ends_with('/') || path.as_bytes().get(p.len()) == Some(&b'/')))
            })
            .map(|(n, v, _)| format!("{n}={v}"))
            .collect();
        (!matching.is_empty()).then(|| matching.join("; "))
    }
}

/// One `<input>`: its name, value and type (lowercase).
struct Input {
    name: String,
    value: String,
    kind: String,
}

/// One `<form>`: action, method and inputs.
struct Form {
    action: String,
    method: String,
    inputs: Vec<Input>,
}

/// The page's first `<form>`, parsed just enough for the provider's own pages.
fn first_form(html: &str) -> Option<Form> {
    // ASCII lowercasing keeps byte offsets, so positions in `lower` index `html` too.
    let lower = html.to_ascii_lowercase();
    let start = lower.find("<form")?;
    let (attrs, open_end) = tag_attrs(html, start)?;
    let end = lower[open_end..].find("</form").map_or(html.len(), |i| open_end + i);
    let attr = |name: &str| attrs.iter().find(|(k, _)| k == name).map(|(_, v)| v.clone());
    let mut inputs = Vec::new();
    let mut at = open_end;
    while let Some(i) = lower[at..end].find("<input") {
        let (attrs, tag_end) = tag_attrs(html, at + i)?;
        let get = |name: &str| attrs.iter().find(|(k, _)| k == name).map(|(_, v)| v.clone());
        if let Some(name) = get("name") {
            let kind = get("type").unwrap_or_else(|| "text".into()).to_ascii_lowercase();
            inputs.push(Input { name, value: get("value").unwrap_or_default(), kind });
        }
        at = tag_end;
    }
    Some(Form {
        action: attr("action").unwrap_or_default(),
        method: attr("method").unwrap_or_else(|| "get".into()),
        inputs,
    })
}

/// Attributes (lowercase names, decoded values) of the tag opening at `start`, and the offset
/// just past its `>`.
fn tag_attrs(html: &str, start: usize) -> Option<(Vec<(String, String)>, usize)> {
    let bytes = html.as_bytes();
    let mut i = start + 1;
    while i < bytes.len() && bytes[i].is_ascii_alphanumeric() {
        i += 1;
    }
    let mut attrs = Vec::new();
    loop {
        while i < bytes.len() && (bytes[i].is_ascii_whitespace() || bytes[i] == b'/') {
            i += 1;
        }
        if *bytes.get(i)? == b'>' {
            return Some((attrs, i + 1));
        }
        let name_start = i;
        while i < bytes.len() && !matches!(bytes[i], b'=' | b'>' | b'/') && !bytes[i].is_ascii_whitespace() {
            i += 1;
        }
        let name = html[name_start..i].to_ascii_lowercase();
        let mut value = String::new();
        if bytes.get(i) == Some(&b'=') {
            i += 1;
            match *bytes.get(i)? {
                quote @ (b'"' | b'\'') => {
                    let close = html[i + 1..].find(char::from(quote))? + i + 1;
                    value = decode_entities(&html[i + 1..close]);
                    i = close + 1;
                }
                _ => {
                    let len = html[i..]
                        .find(|c: char| c.is_ascii_whitespace() || c == '>')
                        .unwrap_or(html.len() - i);
                    value = decode_entities(&html[i..i + len]);
                    i += len;
                }
            }
        }
        attrs.push((name, value));
    }
}

/// Decodes the character references the provider's escaping produces (named and numeric).
fn decode_entities(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    let mut rest = s;
    while let Some(amp) = rest.find('&') {
        out.push_str(&rest[..amp]);
        rest = &rest[amp..];
        let decoded = rest.find(';').filter(|&semi| semi <= 10).and_then(|semi| {
            let entity = &rest[1..semi];
            let ch = match entity {
                "amp" => Some('&'),
                "lt" => Some('<'),
                "gt" => Some('>'),
                "quot" => Some('"'),
                "apos" => Some('\''),
                _ => entity
                    .strip_prefix("#x")
                    .or_else(|| entity.strip_prefix("#X"))
                    .map(|hex| u32::from_str_radix(hex, 16))
                    .or_else(|| entity.strip_prefix('#').map(str::parse::<u32>))
                    .and_then(Result::ok)
                    .and_then(char::from_u32),
            };
            ch.map(|c| (c, semi))
        });
        match decoded {
            Some((c, semi)) => {
                out.push(c);
                rest = &rest[semi + 1..];
            }
            None => {
                out.push('&');
                rest = &rest[1..];
            }
        }
    }
    out.push_str(rest);
    out
}

/// The visible text of a page (tags, styles and scripts dropped), for error messages.
fn page_text(html: &str) -> String {
    // ASCII lowercasing keeps byte offsets, so positions in `lower` index `html` too.
    let lower = html.to_ascii_lowercase();
    let mut text = String::new();
    let (mut in_tag, mut hidden) = (false, false);
    for (i, c) in html.char_indices() {
        if c == '<' {
            let tail = &lower[i..];
            if tail.starts_with("<style") || tail.starts_with("<script") {
                hidden = true;
            } else if tail.starts_with("</style") || tail.starts_with("</script") {
                hidden = false;
            }
            in_tag = true;
        } else if c == '>' {
            in_tag = false;
            text.push(' ');
        } else if !in_tag && !hidden {
            text.push(c);
        }
    }
    let text = decode_entities(&text.split_whitespace().collect::<Vec<_>>().join(" "));
    text.chars().take(600).collect()
}
