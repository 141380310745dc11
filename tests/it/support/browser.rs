//! Minimal W3C WebDriver client driving headless Chromium through `chromedriver`, for browser tests.
//
// Every `Browser` owns a private chromedriver on a free loopback port, a fresh Chromium profile in a
// tempdir and one WebDriver session. Chromedriver runs under a tiny `/bin/sh` watchdog in its own
// process group: when the `Browser` is closed or dropped, or the test process dies in any way (even
// SIGKILL), the whole group — watchdog, chromedriver and Chromium — is killed.
#![allow(dead_code)]

use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::time::Duration;

use base64::{Engine as _, engine::general_purpose::STANDARD as BASE64};
use reqwest::Method;
use serde_json::{Value, json};
use tokio::process::{Child, ChildStdin, Command};
use tokio::time::{Instant, sleep};

/// Result type of every fallible operation in this module.
type Result<T, E = BrowserError> = std::result::Result<T, E>;

/// W3C key code of the Enter key, usable inside [`Browser::send_keys`] text.
pub const ENTER: &str = "\u{E007}";

/// Key under which W3C WebDriver serialises element references.
const ELEMENT_KEY: &str = "element-6066-11e4-a52e-4f735466cecf";

/// Hint shown whenever chromedriver or Chromium cannot be found.
const INSTALL_HINT: &str = "install Debian packages `chromium` and `chromium-driver` (scripts/test does it)";

/// Window size of a freshly started browser.
const DEFAULT_WINDOW: (u32, u32) = (1280, 800);

/// How often the `wait_for*` helpers poll the page.
const POLL_INTERVAL: Duration = Duration::from_millis(50);
/// Scrolls the element passed as the first argument to the middle of the viewport.
/// Scrolls the element into view and says whether htmx has taken it over: content htmx swapped
/// in is processed in a settle step after it is inserted, and a click in between would submit
/// the form natively (a GET of the page) instead of sending its request. On a busy machine that
/// gap is long enough for a test to click into it.
const READY_FOR_CLICK: &str = "const el = arguments[0]; el.scrollIntoView({block: 'center'}); \
const owner = el.closest('[hx-post],[hx-get],[hx-put],[hx-patch],[hx-delete]'); \
if (!owner || !window.htmx) { return true; } \
const data = owner['htmx-internal-data']; return !!(data && data.initHash);";

/// How long chromedriver may take to answer `GET /status` with `ready: true`.
const STARTUP_TIMEOUT: Duration = Duration::from_secs(20);

/// Chromium flags: headless, no sandbox (root), and no traffic to Google hosts.
const CHROMIUM_ARGS: &[&str] = &[
    "--headless=new",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--disable-dev-shm-usage",
];

/// Watchdog run as `sh -c WATCHDOG arbor-chromedriver DRIVER PORT` in a new process group.
///
/// It starts chromedriver and kills its whole process group (chromedriver, Chromium and itself) as soon
/// as either chromedriver exits or the watchdog's stdin — a pipe held only by the test process — reaches
/// EOF, which happens when the `Browser` is dropped or the test process dies. Background jobs of a
/// non-interactive shell get `/dev/null` as stdin, hence the copy of the pipe on fd 3.
const WATCHDOG: &str = r#"exec 3<&0 0</dev/null
"$1" --port="$2" 3<&- &
d=$!
(read -r _ <&3; kill -KILL 0) &
exec 3<&-
wait "$d"
kill -KILL 0"#;

/// Everything that can go wrong while driving the browser.
#[derive(Debug, thiserror::Error)]
pub enum BrowserError {
    /// `chromedriver` or a Chromium binary could not be found.
    #[error("{0} not found: {INSTALL_HINT}")]
    NotInstalled(&'static str),
    /// A local I/O operation failed.
    #[error("{context}: {source}")]
    Io {
        /// What was being done.
        context: String,
        /// The underlying error.
        source: std::io::Error,
    },
    /// The HTTP exchange with chromedriver failed.
    #[error("{context}: {source}")]
    Http {
        /// What was being done.
        context: String,
        /// The underlying error.
        source: reqwest::Error,
    },
    /// Chromedriver answered a command with a WebDriver error.
    #[error("WebDriver {command} failed: {error}: {message}")]
    WebDriver {
        /// HTTP method and path of the command, relative to the session.
        command: String,
        /// The W3C error code, e.g. `no such element`.
        error: String,
        /// The human-readable message from chromedriver.
        message: String,
    },
    /// Chromedriver or the session could not be started.
    #[error("browser startup failed: {0}")]
    Startup(String),
    /// A `wait_for*` helper gave up.
    #[error("timed out: {0}")]
    Timeout(String),
    /// Chromedriver sent a response this module does not understand.
    #[error("unexpected WebDriver response: {0}")]
    Protocol(String),
}

impl BrowserError {
    /// Returns the W3C error code if this is a WebDriver error (e.g. `no such element`).
    pub fn webdriver_code(&self) -> Option<&str> {
        match self {
            Self::WebDriver { error, .. } => Some(error),
            _ => None,
        }
    }
}

/// Reference to a DOM element of the current page, as returned by [`Browser::find`].
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct Element {
    /// The WebDriver element id.
    id: String,
}

impl Element {
    /// Returns the WebDriver element id.
    pub fn id(&self) -> &str {
        &self.id
    }

    /// Returns the JSON form of this reference, for passing it in [`Browser::execute`] args.
    pub fn to_arg(&self) -> Value {
        json!({ ELEMENT_KEY: self.id })
    }

    /// Parses a W3C element reference object.
    fn from_json(value: &Value) -> Result<Self> {
        value
            .get(ELEMENT_KEY)
            .and_then(Value::as_str)
            .map(|id| Self { id: id.to_owned() })
            .ok_or_else(|| BrowserError::Protocol(format!("not an element reference: {value}")))
    }
}

/// One entry of the browser console log.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LogEntry {
    /// Chrome log level: `SEVERE`, `WARNING`, `INFO` or `DEBUG`.
    pub level: String,
    /// Origin: `javascript`, `security` (CSP), `network`, `console-api`, ...
    pub source: String,
    /// The message, prefixed by chromedriver with the page URL and position.
    pub message: String,
}

/// A headless Chromium controlled over WebDriver; closing, dropping or dying kills chromedriver and Chromium.
#[derive(Debug)]
pub struct Browser {
    /// HTTP client for chromedriver (loopback, no proxy).
    client: reqwest::Client,
    /// `http://127.0.0.1:PORT/session/ID`.
    session_url: String,
    /// WebDriver session id.
    session_id: String,
    /// The watchdog shell; its pid is the process group of chromedriver and Chromium.
    watchdog: Option<Child>,
    /// Write end of the watchdog's stdin; dropping it kills the process group.
    lifeline: Option<ChildStdin>,
    /// Chromedriver's stdout/stderr (Chromium logs to `profile/chrome_debug.log`).
    log_path: PathBuf,
    /// Holds the logs and the Chromium profile; declared last so it is removed after the kill.
    dir: tempfile::TempDir,
}

impl Browser {
    /// Starts chromedriver and a headless Chromium session with a 1280x800 window.
    pub async fn start() -> Result<Self> {
        // reqwest built with `rustls-no-provider` panics on Client::build without a provider; loopback
        // plain HTTP never uses it, but the builder insists. Ignore "already installed".
        let _ = rustls::crypto::ring::default_provider().install_default();

        let driver = find_binary("CHROMEDRIVER", &["chromedriver"])
            .ok_or(BrowserError::NotInstalled("chromedriver"))?;
        let chromium = find_binary("CHROMIUM", &["chromium", "chromium-browser", "google-chrome"])
            .ok_or(BrowserError::NotInstalled("chromium"))?;

        let dir = tempfile::Builder::new()
            .prefix("arbor-browser-")
            .tempdir()
            .map_err(|e| io_err("creating browser tempdir", e))?;
        let log_path = dir.path().join("chromedriver.log");
        let profile = dir.path().join("profile");
        std::fs::create_dir(&profile).map_err(|e| io_err("creating Chromium profile dir", e))?;

        let client = reqwest::Client::builder()
            .no_proxy()
            .connect_timeout(Duration::from_secs(5))
            .timeout(Duration::from_secs(120))
            .build()
            .map_err(|e| http_err("building HTTP client", e))?;

        // The free port is only reserved until we drop the listener; retry if chromedriver loses the race.
        let mut attempt = 0;
        let (watchdog, lifeline, base) = loop {
            attempt += 1;
            let port = free_port()?;
            let (mut child, lifeline) = spawn_watchdog(&driver, port, &log_path)?;
            let base = format!("http://127.0.0.1:{port}");
            match wait_ready(&client, &base, &mut child).await {
                Ok(()) => break (child, lifeline, base),
                Err(err) => {
                    shut_down(child, lifeline).await;
                    if attempt >= 3 || !matches!(err, Exited) {
                        let why = match err {
                            Exited => "chromedriver exited during startup".to_owned(),
                            NotReady(last) => {
                                format!("chromedriver not ready after {STARTUP_TIMEOUT:?} ({last})")
                            }
                        };
                        return Err(startup_error(&why, &log_path).await);
                    }
                }
            }
        };

        let mut args: Vec<String> = CHROMIUM_ARGS.iter().map(|a| (*a).to_owned()).collect();
        args.push(format!("--user-data-dir={}", profile.display()));
        args.push(format!("--window-size={},{}", DEFAULT_WINDOW.0, DEFAULT_WINDOW.1));
        let capabilities = json!({
            "capabilities": {
                "alwaysMatch": {
                    "browserName": "chrome",
                    "pageLoadStrategy": "normal",
                    "timeouts": { "implicit": 0, "pageLoad": 30_000, "script": 30_000 },
                    "goog:chromeOptions": { "binary": chromium.display().to_string(), "args": args },
                    "goog:loggingPrefs": { "browser": "ALL" },
                }
            }
        });
        let url = format!("{base}/session");
        let created = match send(&client, Method::POST, &url, "POST /session", Some(capabilities)).await {
            Ok(v) => v,
            Err(err) => {
                shut_down(watchdog, lifeline).await;
                return Err(startup_error(&err.to_string(), &log_path).await);
            }
        };
        let Some(session_id) = created.get("sessionId").and_then(Value::as_str) else {
            shut_down(watchdog, lifeline).await;
            return Err(BrowserError::Protocol(format!("new session without sessionId: {created}")));
        };
        let session_id = session_id.to_owned();

        Ok(Self {
            client,
            session_url: format!("{base}/session/{session_id}"),
            session_id,
            watchdog: Some(watchdog),
            lifeline: Some(lifeline),
            log_path,
            dir,
        })
    }

    /// Returns the WebDriver session id.
    pub fn session_id(&self) -> &str {
        &self.session_id
    }

    /// Returns the path of chromedriver's log file (deleted with the browser).
    pub fn driver_log_path(&self) -> &Path {
        &self.log_path
    }

    /// Returns the path of Chromium's own log, `chrome_debug.log` in the profile (deleted with the browser).
    pub fn chromium_log_path(&self) -> PathBuf {
        self.dir.path().join("profile").join("chrome_debug.log")
    }

    /// Navigates to `url` and waits for the page load to finish.
    /// Signs this browser in with a session cookie (`arbor_session=…`, as `TestApp::login`
    /// makes), from a page of the app at `origin`, then opens `url`.
    pub async fn sign_in(&self, origin: &str, cookie: &str, url: &str) -> Result<()> {
        if !self.current_url().await?.starts_with(origin) {
            self.goto(&format!("{origin}/")).await?;
        }
        let token = cookie.trim_start_matches("arbor_session=");
        self.execute(&format!("document.cookie = 'arbor_session={token}; path=/'; return true;"), &[])
            .await?;
        self.goto(url).await
    }

    pub async fn goto(&self, url: &str) -> Result<()> {
        self.cmd(Method::POST, "/url", json!({ "url": url })).await.map(drop)
    }

    /// Returns the URL of the current page.
    pub async fn current_url(&self) -> Result<String> {
        as_string(self.get("/url").await?)
    }

    /// Returns the title of the current page.
    pub async fn title(&self) -> Result<String> {
        as_string(self.get("/title").await?)
    }

    /// Returns the serialised DOM of the current page.
    pub async fn page_source(&self) -> Result<String> {
        as_string(self.get("/source").await?)
    }

    /// Finds the first element matching the CSS selector (error `no such element` if none).
    pub async fn find(&self, css: &str) -> Result<Element> {
        let v = self.cmd(Method::POST, "/element", css_locator(css)).await?;
        Element::from_json(&v)
    }

    /// Finds all elements matching the CSS selector (possibly none).
    pub async fn find_all(&self, css: &str) -> Result<Vec<Element>> {
        let v = self.cmd(Method::POST, "/elements", css_locator(css)).await?;
        match v.as_array() {
            Some(items) => items.iter().map(Element::from_json).collect(),
            None => Err(BrowserError::Protocol(format!("expected element array, got {v}"))),
        }
    }

    /// Clicks the first element matching the CSS selector.
    pub async fn click(&self, css: &str) -> Result<()> {
        let el = self.find(css).await?;
        self.click_element(&el).await
    }

    /// Clicks an element found earlier.
    pub async fn click_element(&self, el: &Element) -> Result<()> {
        match self.cmd(Method::POST, &format!("/element/{}/click", el.id), json!({})).await {
            // The click landed and started a navigation before chromedriver answered: done.
            Err(err) if err.webdriver_code() == Some("aborted by navigation") => Ok(()),
            other => other.map(drop),
        }
    }

    /// Returns the rendered (visible) text of the first element matching the CSS selector.
    pub async fn text(&self, css: &str) -> Result<String> {
        let el = self.find(css).await?;
        self.element_text(&el).await
    }

    /// Returns the rendered (visible) text of an element found earlier.
    pub async fn element_text(&self, el: &Element) -> Result<String> {
        as_string(self.get(&format!("/element/{}/text", el.id)).await?)
    }

    /// Returns an HTML attribute of the first element matching the CSS selector, if present.
    pub async fn attribute(&self, css: &str, name: &str) -> Result<Option<String>> {
        let el = self.find(css).await?;
        let v = self.get(&format!("/element/{}/attribute/{name}", el.id)).await?;
        Ok(v.as_str().map(str::to_owned))
    }

    /// Returns the current `value` property of the first input/textarea/select matching the selector.
    pub async fn value(&self, css: &str) -> Result<String> {
        let el = self.find(css).await?;
        let v = self.get(&format!("/element/{}/property/value", el.id)).await?;
        Ok(v.as_str().map(str::to_owned).unwrap_or_default())
    }

    /// Types `text` into the first element matching the selector, appending to its current value.
    pub async fn type_into(&self, css: &str, text: &str) -> Result<()> {
        self.send_keys(css, text).await
    }

    /// Sends raw W3C key input (text, may contain key codes such as [`ENTER`]) to the matching element.
    pub async fn send_keys(&self, css: &str, keys: &str) -> Result<()> {
        let el = self.find(css).await?;
        self.send_keys_to(&el, keys).await
    }

    /// Sends raw W3C key input to an element found earlier.
    pub async fn send_keys_to(&self, el: &Element, keys: &str) -> Result<()> {
        self.cmd(Method::POST, &format!("/element/{}/value", el.id), json!({ "text": keys })).await.map(drop)
    }

    /// Presses Enter in the first element matching the selector (e.g. to submit a form).
    pub async fn press_enter(&self, css: &str) -> Result<()> {
        self.send_keys(css, ENTER).await
    }

    /// Clears the value of the first input/textarea matching the selector.
    pub async fn clear(&self, css: &str) -> Result<()> {
        let el = self.find(css).await?;
        self.cmd(Method::POST, &format!("/element/{}/clear", el.id), json!({})).await.map(drop)
    }

    /// Runs `script` as a function body (`arguments[i]` = `args[i]`) and returns its JSON result.
    pub async fn execute(&self, script: &str, args: &[Value]) -> Result<Value> {
        self.cmd(Method::POST, "/execute/sync", json!({ "script": script, "args": args })).await
    }

    /// Polls until an element matches the CSS selector and returns it, or times out.
    pub async fn wait_for(&self, css: &str, timeout: Duration) -> Result<Element> {
        let deadline = Instant::now() + timeout;
        loop {
            match self.find(css).await {
                Ok(el) => return Ok(el),
                // Not there yet, or the page is being replaced under us (a redirect after a
                // click): keep polling until the new page has the element.
                Err(err)
                    if matches!(
                        err.webdriver_code(),
                        Some("no such element" | "aborted by navigation" | "stale element reference")
                    ) => {}
                Err(err) => return Err(err),
            }
            if Instant::now() >= deadline {
                return Err(BrowserError::Timeout(format!("no element matched `{css}` within {timeout:?}")));
            }
            sleep(POLL_INTERVAL).await;
        }
    }

    /// Waits for an element, scrolls it into view and clicks it; when a swap or a reload
    /// replaced it between finding and clicking (a stale element, a click that landed on
    /// something else), finds it again, until the timeout.
    pub async fn click_when_ready(&self, css: &str, timeout: Duration) -> Result<()> {
        let deadline = Instant::now() + timeout;
        loop {
            let left = deadline.saturating_duration_since(Instant::now());
            let el = self.wait_for(css, left).await?;
            let clicked = match self.execute(READY_FOR_CLICK, &[el.to_arg()]).await {
                Ok(ready) if ready.as_bool() == Some(false) => {
                    if Instant::now() >= deadline {
                        return Err(BrowserError::Timeout(format!(
                            "`{css}` was never taken over by htmx within {timeout:?}"
                        )));
                    }
                    sleep(POLL_INTERVAL).await;
                    continue;
                }
                Ok(_) => self.click_element(&el).await,
                Err(err) => Err(err),
            };
            match clicked {
                Ok(()) => return Ok(()),
                Err(err)
                    if Instant::now() < deadline
                        && matches!(
                            err.webdriver_code(),
                            Some(
                                "stale element reference"
                                    | "element click intercepted"
                                    | "element not interactable"
                                    | "no such element"
                            )
                        ) =>
                {
                    sleep(POLL_INTERVAL).await;
                }
                Err(err) => return Err(err),
            }
        }
    }

    /// Polls until the text of the element matching `css` contains `needle`; returns the whole text.
    pub async fn wait_for_text(&self, css: &str, needle: &str, timeout: Duration) -> Result<String> {
        let deadline = Instant::now() + timeout;
        loop {
            let last = match self.text(css).await {
                Ok(text) if text.contains(needle) => return Ok(text),
                Ok(text) => format!("text was {text:?}"),
                // The element may not exist yet or be replaced while we read it: keep polling.
                Err(err @ BrowserError::WebDriver { .. }) => err.to_string(),
                Err(err) => return Err(err),
            };
            if Instant::now() >= deadline {
                return Err(BrowserError::Timeout(format!(
                    "`{css}` did not contain {needle:?} within {timeout:?}; {last}"
                )));
            }
            sleep(POLL_INTERVAL).await;
        }
    }

    /// Resizes the browser window (outer size, in CSS pixels).
    pub async fn set_window_size(&self, width: u32, height: u32) -> Result<()> {
        self.cmd(Method::POST, "/window/rect", json!({ "width": width, "height": height })).await.map(drop)
    }

    /// Returns a PNG screenshot of the viewport.
    pub async fn screenshot_png(&self) -> Result<Vec<u8>> {
        let encoded = as_string(self.get("/screenshot").await?)?;
        BASE64
            .decode(encoded.as_bytes())
            .map_err(|e| BrowserError::Protocol(format!("screenshot is not base64: {e}")))
    }

    /// Writes a PNG screenshot of the viewport to `path`.
    pub async fn screenshot(&self, path: impl AsRef<Path>) -> Result<()> {
        let png = self.screenshot_png().await?;
        let path = path.as_ref();
        tokio::fs::write(path, png).await.map_err(|e| io_err(&format!("writing {}", path.display()), e))
    }

    /// Returns and clears all browser console log entries collected since the previous call.
    pub async fn console_logs(&self) -> Result<Vec<LogEntry>> {
        // Chromedriver serves the legacy log command under W3C as POST /se/log; POST /log is the older
        // alias (GET /log is "unknown command").
        let body = json!({ "type": "browser" });
        let v = match self.cmd(Method::POST, "/se/log", body.clone()).await {
            Err(err) if err.webdriver_code() == Some("unknown command") => {
                self.cmd(Method::POST, "/log", body).await?
            }
            other => other?,
        };
        let Some(items) = v.as_array() else {
            return Err(BrowserError::Protocol(format!("expected log array, got {v}")));
        };
        let field =
            |item: &Value, key: &str| item.get(key).and_then(Value::as_str).unwrap_or_default().to_owned();
        Ok(items
            .iter()
            .map(|item| LogEntry {
                level: field(item, "level"),
                source: field(item, "source"),
                message: field(item, "message"),
            })
            .collect())
    }

    /// Returns and clears the SEVERE console entries (JS exceptions, CSP violations, failed loads, console.error).
    pub async fn console_errors(&self) -> Result<Vec<String>> {
        Ok(self
            .console_logs()
            .await?
            .into_iter()
            .filter(|e| e.level == "SEVERE")
            .map(|e| e.message)
            .collect())
    }

    /// Ends the session (Chromium exits cleanly), then kills chromedriver and waits for it.
    pub async fn close(mut self) -> Result<()> {
        let deleted = send(&self.client, Method::DELETE, &self.session_url, "DELETE /session", None).await;
        if let (Some(child), Some(lifeline)) = (self.watchdog.take(), self.lifeline.take()) {
            shut_down(child, lifeline).await;
        }
        deleted.map(drop)
    }

    /// Sends a GET command relative to the session URL.
    async fn get(&self, path: &str) -> Result<Value> {
        let command = format!("GET {path}");
        send(&self.client, Method::GET, &format!("{}{path}", self.session_url), &command, None).await
    }

    /// Sends a command with a JSON body relative to the session URL.
    async fn cmd(&self, method: Method, path: &str, body: Value) -> Result<Value> {
        let command = format!("{method} {path}");
        send(&self.client, method, &format!("{}{path}", self.session_url), &command, Some(body)).await
    }
}

impl Drop for Browser {
    fn drop(&mut self) {
        if let Some(child) = self.watchdog.as_mut() {
            // Synchronous kill of the whole group; closing the lifeline makes the watchdog do the same
            // even if `kill` is unavailable. Tokio reaps the watchdog in the background.
            kill_group(child);
        }
        self.lifeline = None;
    }
}

/// Why waiting for chromedriver failed.
enum NotReadyReason {
    /// The watchdog (and thus chromedriver) exited.
    Exited,
    /// Still not ready at the deadline; the last observation.
    NotReady(String),
}
use NotReadyReason::{Exited, NotReady};

/// Polls `GET /status` until chromedriver reports `ready: true`.
async fn wait_ready(client: &reqwest::Client, base: &str, child: &mut Child) -> Result<(), NotReadyReason> {
    let deadline = Instant::now() + STARTUP_TIMEOUT;
    loop {
        if !matches!(child.try_wait(), Ok(None)) {
            return Err(Exited);
        }
        let last = match send(client, Method::GET, &format!("{base}/status"), "GET /status", None).await {
            Ok(v) if v.get("ready").and_then(Value::as_bool) == Some(true) => return Ok(()),
            Ok(v) => format!("status {v}"),
            Err(e) => e.to_string(),
        };
        if Instant::now() >= deadline {
            return Err(NotReady(last));
        }
        sleep(Duration::from_millis(50)).await;
    }
}

/// Sends one WebDriver request and unwraps the `value` of the response, mapping W3C errors.
async fn send(
    client: &reqwest::Client,
    method: Method,
    url: &str,
    command: &str,
    body: Option<Value>,
) -> Result<Value> {
    let mut req = client.request(method, url);
    if let Some(body) = body {
        req = req.json(&body);
    }
    let resp = req.send().await.map_err(|e| http_err(command, e))?;
    let status = resp.status();
    let text = resp.text().await.map_err(|e| http_err(command, e))?;
    let parsed: Value = serde_json::from_str(&text).map_err(|e| {
        BrowserError::Protocol(format!("{command}: HTTP {status}, invalid JSON ({e}): {text}"))
    })?;
    let value = match parsed {
        Value::Object(mut map) => map.remove("value").unwrap_or(Value::Null),
        other => {
            return Err(BrowserError::Protocol(format!("{command}: HTTP {status}: {other}")));
        }
    };
    if let Some(error) = value.get("error").and_then(Value::as_str) {
        // Chromedriver repeats the code and appends "\n  (Session info: chrome=…)"; keep just the detail.
        let raw = value.get("message").and_then(Value::as_str).unwrap_or_default();
        let raw = raw.split("\n  (Session info:").next().unwrap_or(raw);
        let message = raw.strip_prefix(error).and_then(|m| m.strip_prefix(": ")).unwrap_or(raw);
        return Err(BrowserError::WebDriver {
            command: command.to_owned(),
            error: error.to_owned(),
            message: message.trim_end().to_owned(),
        });
    }
    if !status.is_success() {
        return Err(BrowserError::Protocol(format!("{command}: HTTP {status}: {value}")));
    }
    Ok(value)
}

/// Spawns the watchdog shell running chromedriver on `port`, logging to `log_path`.
fn spawn_watchdog(driver: &Path, port: u16, log_path: &Path) -> Result<(Child, ChildStdin)> {
    let log = std::fs::OpenOptions::new()
        .create(true)
        .append(true)
        .open(log_path)
        .map_err(|e| io_err(&format!("opening {}", log_path.display()), e))?;
    let log_err = log.try_clone().map_err(|e| io_err("duplicating log file handle", e))?;
    let mut child = Command::new("/bin/sh")
        .arg("-c")
        .arg(WATCHDOG)
        .arg("arbor-chromedriver")
        .arg(driver)
        .arg(port.to_string())
        .stdin(Stdio::piped())
        .stdout(Stdio::from(log))
        .stderr(Stdio::from(log_err))
        .process_group(0)
        .kill_on_drop(true)
        .spawn()
        .map_err(|e| io_err(&format!("spawning {}", driver.display()), e))?;
    let Some(lifeline) = child.stdin.take() else {
        kill_group(&mut child);
        return Err(BrowserError::Startup("watchdog has no stdin pipe".to_owned()));
    };
    Ok((child, lifeline))
}

/// Kills the watchdog's process group and reaps the watchdog.
async fn shut_down(mut child: Child, lifeline: ChildStdin) {
    kill_group(&mut child);
    drop(lifeline);
    let _ = child.wait().await;
}

/// SIGKILLs the watchdog's process group (chromedriver + Chromium) and the watchdog itself.
fn kill_group(child: &mut Child) {
    if let Some(pid) = child.id() {
        // The watchdog is not reaped yet (we never waited on it), so its pid still names our group.
        let _ = std::process::Command::new("kill")
            .args(["-KILL", "--", &format!("-{pid}")])
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .status();
    }
    let _ = child.start_kill();
}

/// Finds a binary: the env var `var` (must exist) or the first of `names` on `PATH`.
fn find_binary(var: &str, names: &[&str]) -> Option<PathBuf> {
    if let Some(path) = std::env::var_os(var).filter(|p| !p.is_empty()) {
        let path = PathBuf::from(path);
        return is_executable(&path).then_some(path);
    }
    let dirs: Vec<PathBuf> =
        std::env::var_os("PATH").map(|p| std::env::split_paths(&p).collect()).unwrap_or_default();
    names.iter().flat_map(|name| dirs.iter().map(move |dir| dir.join(name))).find(|p| is_executable(p))
}

/// Whether `path` is a regular file with an execute bit.
fn is_executable(path: &Path) -> bool {
    use std::os::unix::fs::PermissionsExt;
    std::fs::metadata(path).is_ok_and(|m| m.is_file() && m.permissions().mode() & 0o111 != 0)
}

/// Asks the OS for a currently free loopback TCP port.
fn free_port() -> Result<u16> {
    let listener =
        std::net::TcpListener::bind(("127.0.0.1", 0)).map_err(|e| io_err("binding a free port", e))?;
    let port = listener.local_addr().map_err(|e| io_err("reading free port", e))?.port();
    Ok(port)
}

/// Builds a startup error including the tails of the chromedriver and Chromium logs (they are deleted).
async fn startup_error(why: &str, log_path: &Path) -> BrowserError {
    let mut msg = why.to_owned();
    let chromium_log = log_path.with_file_name("profile").join("chrome_debug.log");
    for path in [log_path, chromium_log.as_path()] {
        let Ok(log) = tokio::fs::read_to_string(path).await else {
            continue;
        };
        // Chromium logs lots of harmless D-Bus failures in containers; they only hide the real cause.
        let lines: Vec<&str> = log.lines().filter(|l| !l.contains("dbus")).collect();
        let tail = lines[lines.len().saturating_sub(15)..].join("\n");
        msg.push_str(&format!("\n--- last lines of {} ---\n{tail}", path.display()));
    }
    BrowserError::Startup(msg)
}

/// W3C locator body for a CSS selector.
fn css_locator(css: &str) -> Value {
    json!({ "using": "css selector", "value": css })
}

/// Extracts a JSON string value.
fn as_string(v: Value) -> Result<String> {
    match v {
        Value::String(s) => Ok(s),
        other => Err(BrowserError::Protocol(format!("expected a string, got {other}"))),
    }
}

/// Wraps an I/O error with context.
fn io_err(context: &str, source: std::io::Error) -> BrowserError {
    BrowserError::Io { context: context.to_owned(), source }
}

/// Wraps a reqwest error with context.
fn http_err(context: &str, source: reqwest::Error) -> BrowserError {
    BrowserError::Http { context: context.to_owned(), source }
}
