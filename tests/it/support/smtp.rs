//! A real SMTP server for the mail tests: `tests/services/smtp.mjs` (Node's `smtp-server` and
//! `mailparser`) on loopback, one per test, with an HTTP API the tests read received mail from.
//!
//! It speaks plain SMTP only (no TLS, no STARTTLS offered). Point lettre at it with
//! `AsyncSmtpTransport::<Tokio1Executor>::builder_dangerous("127.0.0.1").port(server.smtp_port)`
//! (`builder_dangerous` means `Tls::None`), adding `.credentials(..)` when [`SmtpOptions`] sets a
//! user. Needs `node` (or `NODE`) and `npm ci --prefix tests/services`, which `scripts/test` runs.

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use serde::Deserialize;
use tokio::io::{AsyncBufReadExt as _, AsyncRead, AsyncReadExt as _, BufReader};
use tokio::process::{Child, Command};
use tokio::time::{Instant, sleep, timeout};

/// How long `smtp.mjs` may take to print its READY line.
const READY_TIMEOUT: Duration = Duration::from_secs(20);
/// How much of the server's stderr is kept for error messages.
const STDERR_TAIL: usize = 4000;

/// How to configure the server: AUTH credentials and recipients to refuse.
#[derive(Clone, Debug, Default)]
pub struct SmtpOptions {
    /// AUTH user (with `pass`): AUTH PLAIN/LOGIN becomes required; `None`: no AUTH at all.
    pub user: Option<String>,
    /// AUTH password (with `user`); wrong credentials are refused with 535.
    pub pass: Option<String>,
    /// Recipient addresses refused at `RCPT TO` with 550 (compared case-insensitively).
    pub reject: Vec<String>,
}

/// One received mail, as the server's `GET /messages` reports it.
#[derive(Clone, Debug, Deserialize)]
pub struct Mail {
    /// Envelope sender (`MAIL FROM`); the `From:` header is `headers["from"]`.
    pub from: String,
    /// Envelope recipients the server accepted (`RCPT TO`), Bcc included.
    pub to: Vec<String>,
    /// Decoded `Subject:` header ("" if none).
    pub subject: String,
    /// The text/plain body, if the mail has one (never made up from the HTML).
    pub text: Option<String>,
    /// The text/html body, if the mail has one.
    pub html: Option<String>,
    /// Top-level headers: lower-case name → raw unfolded value (repeats joined by `\n`).
    #[serde(default)]
    pub headers: HashMap<String, String>,
    /// Size of the raw message in bytes.
    #[serde(default)]
    pub raw_size: u64,
    /// The user the client authenticated as, if it did.
    #[serde(default)]
    pub auth_user: Option<String>,
}

/// A running `smtp.mjs` on loopback; the process is killed when this is dropped.
pub struct SmtpServer {
    /// Plain-SMTP port on 127.0.0.1.
    pub smtp_port: u16,
    /// HTTP API port on 127.0.0.1.
    pub http_port: u16,
    _child: Child,
    stderr: Arc<Mutex<String>>,
    client: reqwest::Client,
}

/// Starts `smtp.mjs` on free loopback ports and waits until it is ready.
/// Starts `tests/services/smtp.mjs`; a start that stalls on a loaded machine is retried.
pub async fn start(opts: SmtpOptions) -> Result<SmtpServer, String> {
    let mut last = String::new();
    for _ in 0..3 {
        match start_once(&opts).await {
            Ok(server) => return Ok(server),
            Err(e) => last = e,
        }
    }
    Err(last)
}

async fn start_once(opts: &SmtpOptions) -> Result<SmtpServer, String> {
    let (user, pass) = match (opts.user.clone(), opts.pass.clone()) {
        (Some(u), Some(p)) if !u.is_empty() && !p.is_empty() => (u, p),
        (None, None) => (String::new(), String::new()),
        _ => return Err("SmtpOptions: set both user and pass (non-empty), or neither".to_owned()),
    };
    let services = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests").join("services");
    let modules = services.join("node_modules");
    for module in ["smtp-server", "mailparser"] {
        if !modules.join(module).is_dir() {
            return Err(format!(
                "{} has no {module}: run `npm ci --prefix tests/services` (scripts/test does)",
                modules.display()
            ));
        }
    }
    let node = find_node()?;
    let script = services.join("smtp.mjs");
    // Port 0: the server binds free ports itself and reports them, so parallel tests never race
    // for a port. Its stdin is a pipe held by `Child`: if this process dies, the server exits too.
    let mut child = Command::new(&node)
        .arg(&script)
        .current_dir(&services)
        .env("SMTP_PORT", "0")
        .env("SMTP_HTTP_PORT", "0")
        .env("SMTP_USER", &user)
        .env("SMTP_PASS", &pass)
        .env("SMTP_REJECT_RCPT", opts.reject.join(","))
        .env("SMTP_WATCH_STDIN", "1")
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .kill_on_drop(true)
        .spawn()
        .map_err(|e| format!("spawning {} {}: {e}", node.display(), script.display()))?;

    let stderr = Arc::new(Mutex::new(String::new()));
    let stderr_task = child.stderr.take().map(|s| tokio::spawn(keep_tail(s, Arc::clone(&stderr))));
    let Some(stdout) = child.stdout.take() else {
        return Err("smtp.mjs has no stdout pipe".to_owned());
    };
    let mut lines = BufReader::new(stdout).lines();
    let ready = timeout(READY_TIMEOUT, async {
        while let Ok(Some(line)) = lines.next_line().await {
            if let Some(ports) = parse_ready(&line) {
                return Some(ports);
            }
        }
        None
    })
    .await;
    let (smtp_port, http_port) = match ready {
        Ok(Some(ports)) => ports,
        Ok(None) => {
            // stdout closed: the server died. Let it and its stderr reader finish first.
            let status = match timeout(Duration::from_secs(2), child.wait()).await {
                Ok(Ok(status)) => status.to_string(),
                _ => "still running".to_owned(),
            };
            if let Some(task) = stderr_task {
                let _ = timeout(Duration::from_secs(2), task).await;
            }
            return Err(format!("smtp.mjs exited before READY ({status}); stderr:\n{}", tail(&stderr)));
        }
        Err(_) => {
            let _ = child.start_kill();
            return Err(format!("smtp.mjs not READY within {READY_TIMEOUT:?}; stderr:\n{}", tail(&stderr)));
        }
    };
    // Keep draining stdout so the server can never block on a full pipe.
    tokio::spawn(async move { while let Ok(Some(_)) = lines.next_line().await {} });

    let _ = rustls::crypto::ring::default_provider().install_default();
    let client = reqwest::Client::builder()
        .no_proxy()
        .timeout(Duration::from_secs(10))
        .build()
        .map_err(|e| format!("building HTTP client: {e}"))?;
    Ok(SmtpServer { smtp_port, http_port, _child: child, stderr, client })
}

impl SmtpServer {
    /// Every mail received so far (since the last [`SmtpServer::clear`]), oldest first.
    pub async fn messages(&self) -> Result<Vec<Mail>, String> {
        let response = self
            .client
            .get(self.url())
            .send()
            .await
            .map_err(|e| format!("GET {}: {e}; server stderr:\n{}", self.url(), tail(&self.stderr)))?;
        if !response.status().is_success() {
            return Err(format!("GET {}: HTTP {}", self.url(), response.status()));
        }
        response.json().await.map_err(|e| format!("GET {}: bad JSON: {e}", self.url()))
    }

    /// Polls until a mail to `to` (an envelope recipient, any case) arrives; returns the earliest.
    pub async fn wait_for(&self, to: &str, timeout: Duration) -> Result<Mail, String> {
        let deadline = Instant::now() + timeout;
        loop {
            let mail = self.messages().await?;
            let seen: Vec<String> = mail.iter().map(|m| format!("{:?} → {:?}", m.subject, m.to)).collect();
            if let Some(found) = mail.into_iter().find(|m| m.to.iter().any(|r| r.eq_ignore_ascii_case(to))) {
                return Ok(found);
            }
            if Instant::now() >= deadline {
                return Err(format!("no mail to {to} within {timeout:?}; received: {seen:?}"));
            }
            sleep(Duration::from_millis(50)).await;
        }
    }

    /// Forgets every received mail; panics if the server does not answer.
    pub async fn clear(&self) {
        let result = self.client.delete(self.url()).send().await;
        match result {
            Ok(response) if response.status().is_success() => {}
            Ok(response) => panic!("DELETE {}: HTTP {}", self.url(), response.status()),
            Err(e) => panic!("DELETE {}: {e}; server stderr:\n{}", self.url(), tail(&self.stderr)),
        }
    }

    /// The HTTP API's `/messages` URL.
    fn url(&self) -> String {
        format!("http://127.0.0.1:{}/messages", self.http_port)
    }
}

/// Parses `SMTP READY smtp=PORT http=PORT` into the two ports.
fn parse_ready(line: &str) -> Option<(u16, u16)> {
    let rest = line.trim().strip_prefix("SMTP READY ")?;
    let mut smtp = None;
    let mut http = None;
    for field in rest.split_whitespace() {
        if let Some(p) = field.strip_prefix("smtp=") {
            smtp = p.parse().ok();
        } else if let Some(p) = field.strip_prefix("http=") {
            http = p.parse().ok();
        }
    }
    Some((smtp?, http?))
}

/// `NODE` if set, else `node` or `nodejs` on `PATH`.
fn find_node() -> Result<PathBuf, String> {
    if let Some(node) = std::env::var_os("NODE").filter(|v| !v.is_empty()) {
        return Ok(PathBuf::from(node));
    }
    let dirs: Vec<PathBuf> =
        std::env::var_os("PATH").map(|p| std::env::split_paths(&p).collect()).unwrap_or_default();
    ["node", "nodejs"]
        .iter()
        .flat_map(|name| dirs.iter().map(move |dir| dir.join(name)))
        .find(|p| p.is_file())
        .ok_or_else(|| {
            "node not found on PATH: install Node.js 20+ (apt-get install nodejs npm) or set NODE".to_owned()
        })
}

/// Reads `stream` to its end, keeping its last [`STDERR_TAIL`] bytes in `buf`.
async fn keep_tail(mut stream: impl AsyncRead + Unpin, buf: Arc<Mutex<String>>) {
    let mut chunk = [0u8; 2048];
    while let Ok(n) = stream.read(&mut chunk).await {
        if n == 0 {
            break;
        }
        let mut s = buf.lock().unwrap_or_else(PoisonError::into_inner);
        s.push_str(&String::from_utf8_lossy(&chunk[..n]));
        if s.len() > STDERR_TAIL {
            let cut = (s.len() - STDERR_TAIL..s.len()).find(|&i| s.is_char_boundary(i)).unwrap_or(s.len());
            s.drain(..cut);
        }
    }
}

/// The kept stderr tail.
fn tail(buf: &Mutex<String>) -> String {
    buf.lock().unwrap_or_else(PoisonError::into_inner).clone()
}
