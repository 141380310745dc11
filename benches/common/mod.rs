//! What the bench binaries share: the mock OpenAI-compatible upstream served in-process, finding
//! and starting the release binary, reading `/proc`, and talking to Arbor as a signed-in browser.
//!
//! Each bench includes this module with `mod common;` and uses a part of it.
#![allow(dead_code)]

use std::collections::HashMap;
use std::fmt::Write as _;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};
use std::time::{Duration, Instant, SystemTime};

use futures_util::StreamExt;
use tokio::io::{AsyncReadExt as _, AsyncWriteExt as _};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::{Semaphore, watch};
use tokio::task::JoinSet;

pub type Error = Box<dyn std::error::Error + Send + Sync>;
pub type Res<T> = Result<T, Error>;

pub fn fail(msg: impl Into<String>) -> Error {
    msg.into().into()
}

/// A command-line option's number value.
pub fn arg_number(name: &str, v: Option<String>) -> Res<usize> {
    let v = v.ok_or_else(|| fail(format!("{name} needs a value")))?;
    v.parse::<usize>().map_err(|_| fail(format!("{name}: not a number: {v}")))
}

/// `--levels 1,100,1000`.
pub fn arg_levels(v: Option<String>) -> Res<Vec<usize>> {
    let v = v.ok_or_else(|| fail("--levels needs a value"))?;
    v.split(',')
        .map(|s| s.trim().parse::<usize>().map_err(|_| fail(format!("--levels: bad number {s}"))))
        .collect()
}

pub fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(PoisonError::into_inner)
}

// ---------------------------------------------------------------------------------------------
// The mock upstream
// ---------------------------------------------------------------------------------------------

/// What the mock was asked to do, from the `BENCH:...` marker in the last user message.
#[derive(Debug, Clone, Copy)]
pub enum Script {
    /// One short token, then the end: used for the sessions' first replies.
    Quick,
    /// Latency round: wait for the round's release, then `tokens` tokens.
    Tokens { round: u32, stream: u32, tokens: u32, interval_ms: u64, offset_us: u64 },
    /// Response head, then silence for `secs`.
    Silent { secs: u64 },
    /// Throughput: `chunks` tokens at once (`delay_ms` apart, 0: back to back), on a connection
    /// that stays open for the next request (as a provider's would).
    Burst { chunks: u32, delay_ms: u64 },
}

pub fn parse_script(body: &str) -> Option<Script> {
    let at = body.rfind("BENCH:")?;
    let rest = &body[at + 6..];
    let end = rest.find(|c: char| !(c.is_ascii_alphanumeric() || c == ':')).unwrap_or(rest.len());
    let f: Vec<&str> = rest[..end].split(':').collect();
    match f.as_slice() {
        ["quick"] => Some(Script::Quick),
        ["silent", secs] => Some(Script::Silent { secs: secs.parse().ok()? }),
        ["burst", chunks, delay_ms] => {
            Some(Script::Burst { chunks: chunks.parse().ok()?, delay_ms: delay_ms.parse().ok()? })
        }
        ["lat", round, stream, tokens, interval_ms, offset_us] => Some(Script::Tokens {
            round: round.parse().ok()?,
            stream: stream.parse().ok()?,
            tokens: tokens.parse().ok()?,
            interval_ms: interval_ms.parse().ok()?,
            offset_us: offset_us.parse().ok()?,
        }),
        _ => None,
    }
}

pub struct Mock {
    /// When each token chunk was written: (stream, k) -> instant just before the write.
    pub writes: Mutex<HashMap<(u32, u32), Instant>>,
    /// Highest released latency round and its start instant.
    pub go: watch::Sender<(u32, Instant)>,
    /// Chat requests received.
    pub chat_requests: AtomicUsize,
    /// Silent streams currently held open.
    pub silent_open: AtomicUsize,
    /// Anything unexpected (kept short).
    pub problems: Mutex<Vec<String>>,
}

impl Mock {
    pub fn problem(&self, p: String) {
        let mut v = lock(&self.problems);
        if v.len() < 50 {
            v.push(p);
        }
    }

    pub fn take_problems(&self) -> Vec<String> {
        std::mem::take(&mut *lock(&self.problems))
    }
}

pub async fn start_mock() -> Res<(Arc<Mock>, u16)> {
    let listener = TcpListener::bind("127.0.0.1:0").await?;
    let port = listener.local_addr()?.port();
    let (go, _) = watch::channel((0u32, Instant::now()));
    let mock = Arc::new(Mock {
        writes: Mutex::new(HashMap::new()),
        go,
        chat_requests: AtomicUsize::new(0),
        silent_open: AtomicUsize::new(0),
        problems: Mutex::new(Vec::new()),
    });
    let m = mock.clone();
    tokio::spawn(async move {
        loop {
            match listener.accept().await {
                Ok((sock, _)) => {
                    let m = m.clone();
                    tokio::spawn(async move {
                        if let Err(e) = mock_conn(sock, &m).await {
                            m.problem(format!("mock connection: {e}"));
                        }
                    });
                }
                Err(e) => {
                    m.problem(format!("mock accept: {e}"));
                    tokio::time::sleep(Duration::from_millis(20)).await;
                }
            }
        }
    });
    Ok((mock, port))
}

pub fn find(hay: &[u8], needle: &[u8]) -> Option<usize> {
    hay.windows(needle.len()).position(|w| w == needle)
}

/// Reads one request: head and (Content-Length) body; `None` if the peer closed the connection
/// before sending anything.
pub async fn read_request(sock: &mut TcpStream) -> Res<Option<(String, Vec<u8>)>> {
    let mut buf = Vec::with_capacity(4096);
    let mut chunk = [0u8; 4096];
    let head_end = loop {
        if let Some(i) = find(&buf, b"\r\n\r\n") {
            break i + 4;
        }
        if buf.len() > 64 * 1024 {
            return Err(fail("request head too large"));
        }
        let n = sock.read(&mut chunk).await?;
        if n == 0 && buf.is_empty() {
            return Ok(None);
        }
        if n == 0 {
            return Err(fail("connection closed before the request head ended"));
        }
        buf.extend_from_slice(&chunk[..n]);
    };
    let head = String::from_utf8_lossy(&buf[..head_end]).into_owned();
    let mut length = 0usize;
    for line in head.lines().skip(1) {
        if let Some((name, value)) = line.split_once(':') {
            let name = name.trim().to_ascii_lowercase();
            if name == "content-length" {
                length = value.trim().parse().map_err(|_| fail("bad content-length"))?;
            } else if name == "transfer-encoding" && value.to_ascii_lowercase().contains("chunked") {
                return Err(fail("chunked request bodies are not supported by the bench mock"));
            }
        }
    }
    let mut body = buf[head_end..].to_vec();
    while body.len() < length {
        let n = sock.read(&mut chunk).await?;
        if n == 0 {
            return Err(fail("connection closed inside the request body"));
        }
        body.extend_from_slice(&chunk[..n]);
    }
    Ok(Some((head, body)))
}

pub fn chunk(payload: &str) -> Vec<u8> {
    format!("{:x}\r\n{payload}\r\n", payload.len()).into_bytes()
}

pub fn delta_event(delta: &str) -> String {
    format!(
        "data: {{\"id\":\"c1\",\"object\":\"chat.completion.chunk\",\"created\":1,\"model\":\"bench-model\",\
\"choices\":[{{\"index\":0,\"delta\":{delta},\"finish_reason\":null}}]}}\n\n"
    )
}

pub fn token_event(text: &str) -> String {
    delta_event(&format!("{{\"content\":\"{text}\"}}"))
}

pub fn finish_events(output_tokens: u32) -> String {
    format!(
        "data: {{\"id\":\"c1\",\"object\":\"chat.completion.chunk\",\"created\":1,\"model\":\"bench-model\",\
\"choices\":[{{\"index\":0,\"delta\":{{}},\"finish_reason\":\"stop\"}}]}}\n\n\
data: {{\"id\":\"c1\",\"object\":\"chat.completion.chunk\",\"created\":1,\"model\":\"bench-model\",\
\"choices\":[],\"usage\":{{\"prompt_tokens\":10,\"completion_tokens\":{output_tokens},\"total_tokens\":{}}}}}\n\n\
data: [DONE]\n\n",
        output_tokens + 10
    )
}

pub const STREAM_HEAD: &str = "HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\nCache-Control: no-cache\r\n\
Transfer-Encoding: chunked\r\nConnection: close\r\n\r\n";

pub const STREAM_HEAD_KEEP_ALIVE: &str = "HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\n\
Cache-Control: no-cache\r\nTransfer-Encoding: chunked\r\n\r\n";

/// Serves one connection: one request, or several in a row as long as they are `Burst`s.
pub async fn mock_conn(mut sock: TcpStream, mock: &Mock) -> Res<()> {
    sock.set_nodelay(true)?;
    let mut served = 0usize;
    loop {
        let Some((head, body)) = read_request(&mut sock).await? else {
            if served == 0 {
                return Err(fail("connection closed before the request head ended"));
            }
            return Ok(());
        };
        served += 1;
        if !mock_request(&mut sock, mock, &head, &body).await? {
            break;
        }
    }
    sock.flush().await?;
    let _ = sock.shutdown().await;
    Ok(())
}

/// Answers one request; `true` when the connection stays open for another.
async fn mock_request(sock: &mut TcpStream, mock: &Mock, head: &str, body: &[u8]) -> Res<bool> {
    let first = head.lines().next().unwrap_or_default().to_string();
    let mut words = first.split_whitespace();
    let (method, path) = (words.next().unwrap_or_default(), words.next().unwrap_or_default());
    let path = path.split('?').next().unwrap_or_default();
    if method == "GET" && path.ends_with("/models") {
        let json = r#"{"object":"list","data":[{"id":"bench-model","object":"model","created":1,"owned_by":"bench"}]}"#;
        let res = format!(
            "HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{json}",
            json.len()
        );
        sock.write_all(res.as_bytes()).await?;
        return Ok(false);
    }
    if method != "POST" || !path.ends_with("/chat/completions") {
        mock.problem(format!("mock: unexpected request {first}"));
        sock.write_all(b"HTTP/1.1 404 Not Found\r\nContent-Length: 0\r\nConnection: close\r\n\r\n").await?;
        return Ok(false);
    }
    mock.chat_requests.fetch_add(1, Ordering::Relaxed);
    let body = String::from_utf8_lossy(body);
    let Some(script) = parse_script(&body) else {
        mock.problem(format!("mock: chat request without a BENCH marker: {}", &body[..body.len().min(200)]));
        let msg = r#"{"error":{"message":"no BENCH marker","type":"invalid_request_error"}}"#;
        let res = format!(
            "HTTP/1.1 400 Bad Request\r\nContent-Type: application/json\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{msg}",
            msg.len()
        );
        sock.write_all(res.as_bytes()).await?;
        return Ok(false);
    };
    let mut out = STREAM_HEAD.as_bytes().to_vec();
    match script {
        Script::Quick => {
            out.extend(chunk(&delta_event(r#"{"role":"assistant","content":""}"#)));
            out.extend(chunk(&token_event("ok")));
            out.extend(chunk(&finish_events(1)));
            out.extend(b"0\r\n\r\n");
            sock.write_all(&out).await?;
        }
        Script::Silent { secs } => {
            sock.write_all(&out).await?;
            mock.silent_open.fetch_add(1, Ordering::Relaxed);
            // Silence, unless Arbor hangs up first (a read returning 0 or an error).
            let mut probe = [0u8; 64];
            let _ = tokio::time::timeout(Duration::from_secs(secs), sock.read(&mut probe)).await;
            mock.silent_open.fetch_sub(1, Ordering::Relaxed);
        }
        Script::Burst { chunks, delay_ms } => {
            let mut out = STREAM_HEAD_KEEP_ALIVE.as_bytes().to_vec();
            out.extend(chunk(&delta_event(r#"{"role":"assistant","content":""}"#)));
            sock.write_all(&out).await?;
            for k in 0..chunks {
                if delay_ms > 0 {
                    tokio::time::sleep(Duration::from_millis(delay_ms)).await;
                }
                sock.write_all(&chunk(&token_event(&format!("b{k} ")))).await?;
            }
            let mut end = chunk(&finish_events(chunks));
            end.extend(b"0\r\n\r\n");
            sock.write_all(&end).await?;
            return Ok(true);
        }
        Script::Tokens { round, stream, tokens, interval_ms, offset_us } => {
            out.extend(chunk(&delta_event(r#"{"role":"assistant","content":""}"#)));
            sock.write_all(&out).await?;
            let mut go = mock.go.subscribe();
            let start = go.wait_for(|(r, _)| *r >= round).await.map(|g| g.1)?;
            let first = start + Duration::from_micros(offset_us);
            let interval = Duration::from_millis(interval_ms);
            for k in 0..tokens {
                tokio::time::sleep_until((first + interval * k).into()).await;
                let bytes = chunk(&token_event(&format!("t{stream}-{k} ")));
                let at = Instant::now();
                sock.write_all(&bytes).await?;
                lock(&mock.writes).insert((stream, k), at);
            }
            let mut end = chunk(&finish_events(tokens));
            end.extend(b"0\r\n\r\n");
            sock.write_all(&end).await?;
        }
    }
    Ok(false)
}

// ---------------------------------------------------------------------------------------------
// The server under test
// ---------------------------------------------------------------------------------------------

pub fn locate_binary() -> Res<PathBuf> {
    if let Some(p) = std::env::var_os("ARBOR_BIN") {
        let p = PathBuf::from(p);
        return if p.is_file() {
            Ok(p)
        } else {
            Err(fail(format!("ARBOR_BIN={} is not a file", p.display())))
        };
    }
    let mut tried = Vec::new();
    // This bench runs from <target>/release/deps/streaming-<hash>.
    if let Ok(exe) = std::env::current_exe()
        && let Some(release) = exe.parent().and_then(Path::parent)
    {
        tried.push(release.join("arbor"));
    }
    if let Some(dir) = std::env::var_os("CARGO_TARGET_DIR") {
        tried.push(PathBuf::from(dir).join("release").join("arbor"));
    }
    tried.push(Path::new(env!("CARGO_MANIFEST_DIR")).join("target/release/arbor"));
    for p in &tried {
        if p.is_file() {
            return Ok(p.clone());
        }
    }
    let list: Vec<String> = tried.iter().map(|p| p.display().to_string()).collect();
    Err(fail(format!(
        "no release binary of arbor found (looked at {}).\nBuild it first: `cargo build --release` \
         (with the same CARGO_TARGET_DIR), or point ARBOR_BIN at one.",
        list.join(", ")
    )))
}

/// Warns when sources are newer than the binary (it would measure old code), and when the
/// binary was not laid out by `link/code-order.txt` (see [`layout_warning`]).
pub fn staleness_warning(bin: &Path) -> Option<String> {
    let warnings: Vec<String> = [sources_newer(bin), layout_warning(bin)].into_iter().flatten().collect();
    (!warnings.is_empty()).then(|| warnings.join("\n"))
}

/// Warns when fewer than 80 % of the names in `link/code-order.txt` are in the binary: its code
/// then lies in the linker's order and its RSS is several MB higher than the list gives. The
/// list names legacy-mangled symbols, whose hashes follow cargo's profile: `cargo bench` builds
/// `release/arbor` again under the `bench` profile, where few of them match, so point
/// `ARBOR_BIN` at a copy of a release build (BENCHMARKS.md, "Browser path", how to run).
fn layout_warning(bin: &Path) -> Option<String> {
    let list =
        std::fs::read_to_string(Path::new(env!("CARGO_MANIFEST_DIR")).join("link/code-order.txt")).ok()?;
    let listed: std::collections::HashSet<&str> =
        list.lines().filter(|l| !l.is_empty() && !l.starts_with('#')).collect();
    let out = Command::new("nm").arg(bin).stderr(Stdio::null()).output().ok()?;
    let names = String::from_utf8_lossy(&out.stdout);
    let present: std::collections::HashSet<&str> =
        names.lines().filter_map(|l| l.split_whitespace().nth(2)).filter(|n| listed.contains(n)).collect();
    if present.is_empty() && names.is_empty() {
        return None; // stripped (the dist profile): nothing to compare
    }
    (present.len() * 100 < listed.len() * 80).then(|| {
        format!(
            "warning: only {} of the {} names in link/code-order.txt are in {}: its code is not laid \
             out by the list, so its RSS is higher than a matching build's (a `cargo bench` build \
             of release/arbor never matches: build with `cargo build --release` after it)",
            present.len(),
            listed.len(),
            bin.display()
        )
    })
}

/// Names the newest source file when it is newer than the binary.
fn sources_newer(bin: &Path) -> Option<String> {
    let built = std::fs::metadata(bin).and_then(|m| m.modified()).ok()?;
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let mut newest: Option<(SystemTime, PathBuf)> = None;
    let mut stack = vec![root.join("src"), root.join("templates"), root.join("migration/src")];
    while let Some(dir) = stack.pop() {
        let Ok(rd) = std::fs::read_dir(&dir) else { continue };
        for e in rd.flatten() {
            let p = e.path();
            if p.is_dir() {
                stack.push(p);
            } else if let Ok(t) = e.metadata().and_then(|m| m.modified())
                && newest.as_ref().is_none_or(|(n, _)| t > *n)
            {
                newest = Some((t, p));
            }
        }
    }
    let (t, p) = newest?;
    (t > built).then(|| {
        format!(
            "warning: {} is newer than {}; rebuild with `cargo build --release`",
            p.display(),
            bin.display()
        )
    })
}

pub struct Server {
    pub child: Child,
    pub pid: u32,
    pub port: u16,
    pub dir: Option<tempfile::TempDir>,
    pub log: PathBuf,
    pub keep: bool,
}

impl Server {
    pub fn base(&self) -> String {
        format!("http://127.0.0.1:{}", self.port)
    }

    pub fn stop(mut self, failed: bool) {
        let _ = Command::new("kill").args(["-TERM", &self.pid.to_string()]).status();
        let deadline = Instant::now() + Duration::from_secs(15);
        loop {
            match self.child.try_wait() {
                Ok(Some(_)) => break,
                Ok(None) if Instant::now() < deadline => std::thread::sleep(Duration::from_millis(50)),
                _ => {
                    eprintln!("server did not exit within 15 s of SIGTERM; killing it");
                    let _ = self.child.kill();
                    let _ = self.child.wait();
                    break;
                }
            }
        }
        if let Some(dir) = self.dir.take()
            && (self.keep || failed)
        {
            let kept = dir.keep();
            eprintln!("kept the server's directory {} (log: {})", kept.display(), self.log.display());
        }
    }
}

pub fn free_port() -> Res<u16> {
    Ok(std::net::TcpListener::bind("127.0.0.1:0")?.local_addr()?.port())
}

pub const EMAIL: &str = "bench@example.com";
pub const PASSWORD: &str = "bench-password-0123456789";

/// `arbor admin create` of the bench's account (`EMAIL`, `PASSWORD`), with `env` added to the
/// command's environment; the password file is written next to `config`.
pub fn admin_create(bin: &Path, config: &Path, data: &Path, env: &[(String, String)]) -> Res<()> {
    let pw = config.with_file_name("password");
    std::fs::write(&pw, PASSWORD)?;
    let out = Command::new(bin)
        .envs(env.iter().map(|(k, v)| (k, v)))
        .arg("--config")
        .arg(config)
        .args(["admin", "create", "--email", EMAIL, "--password-file"])
        .arg(&pw)
        .arg("--data-dir")
        .arg(data)
        .output()?;
    if !out.status.success() {
        return Err(fail(format!(
            "`arbor admin create` failed ({}): {}{}",
            out.status,
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        )));
    }
    Ok(())
}

/// `arbor admin token` for the bench's account (`EMAIL`): an `api` token named `name`, with
/// `env` added to the command's environment.
pub fn admin_token(
    bin: &Path,
    config: &Path,
    data: &Path,
    env: &[(String, String)],
    name: &str,
) -> Res<String> {
    let out = Command::new(bin)
        .envs(env.iter().map(|(k, v)| (k, v)))
        .arg("--config")
        .arg(config)
        .args(["admin", "token", "--email", EMAIL, "--name", name, "--scope", "api"])
        .arg("--data-dir")
        .arg(data)
        .output()?;
    let token = String::from_utf8_lossy(&out.stdout).trim().to_string();
    if !out.status.success() || token.is_empty() {
        return Err(fail(format!(
            "`arbor admin token` failed ({}): {}",
            out.status,
            String::from_utf8_lossy(&out.stderr)
        )));
    }
    Ok(token)
}

/// How to start `arbor serve`.
pub struct Launch<'a> {
    pub bin: &'a Path,
    pub config: &'a Path,
    pub data: &'a Path,
    /// Where its standard output and error go.
    pub log: PathBuf,
    /// Added to its environment.
    pub env: Vec<(String, String)>,
    /// Pinned with `taskset -c LIST`.
    pub cpus: Option<String>,
    /// The path polled until it answers 2xx, e.g. `/healthz`.
    pub health: &'a str,
    /// The folder the server's files are in, removed when it stops (unless kept).
    pub dir: Option<tempfile::TempDir>,
    pub keep: bool,
}

/// Starts `arbor serve` on a free port and waits (30 s at most) for `health` to answer.
pub async fn serve(l: Launch<'_>) -> Res<Server> {
    let port = free_port()?;
    let logfile = std::fs::File::create(&l.log)?;
    let pin = match &l.cpus {
        Some(list) => format!("taskset -c {list} "),
        None => String::new(),
    };
    // As many descriptors as the hard limit allows (10,000 SSE clients + upstream + database).
    let script = format!(
        "ulimit -n 65536 2>/dev/null || ulimit -n \"$(ulimit -H -n)\"; \
         exec {pin}\"$0\" --config \"$1\" serve --bind \"$2\" --data-dir \"$3\""
    );
    let child = Command::new("sh")
        .arg("-c")
        .arg(script)
        .arg(l.bin)
        .arg(l.config)
        .arg(format!("127.0.0.1:{port}"))
        .arg(l.data)
        .envs(l.env.iter().map(|(k, v)| (k, v)))
        .stdin(Stdio::null())
        .stdout(logfile.try_clone()?)
        .stderr(logfile)
        .spawn()?;
    let pid = child.id();
    let server = Server { child, pid, port, dir: l.dir, log: l.log, keep: l.keep };
    let http = reqwest::Client::new();
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        if let Ok(r) = http.get(format!("{}{}", server.base(), l.health)).send().await
            && r.status().is_success()
        {
            break;
        }
        if Instant::now() > deadline {
            let log = std::fs::read_to_string(&server.log).unwrap_or_default();
            server.stop(true);
            return Err(fail(format!("arbor did not answer {} within 30 s. Log:\n{log}", l.health)));
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    Ok(server)
}

// ---------------------------------------------------------------------------------------------
// /proc
// ---------------------------------------------------------------------------------------------

/// (soft, hard) limit on open files; `None` = unlimited.
pub fn nofile_limits(pid: &str) -> Option<(Option<u64>, Option<u64>)> {
    let text = std::fs::read_to_string(format!("/proc/{pid}/limits")).ok()?;
    let line = text.lines().find(|l| l.starts_with("Max open files"))?;
    let mut f = line["Max open files".len()..].split_whitespace();
    let v = |s: Option<&str>| s.and_then(|s| s.parse::<u64>().ok());
    Some((v(f.next()), v(f.next())))
}

#[derive(Clone, Copy, Default, Debug)]
pub struct Mem {
    pub rss_kb: u64,
    pub hwm_kb: u64,
    pub threads: u64,
    pub fds: u64,
}

pub fn mem(pid: u32) -> Mem {
    let mut m = Mem::default();
    if let Ok(text) = std::fs::read_to_string(format!("/proc/{pid}/status")) {
        for line in text.lines() {
            let val = || line.split_whitespace().nth(1).and_then(|v| v.parse::<u64>().ok()).unwrap_or(0);
            if line.starts_with("VmRSS:") {
                m.rss_kb = val();
            } else if line.starts_with("VmHWM:") {
                m.hwm_kb = val();
            } else if line.starts_with("Threads:") {
                m.threads = val();
            }
        }
    }
    m.fds = std::fs::read_dir(format!("/proc/{pid}/fd")).map(|d| d.count() as u64).unwrap_or(0);
    m
}

/// User + system CPU time of a process, in clock ticks.
pub fn cpu_ticks(pid: u32) -> u64 {
    let Ok(stat) = std::fs::read_to_string(format!("/proc/{pid}/stat")) else { return 0 };
    let Some(after) = stat.rfind(')').map(|i| &stat[i + 1..]) else { return 0 };
    // Fields after the command: state is #3, utime #14, stime #15 (1-based over the whole line).
    let f: Vec<&str> = after.split_whitespace().collect();
    let get = |i: usize| f.get(i).and_then(|v| v.parse::<u64>().ok()).unwrap_or(0);
    get(11) + get(12)
}

pub fn clock_ticks_per_sec() -> u64 {
    Command::new("getconf")
        .arg("CLK_TCK")
        .output()
        .ok()
        .and_then(|o| String::from_utf8_lossy(&o.stdout).trim().parse().ok())
        .unwrap_or(100)
}

pub fn mib(kb: u64) -> String {
    format!("{:.1} MiB", kb as f64 / 1024.0)
}

// ---------------------------------------------------------------------------------------------
// Talking to Arbor
// ---------------------------------------------------------------------------------------------

#[derive(Clone)]
pub struct Auth {
    pub base: String,
    pub cookie: String,
    pub csrf: String,
}

pub fn http_client() -> Res<reqwest::Client> {
    Ok(reqwest::Client::builder()
        .redirect(reqwest::redirect::Policy::none())
        // Below actix's 5 s keep-alive, so a pooled connection is never reused as it closes.
        .pool_idle_timeout(Duration::from_secs(2))
        .tcp_nodelay(true)
        .build()?)
}

pub fn form_encode(pairs: &[(&str, &str)]) -> String {
    let enc = |s: &str| {
        let mut out = String::new();
        for b in s.bytes() {
            if b.is_ascii_alphanumeric() || b"-_.~".contains(&b) {
                out.push(b as char);
            } else {
                let _ = write!(out, "%{b:02X}");
            }
        }
        out
    };
    pairs.iter().map(|(k, v)| format!("{}={}", enc(k), enc(v))).collect::<Vec<_>>().join("&")
}

pub async fn login(http: &reqwest::Client, base: &str) -> Res<Auth> {
    let res = http
        .post(format!("{base}/login"))
        .header("Origin", base)
        .header("Content-Type", "application/x-www-form-urlencoded")
        .body(form_encode(&[("email", EMAIL), ("password", PASSWORD)]))
        .send()
        .await?;
    if res.status().as_u16() != 303 {
        let s = res.status();
        return Err(fail(format!("POST /login answered {s}: {}", res.text().await.unwrap_or_default())));
    }
    let cookie = res
        .headers()
        .get_all("set-cookie")
        .iter()
        .filter_map(|v| v.to_str().ok())
        .filter_map(|v| v.split(';').next())
        .find(|c| c.contains("arbor_session="))
        .ok_or_else(|| fail("POST /login set no arbor_session cookie"))?
        .to_string();
    let page = http.get(format!("{base}/")).header("Cookie", &cookie).send().await?.text().await?;
    let marker = "<meta name=\"csrf-token\" content=\"";
    let at = page.find(marker).ok_or_else(|| fail("GET / has no csrf-token meta: not signed in?"))?;
    let rest = &page[at + marker.len()..];
    let csrf = rest[..rest.find('"').unwrap_or(0)].to_string();
    Ok(Auth { base: base.to_string(), cookie, csrf })
}

pub fn client_id() -> String {
    uuid::Uuid::new_v4().simple().to_string()
}

pub fn post(http: &reqwest::Client, auth: &Auth, path: &str, body: String) -> reqwest::RequestBuilder {
    http.post(format!("{}{path}", auth.base))
        .header("Cookie", &auth.cookie)
        .header("X-CSRF-Token", &auth.csrf)
        .header("Origin", &auth.base)
        .header("HX-Request", "true")
        .header("Content-Type", "application/x-www-form-urlencoded")
        .body(body)
}

/// `POST /sessions`: a new session whose first reply is `message`; returns the session id.
pub async fn create_session(http: &reqwest::Client, auth: &Auth, message: &str) -> Res<String> {
    let body =
        form_encode(&[("message", message), ("client_id", &client_id()), ("model", "mock/bench-model")]);
    let res = post(http, auth, "/sessions", body).send().await?;
    let status = res.status();
    let to = res.headers().get("hx-redirect").and_then(|v| v.to_str().ok()).map(str::to_string);
    match (status.as_u16(), to) {
        (200, Some(to)) => {
            Ok(to.strip_prefix("/s/").ok_or_else(|| fail(format!("odd HX-Redirect {to}")))?.to_string())
        }
        _ => Err(fail(format!("POST /sessions answered {status}: {}", res.text().await.unwrap_or_default()))),
    }
}

/// `POST /s/{sid}/messages`: returns the id of the assistant message being written.
pub async fn post_message(http: &reqwest::Client, auth: &Auth, sid: &str, message: &str) -> Res<String> {
    let body =
        form_encode(&[("message", message), ("client_id", &client_id()), ("model", "mock/bench-model")]);
    let res = post(http, auth, &format!("/s/{sid}/messages"), body).send().await?;
    let status = res.status();
    let html = res.text().await.unwrap_or_default();
    if status.as_u16() != 200 {
        return Err(fail(format!(
            "POST /s/{sid}/messages answered {status}: {}",
            &html[..html.len().min(300)]
        )));
    }
    let marker = format!("sse-connect=\"/s/{sid}/events?m=");
    let at = html.find(&marker).ok_or_else(|| fail("the posted turn has no sse-connect for the reply"))?;
    let rest = &html[at + marker.len()..];
    Ok(rest[..rest.find('"').unwrap_or(0)].to_string())
}

/// Server-Sent Events split from a byte stream.
#[derive(Default)]
pub struct SseSplitter {
    buf: Vec<u8>,
}

pub struct SseEvent {
    pub name: String,
    pub data: String,
}

impl SseSplitter {
    pub fn push(&mut self, bytes: &[u8]) -> Vec<SseEvent> {
        self.buf.extend(bytes.iter().filter(|b| **b != b'\r'));
        let mut out = Vec::new();
        while let Some(i) = find(&self.buf, b"\n\n") {
            let block: Vec<u8> = self.buf.drain(..i + 2).collect();
            let text = String::from_utf8_lossy(&block);
            let (mut name, mut data) = (String::from("message"), Vec::new());
            for line in text.lines() {
                if let Some(v) = line.strip_prefix("event:") {
                    name = v.trim_start().to_string();
                } else if let Some(v) = line.strip_prefix("data:") {
                    data.push(v.strip_prefix(' ').unwrap_or(v).to_string());
                }
            }
            if !data.is_empty() || name != "message" {
                out.push(SseEvent { name, data: data.join("\n") });
            }
        }
        out
    }
}

/// Reads a session's event stream until `done` (or the deadline); for waiting out a reply.
pub async fn wait_reply_over(http: &reqwest::Client, auth: &Auth, sid: &str, limit: Duration) -> Res<()> {
    let res = http
        .get(format!("{}/s/{sid}/events", auth.base))
        .header("Cookie", &auth.cookie)
        .header("Accept", "text/event-stream")
        .send()
        .await?;
    if !res.status().is_success() {
        return Err(fail(format!("GET /s/{sid}/events answered {}", res.status())));
    }
    let mut body = res.bytes_stream();
    let mut sse = SseSplitter::default();
    let deadline = tokio::time::Instant::now() + limit;
    loop {
        match tokio::time::timeout_at(deadline, body.next()).await {
            Err(_) => return Err(fail(format!("session {sid}: no `done` within {limit:?}"))),
            Ok(None) => return Err(fail(format!("session {sid}: stream ended without `done`"))),
            Ok(Some(chunk)) => {
                if sse.push(&chunk?).iter().any(|e| e.name == "done") {
                    return Ok(());
                }
            }
        }
    }
}

/// Runs `f` over `items` with at most `width` at a time; returns the results in order.
pub async fn in_parallel<T, R, F, Fut>(items: Vec<T>, width: usize, f: F) -> Vec<R>
where
    T: Send + 'static,
    R: Send + 'static,
    F: Fn(T) -> Fut + Clone + Send + 'static,
    Fut: std::future::Future<Output = R> + Send,
{
    let gate = Arc::new(Semaphore::new(width));
    let mut set = JoinSet::new();
    for (i, item) in items.into_iter().enumerate() {
        let (gate, f) = (gate.clone(), f.clone());
        set.spawn(async move {
            let _permit = gate.acquire_owned().await;
            (i, f(item).await)
        });
    }
    let mut out: Vec<(usize, R)> = Vec::new();
    while let Some(r) = set.join_next().await {
        if let Ok(r) = r {
            out.push(r);
        }
    }
    out.sort_by_key(|(i, _)| *i);
    out.into_iter().map(|(_, r)| r).collect()
}

/// Creates `n` sessions whose first reply is `message`; fails on the first error.
pub async fn create_sessions(
    http: &reqwest::Client,
    auth: &Auth,
    n: usize,
    message: &str,
) -> Res<Vec<String>> {
    let (http, auth, message) = (http.clone(), auth.clone(), message.to_string());
    let results = in_parallel((0..n).collect(), 16, move |_| {
        let (http, auth, message) = (http.clone(), auth.clone(), message.clone());
        async move { create_session(&http, &auth, &message).await }
    })
    .await;
    let mut ids = Vec::with_capacity(n);
    for r in results {
        ids.push(r?);
    }
    if ids.len() != n {
        return Err(fail("a session-creating task panicked"));
    }
    Ok(ids)
}

/// Parses the tokens of one `delta` event: `<span class="delta">t5-0 t5-1 </span>`.
pub fn delta_tokens(data: &str, stream: u32, into: &mut Vec<u32>) {
    let text = data.strip_prefix("<span class=\"delta\">").unwrap_or(data);
    let text = text.strip_suffix("</span>").unwrap_or(text);
    for word in text.split_whitespace() {
        if let Some((s, k)) = word.strip_prefix('t').and_then(|w| w.split_once('-'))
            && s.parse::<u32>().ok() == Some(stream)
            && let Ok(k) = k.parse::<u32>()
        {
            into.push(k);
        }
    }
}

pub fn pct(sorted: &[u64], p: f64) -> u64 {
    if sorted.is_empty() {
        return 0;
    }
    let rank = ((p / 100.0) * sorted.len() as f64).ceil() as usize;
    sorted[rank.clamp(1, sorted.len()) - 1]
}

pub fn ms(us: u64) -> String {
    format!("{:.2} ms", us as f64 / 1000.0)
}

pub fn git_describe() -> String {
    let root = env!("CARGO_MANIFEST_DIR");
    let run = |args: &[&str]| {
        Command::new("git")
            .arg("-C")
            .arg(root)
            .args(args)
            .output()
            .ok()
            .filter(|o| o.status.success())
            .map(|o| String::from_utf8_lossy(&o.stdout).trim().to_string())
    };
    let head = run(&["rev-parse", "--short", "HEAD"]).unwrap_or_else(|| "unknown".into());
    let dirty = run(&["status", "--porcelain", "--untracked-files=no"]).is_some_and(|s| !s.is_empty());
    if dirty { format!("{head} + uncommitted changes") } else { head }
}

/// Prints the results and, when asked, writes them to `bench/results/<file>`.
pub fn report(md: &str, write: bool, file: &str) -> Res<()> {
    println!("{md}");
    if write {
        let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("bench/results");
        std::fs::create_dir_all(&dir)?;
        let path = dir.join(file);
        std::fs::write(&path, md)?;
        eprintln!("written to {}", path.display());
    }
    Ok(())
}

/// A bench's `main`: the TLS provider, its options (exit code 2 when they are wrong), a tokio
/// runtime, and `run` on it.
pub fn bench_main<O, F>(
    name: &str,
    parse: impl FnOnce() -> Res<O>,
    run: impl FnOnce(O) -> F,
) -> std::process::ExitCode
where
    F: std::future::Future<Output = Res<()>>,
{
    // reqwest is built without a default TLS provider; Arbor installs ring, and so do we.
    let _ = rustls::crypto::ring::default_provider().install_default();
    let opts = match parse() {
        Ok(o) => o,
        Err(e) => {
            eprintln!("{e}");
            return std::process::ExitCode::from(2);
        }
    };
    let runtime = match tokio::runtime::Builder::new_multi_thread().enable_all().build() {
        Ok(r) => r,
        Err(e) => {
            eprintln!("cannot start tokio: {e}");
            return std::process::ExitCode::FAILURE;
        }
    };
    match runtime.block_on(run(opts)) {
        Ok(()) => std::process::ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("{name} bench failed: {e}");
            std::process::ExitCode::FAILURE
        }
    }
}
