//! Streaming benchmark: added SSE latency under concurrency, and memory of idle SSE connections.
//!
//! ```sh
//! cargo build --release                       # the bench runs this binary, it builds nothing
//! ulimit -n 20000                             # the idle phase holds ~11,000 sockets in this process
//! cargo bench --bench streaming -- [latency|idle|all] [options]
//! ```
//!
//! The bench starts the release binary (`$ARBOR_BIN`, else `release/arbor` next to this bench's
//! own executable, else `$CARGO_TARGET_DIR/release/arbor`) in a fresh data directory, with a
//! config that points provider `mock` at an OpenAI-compatible upstream served by this process
//! (hand-written HTTP/1.1, chunked SSE, one chunk per event, `TCP_NODELAY`). The mock notes the
//! `Instant` just before it writes each token chunk; the SSE clients note the `Instant` each
//! chunk of the event stream arrives. Both use this process's monotonic clock, so
//! `arrival - write` is the latency Arbor adds (provider parsing, run task, coalescing, broadcast,
//! SSE framing and two loopback hops).
//!
//! - `latency`: for each level (default 1, 100, 1000 concurrent streams, one session each) every
//!   stream posts a message whose reply the mock holds back until every client has its
//!   `snapshot`; then each stream gets `--tokens` unique tokens (`t<stream>-<k> `)
//!   `--interval-ms` apart, the streams' start times spread evenly over one interval. Levels
//!   with few streams send more tokens per stream so each level has at least `--min-samples`.
//! - `idle`: a fresh server; `--idle-sessions` sessions each get a reply the mock answers with
//!   response headers and then silence; `--idle-conns` raw TCP SSE connections (spread evenly
//!   over the sessions) are opened and held for `--hold-secs`. The server's VmRSS/VmHWM are read
//!   from `/proc/<pid>/status` before, with the silent runs, while the connections are open, and
//!   after they close.
//!
//! Results are printed as markdown and written to `bench/results/arbor-streaming.md`.

use std::collections::HashMap;
use std::fmt::Write as _;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::atomic::{AtomicU32, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};
use std::time::{Duration, Instant, SystemTime};

use futures_util::StreamExt;
use tokio::io::{AsyncReadExt as _, AsyncWriteExt as _};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::{Semaphore, watch};
use tokio::task::JoinSet;

type Error = Box<dyn std::error::Error + Send + Sync>;
type Res<T> = Result<T, Error>;

fn fail(msg: impl Into<String>) -> Error {
    msg.into().into()
}

fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(PoisonError::into_inner)
}

const USAGE: &str = "\
usage: cargo bench --bench streaming -- [latency|idle|all] [options]

  --levels 1,100,1000     concurrent streams per latency level
  --tokens 20             tokens per stream
  --interval-ms 100       gap between two tokens of a stream
  --min-samples 300       at least this many tokens per level (few streams send more tokens)
  --idle-conns 10000      SSE connections held open in the idle phase
  --idle-sessions 1000    sessions (silent live runs) they are spread over
  --hold-secs 20          how long the idle connections are held (RSS sampled every second)
  --workers 2             Arbor's server.workers
  --server-cpus LIST      pin the server with `taskset -c LIST`
  --keep                  keep the server's data directory and log
  --no-write              do not write bench/results/arbor-streaming.md

env: ARBOR_BIN (binary to run), CARGO_TARGET_DIR (where release/arbor is looked for)";

#[derive(Clone, Copy, PartialEq, Eq, Debug)]
enum Mode {
    Latency,
    Idle,
    All,
}

#[derive(Clone, Debug)]
struct Opts {
    mode: Mode,
    levels: Vec<usize>,
    tokens: usize,
    interval: Duration,
    min_samples: usize,
    idle_conns: usize,
    idle_sessions: usize,
    hold: Duration,
    workers: usize,
    server_cpus: Option<String>,
    keep: bool,
    write: bool,
}

fn parse_args() -> Res<Opts> {
    let mut o = Opts {
        mode: Mode::All,
        levels: vec![1, 100, 1000],
        tokens: 20,
        interval: Duration::from_millis(100),
        min_samples: 300,
        idle_conns: 10_000,
        idle_sessions: 1000,
        hold: Duration::from_secs(20),
        workers: 2,
        server_cpus: None,
        keep: false,
        write: true,
    };
    let mut args = std::env::args().skip(1);
    let num = |name: &str, v: Option<String>| -> Res<usize> {
        let v = v.ok_or_else(|| fail(format!("{name} needs a value")))?;
        v.parse::<usize>().map_err(|_| fail(format!("{name}: not a number: {v}")))
    };
    while let Some(a) = args.next() {
        match a.as_str() {
            // `cargo bench` passes `--bench` to harness-less benches.
            "--bench" => {}
            "latency" => o.mode = Mode::Latency,
            "idle" => o.mode = Mode::Idle,
            "all" => o.mode = Mode::All,
            "--levels" => {
                let v = args.next().ok_or_else(|| fail("--levels needs a value"))?;
                o.levels = v
                    .split(',')
                    .map(|s| s.trim().parse::<usize>().map_err(|_| fail(format!("--levels: bad number {s}"))))
                    .collect::<Res<Vec<_>>>()?;
            }
            "--tokens" => o.tokens = num(&a, args.next())?,
            "--interval-ms" => o.interval = Duration::from_millis(num(&a, args.next())? as u64),
            "--min-samples" => o.min_samples = num(&a, args.next())?,
            "--idle-conns" => o.idle_conns = num(&a, args.next())?,
            "--idle-sessions" => o.idle_sessions = num(&a, args.next())?,
            "--hold-secs" => o.hold = Duration::from_secs(num(&a, args.next())? as u64),
            "--workers" => o.workers = num(&a, args.next())?,
            "--server-cpus" => {
                o.server_cpus = Some(args.next().ok_or_else(|| fail("--server-cpus needs a value"))?)
            }
            "--keep" => o.keep = true,
            "--no-write" => o.write = false,
            "-h" | "--help" => {
                println!("{USAGE}");
                std::process::exit(0);
            }
            other => return Err(fail(format!("unknown argument {other}\n\n{USAGE}"))),
        }
    }
    if o.levels.is_empty() || o.levels.contains(&0) || o.tokens == 0 || o.interval.is_zero() {
        return Err(fail("levels, tokens and interval must be positive"));
    }
    if o.idle_sessions == 0 || o.idle_conns < o.idle_sessions {
        return Err(fail("--idle-conns must be at least --idle-sessions, which must be positive"));
    }
    Ok(o)
}

// ---------------------------------------------------------------------------------------------
// The mock upstream
// ---------------------------------------------------------------------------------------------

/// What the mock was asked to do, from the `BENCH:...` marker in the last user message.
#[derive(Debug, Clone, Copy)]
enum Script {
    /// One short token, then the end: used for the sessions' first replies.
    Quick,
    /// Latency round: wait for the round's release, then `tokens` tokens.
    Tokens { round: u32, stream: u32, tokens: u32, interval_ms: u64, offset_us: u64 },
    /// Response head, then silence for `secs`.
    Silent { secs: u64 },
}

fn parse_script(body: &str) -> Option<Script> {
    let at = body.rfind("BENCH:")?;
    let rest = &body[at + 6..];
    let end = rest.find(|c: char| !(c.is_ascii_alphanumeric() || c == ':')).unwrap_or(rest.len());
    let f: Vec<&str> = rest[..end].split(':').collect();
    match f.as_slice() {
        ["quick"] => Some(Script::Quick),
        ["silent", secs] => Some(Script::Silent { secs: secs.parse().ok()? }),
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

struct Mock {
    /// When each token chunk was written: (stream, k) -> instant just before the write.
    writes: Mutex<HashMap<(u32, u32), Instant>>,
    /// Highest released latency round and its start instant.
    go: watch::Sender<(u32, Instant)>,
    /// Chat requests received.
    chat_requests: AtomicUsize,
    /// Silent streams currently held open.
    silent_open: AtomicUsize,
    /// Anything unexpected (kept short).
    problems: Mutex<Vec<String>>,
}

impl Mock {
    fn problem(&self, p: String) {
        let mut v = lock(&self.problems);
        if v.len() < 50 {
            v.push(p);
        }
    }

    fn take_problems(&self) -> Vec<String> {
        std::mem::take(&mut *lock(&self.problems))
    }
}

async fn start_mock() -> Res<(Arc<Mock>, u16)> {
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

fn find(hay: &[u8], needle: &[u8]) -> Option<usize> {
    hay.windows(needle.len()).position(|w| w == needle)
}

/// Reads one request: head and (Content-Length) body.
async fn read_request(sock: &mut TcpStream) -> Res<(String, Vec<u8>)> {
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
    Ok((head, body))
}

fn chunk(payload: &str) -> Vec<u8> {
    format!("{:x}\r\n{payload}\r\n", payload.len()).into_bytes()
}

fn delta_event(delta: &str) -> String {
    format!(
        "data: {{\"id\":\"c1\",\"object\":\"chat.completion.chunk\",\"created\":1,\"model\":\"bench-model\",\
\"choices\":[{{\"index\":0,\"delta\":{delta},\"finish_reason\":null}}]}}\n\n"
    )
}

fn token_event(text: &str) -> String {
    delta_event(&format!("{{\"content\":\"{text}\"}}"))
}

fn finish_events(output_tokens: u32) -> String {
    format!(
        "data: {{\"id\":\"c1\",\"object\":\"chat.completion.chunk\",\"created\":1,\"model\":\"bench-model\",\
\"choices\":[{{\"index\":0,\"delta\":{{}},\"finish_reason\":\"stop\"}}]}}\n\n\
data: {{\"id\":\"c1\",\"object\":\"chat.completion.chunk\",\"created\":1,\"model\":\"bench-model\",\
\"choices\":[],\"usage\":{{\"prompt_tokens\":10,\"completion_tokens\":{output_tokens},\"total_tokens\":{}}}}}\n\n\
data: [DONE]\n\n",
        output_tokens + 10
    )
}

const STREAM_HEAD: &str = "HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\nCache-Control: no-cache\r\n\
Transfer-Encoding: chunked\r\nConnection: close\r\n\r\n";

async fn mock_conn(mut sock: TcpStream, mock: &Mock) -> Res<()> {
    sock.set_nodelay(true)?;
    let (head, body) = read_request(&mut sock).await?;
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
        return Ok(());
    }
    if method != "POST" || !path.ends_with("/chat/completions") {
        mock.problem(format!("mock: unexpected request {first}"));
        sock.write_all(b"HTTP/1.1 404 Not Found\r\nContent-Length: 0\r\nConnection: close\r\n\r\n").await?;
        return Ok(());
    }
    mock.chat_requests.fetch_add(1, Ordering::Relaxed);
    let body = String::from_utf8_lossy(&body);
    let Some(script) = parse_script(&body) else {
        mock.problem(format!("mock: chat request without a BENCH marker: {}", &body[..body.len().min(200)]));
        let msg = r#"{"error":{"message":"no BENCH marker","type":"invalid_request_error"}}"#;
        let res = format!(
            "HTTP/1.1 400 Bad Request\r\nContent-Type: application/json\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{msg}",
            msg.len()
        );
        sock.write_all(res.as_bytes()).await?;
        return Ok(());
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
    sock.flush().await?;
    let _ = sock.shutdown().await;
    Ok(())
}

// ---------------------------------------------------------------------------------------------
// The server under test
// ---------------------------------------------------------------------------------------------

fn locate_binary() -> Res<PathBuf> {
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

/// Warns when sources are newer than the binary (it would measure old code).
fn staleness_warning(bin: &Path) -> Option<String> {
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

struct Server {
    child: Child,
    pid: u32,
    port: u16,
    dir: Option<tempfile::TempDir>,
    log: PathBuf,
    keep: bool,
}

impl Server {
    fn base(&self) -> String {
        format!("http://127.0.0.1:{}", self.port)
    }

    fn stop(mut self, failed: bool) {
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

fn free_port() -> Res<u16> {
    Ok(std::net::TcpListener::bind("127.0.0.1:0")?.local_addr()?.port())
}

const EMAIL: &str = "bench@example.com";
const PASSWORD: &str = "bench-password-0123456789";

async fn start_server(bin: &Path, mock_port: u16, opts: &Opts) -> Res<Server> {
    let dir = tempfile::Builder::new().prefix("arbor-bench-").tempdir()?;
    let data = dir.path().join("data");
    let config = dir.path().join("bench.toml");
    let log = dir.path().join("server.log");
    std::fs::write(
        &config,
        format!(
            "[server]\nworkers = {workers}\n\n[log]\nlevel = \"info\"\nformat = \"pretty\"\n\n\
[llm]\ndetect_local_ollama = false\nidle_timeout_secs = 600\n\n\
[llm.providers.mock]\nkind = \"openai_compatible\"\nbase_url = \"http://127.0.0.1:{mock_port}/v1\"\n\
models = [\"bench-model\"]\n",
            workers = opts.workers
        ),
    )?;
    let pw = dir.path().join("password");
    std::fs::write(&pw, PASSWORD)?;
    let out = Command::new(bin)
        .arg("--config")
        .arg(&config)
        .args(["admin", "create", "--email", EMAIL, "--password-file"])
        .arg(&pw)
        .arg("--data-dir")
        .arg(&data)
        .output()?;
    if !out.status.success() {
        return Err(fail(format!(
            "`arbor admin create` failed ({}): {}{}",
            out.status,
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        )));
    }
    let port = free_port()?;
    let logfile = std::fs::File::create(&log)?;
    let pin = match &opts.server_cpus {
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
        .arg(bin)
        .arg(&config)
        .arg(format!("127.0.0.1:{port}"))
        .arg(&data)
        .stdin(Stdio::null())
        .stdout(logfile.try_clone()?)
        .stderr(logfile)
        .spawn()?;
    let pid = child.id();
    let server = Server { child, pid, port, dir: Some(dir), log, keep: opts.keep };
    let http = reqwest::Client::new();
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        if let Ok(r) = http.get(format!("{}/healthz", server.base())).send().await
            && r.status().is_success()
        {
            break;
        }
        if Instant::now() > deadline {
            let log = std::fs::read_to_string(&server.log).unwrap_or_default();
            server.stop(true);
            return Err(fail(format!("arbor did not answer /healthz within 30 s. Log:\n{log}")));
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    Ok(server)
}

// ---------------------------------------------------------------------------------------------
// /proc
// ---------------------------------------------------------------------------------------------

/// (soft, hard) limit on open files; `None` = unlimited.
fn nofile_limits(pid: &str) -> Option<(Option<u64>, Option<u64>)> {
    let text = std::fs::read_to_string(format!("/proc/{pid}/limits")).ok()?;
    let line = text.lines().find(|l| l.starts_with("Max open files"))?;
    let mut f = line["Max open files".len()..].split_whitespace();
    let v = |s: Option<&str>| s.and_then(|s| s.parse::<u64>().ok());
    Some((v(f.next()), v(f.next())))
}

#[derive(Clone, Copy, Default, Debug)]
struct Mem {
    rss_kb: u64,
    hwm_kb: u64,
    threads: u64,
    fds: u64,
}

fn mem(pid: u32) -> Mem {
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
fn cpu_ticks(pid: u32) -> u64 {
    let Ok(stat) = std::fs::read_to_string(format!("/proc/{pid}/stat")) else { return 0 };
    let Some(after) = stat.rfind(')').map(|i| &stat[i + 1..]) else { return 0 };
    // Fields after the command: state is #3, utime #14, stime #15 (1-based over the whole line).
    let f: Vec<&str> = after.split_whitespace().collect();
    let get = |i: usize| f.get(i).and_then(|v| v.parse::<u64>().ok()).unwrap_or(0);
    get(11) + get(12)
}

fn clock_ticks_per_sec() -> u64 {
    Command::new("getconf")
        .arg("CLK_TCK")
        .output()
        .ok()
        .and_then(|o| String::from_utf8_lossy(&o.stdout).trim().parse().ok())
        .unwrap_or(100)
}

fn mib(kb: u64) -> String {
    format!("{:.1} MiB", kb as f64 / 1024.0)
}

// ---------------------------------------------------------------------------------------------
// Talking to Arbor
// ---------------------------------------------------------------------------------------------

#[derive(Clone)]
struct Auth {
    base: String,
    cookie: String,
    csrf: String,
}

fn http_client() -> Res<reqwest::Client> {
    Ok(reqwest::Client::builder()
        .redirect(reqwest::redirect::Policy::none())
        // Below actix's 5 s keep-alive, so a pooled connection is never reused as it closes.
        .pool_idle_timeout(Duration::from_secs(2))
        .tcp_nodelay(true)
        .build()?)
}

fn form_encode(pairs: &[(&str, &str)]) -> String {
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

async fn login(http: &reqwest::Client, base: &str) -> Res<Auth> {
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

fn client_id() -> String {
    uuid::Uuid::new_v4().simple().to_string()
}

fn post(http: &reqwest::Client, auth: &Auth, path: &str, body: String) -> reqwest::RequestBuilder {
    http.post(format!("{}{path}", auth.base))
        .header("Cookie", &auth.cookie)
        .header("X-CSRF-Token", &auth.csrf)
        .header("Origin", &auth.base)
        .header("HX-Request", "true")
        .header("Content-Type", "application/x-www-form-urlencoded")
        .body(body)
}

/// `POST /sessions`: a new session whose first reply is `message`; returns the session id.
async fn create_session(http: &reqwest::Client, auth: &Auth, message: &str) -> Res<String> {
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
async fn post_message(http: &reqwest::Client, auth: &Auth, sid: &str, message: &str) -> Res<String> {
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
struct SseSplitter {
    buf: Vec<u8>,
}

struct SseEvent {
    name: String,
    data: String,
}

impl SseSplitter {
    fn push(&mut self, bytes: &[u8]) -> Vec<SseEvent> {
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
async fn wait_reply_over(http: &reqwest::Client, auth: &Auth, sid: &str, limit: Duration) -> Res<()> {
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
async fn in_parallel<T, R, F, Fut>(items: Vec<T>, width: usize, f: F) -> Vec<R>
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
async fn create_sessions(http: &reqwest::Client, auth: &Auth, n: usize, message: &str) -> Res<Vec<String>> {
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

// ---------------------------------------------------------------------------------------------
// Latency
// ---------------------------------------------------------------------------------------------

struct StreamOutcome {
    stream: u32,
    /// (k, arrival) per token received.
    received: Vec<(u32, Instant)>,
    /// Delta events received.
    deltas: usize,
    /// Ended with `done`.
    done: bool,
    error: Option<String>,
}

/// Parses the tokens of one `delta` event: `<span class="delta">t5-0 t5-1 </span>`.
fn delta_tokens(data: &str, stream: u32, into: &mut Vec<u32>) {
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

struct LatencyStream {
    http: reqwest::Client,
    auth: Auth,
    sid: String,
    stream: u32,
    message: String,
    subscribed: Arc<AtomicUsize>,
    post_gate: Arc<Semaphore>,
    limit: Duration,
}

/// Posts the message, subscribes to the reply and records when each token arrives.
async fn latency_stream(s: LatencyStream) -> StreamOutcome {
    let mut out =
        StreamOutcome { stream: s.stream, received: Vec::new(), deltas: 0, done: false, error: None };
    let mid = {
        let _permit = s.post_gate.acquire().await;
        match post_message(&s.http, &s.auth, &s.sid, &s.message).await {
            Ok(m) => m,
            Err(e) => {
                out.error = Some(e.to_string());
                return out;
            }
        }
    };
    let res = s
        .http
        .get(format!("{}/s/{}/events?m={mid}", s.auth.base, s.sid))
        .header("Cookie", &s.auth.cookie)
        .header("Accept", "text/event-stream")
        .send()
        .await;
    let res = match res {
        Ok(r) if r.status().is_success() => r,
        Ok(r) => {
            out.error = Some(format!("GET events answered {}", r.status()));
            return out;
        }
        Err(e) => {
            out.error = Some(format!("GET events: {e}"));
            return out;
        }
    };
    let mut body = res.bytes_stream();
    let mut sse = SseSplitter::default();
    let mut ks = Vec::new();
    let mut snapshot_seen = false;
    let deadline = tokio::time::Instant::now() + s.limit;
    loop {
        let chunk = match tokio::time::timeout_at(deadline, body.next()).await {
            Err(_) => {
                out.error = Some(format!("no `done` within {:?}", s.limit));
                break;
            }
            Ok(None) => {
                out.error = Some("the event stream ended without `done`".into());
                break;
            }
            Ok(Some(Err(e))) => {
                out.error = Some(format!("event stream: {e}"));
                break;
            }
            Ok(Some(Ok(c))) => c,
        };
        let at = Instant::now();
        for ev in sse.push(&chunk) {
            match ev.name.as_str() {
                "snapshot" if !snapshot_seen => {
                    snapshot_seen = true;
                    if ev.data.contains(&format!("t{}-", s.stream)) {
                        out.error = Some("tokens arrived before the subscription".into());
                    }
                    s.subscribed.fetch_add(1, Ordering::SeqCst);
                }
                "snapshot" => out.error = Some("a second snapshot (the client lagged)".into()),
                "delta" => {
                    out.deltas += 1;
                    ks.clear();
                    delta_tokens(&ev.data, s.stream, &mut ks);
                    out.received.extend(ks.iter().map(|k| (*k, at)));
                }
                "error" => out.error = Some(format!("error event: {}", ev.data)),
                "done" => out.done = true,
                _ => {}
            }
        }
        if out.done {
            break;
        }
    }
    if !snapshot_seen {
        // Count it anyway so the round is not held up waiting for this stream.
        s.subscribed.fetch_add(1, Ordering::SeqCst);
    }
    out
}

struct LevelResult {
    streams: usize,
    tokens_per_stream: usize,
    /// Added latency per token, microseconds, sorted.
    lat_us: Vec<u64>,
    deltas: usize,
    missing: usize,
    failed_streams: usize,
    errors: Vec<String>,
    cpu_pct: f64,
    wall: Duration,
    /// Latencies (µs) by when the token was written: 250 ms buckets from the round's start.
    by_time: Vec<Vec<u64>>,
    /// p99 / max per bucket, as text (levels with enough samples only).
    timeline: String,
}

fn pct(sorted: &[u64], p: f64) -> u64 {
    if sorted.is_empty() {
        return 0;
    }
    let rank = ((p / 100.0) * sorted.len() as f64).ceil() as usize;
    sorted[rank.clamp(1, sorted.len()) - 1]
}

fn ms(us: u64) -> String {
    format!("{:.2} ms", us as f64 / 1000.0)
}

struct LatencyCtx {
    http: reqwest::Client,
    auth: Auth,
    mock: Arc<Mock>,
    sessions: Vec<String>,
    pid: u32,
    ticks: u64,
    next_stream: AtomicU32,
    round: AtomicU32,
}

async fn latency_level(ctx: &LatencyCtx, n: usize, tokens: usize, interval: Duration) -> Res<LevelResult> {
    let round = ctx.round.fetch_add(1, Ordering::SeqCst) + 1;
    let subscribed = Arc::new(AtomicUsize::new(0));
    let post_gate = Arc::new(Semaphore::new(16));
    let interval_us = interval.as_micros() as u64;
    let limit = interval * tokens as u32 + Duration::from_secs(120);
    let mut set = JoinSet::new();
    for i in 0..n {
        let stream = ctx.next_stream.fetch_add(1, Ordering::SeqCst);
        // Streams start evenly spread over one interval, as independent conversations would.
        let offset_us = interval_us * i as u64 / n as u64;
        let message = format!("BENCH:lat:{round}:{stream}:{tokens}:{}:{offset_us}", interval.as_millis());
        set.spawn(latency_stream(LatencyStream {
            http: ctx.http.clone(),
            auth: ctx.auth.clone(),
            sid: ctx.sessions[i].clone(),
            stream,
            message,
            subscribed: subscribed.clone(),
            post_gate: post_gate.clone(),
            limit,
        }));
    }
    let wait_from = Instant::now();
    while subscribed.load(Ordering::SeqCst) < n {
        if wait_from.elapsed() > Duration::from_secs(180) {
            return Err(fail(format!(
                "only {} of {n} streams subscribed within 180 s",
                subscribed.load(Ordering::SeqCst)
            )));
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    let cpu0 = cpu_ticks(ctx.pid);
    let start = Instant::now() + Duration::from_millis(300);
    ctx.mock.go.send_replace((round, start));
    let mut outcomes = Vec::with_capacity(n);
    while let Some(r) = set.join_next().await {
        match r {
            Ok(o) => outcomes.push(o),
            Err(e) => return Err(fail(format!("a stream task panicked: {e}"))),
        }
    }
    let wall = start.elapsed();
    let cpu = cpu_ticks(ctx.pid).saturating_sub(cpu0);
    let cpu_pct = 100.0 * cpu as f64 / ctx.ticks as f64 / wall.as_secs_f64().max(0.001);
    let writes = std::mem::take(&mut *lock(&ctx.mock.writes));
    let mut r = LevelResult {
        streams: n,
        tokens_per_stream: tokens,
        lat_us: Vec::with_capacity(n * tokens),
        deltas: 0,
        missing: 0,
        failed_streams: 0,
        errors: Vec::new(),
        cpu_pct,
        wall,
        by_time: Vec::new(),
        timeline: String::new(),
    };
    for o in outcomes {
        r.deltas += o.deltas;
        let mut seen = vec![false; tokens];
        for (k, at) in &o.received {
            let Some(w) = writes.get(&(o.stream, *k)) else {
                r.errors.push(format!("stream {}: token {k} arrived but was never written", o.stream));
                continue;
            };
            if let Some(s) = seen.get_mut(*k as usize) {
                if *s {
                    r.errors.push(format!("stream {}: token {k} arrived twice", o.stream));
                }
                *s = true;
            }
            let us = at.saturating_duration_since(*w).as_micros() as u64;
            r.lat_us.push(us);
            let bucket = (w.saturating_duration_since(start).as_millis() / 250) as usize;
            if r.by_time.len() <= bucket {
                r.by_time.resize(bucket + 1, Vec::new());
            }
            r.by_time[bucket].push(us);
        }
        r.missing += seen.iter().filter(|s| !**s).count();
        if !o.done || o.error.is_some() {
            r.failed_streams += 1;
            r.errors.push(format!("stream {}: {}", o.stream, o.error.unwrap_or_else(|| "no `done`".into())));
        }
    }
    r.lat_us.sort_unstable();
    if r.lat_us.len() >= 1000 {
        let buckets: Vec<String> = r
            .by_time
            .iter_mut()
            .enumerate()
            .filter(|(_, b)| !b.is_empty())
            .map(|(i, b)| {
                b.sort_unstable();
                format!("{:.2}: {} / {}", i as f64 * 0.25, ms(pct(b, 99.0)), ms(pct(b, 100.0)))
            })
            .collect();
        r.timeline = buckets.join(", ");
    }
    r.errors.extend(ctx.mock.take_problems());
    Ok(r)
}

fn latency_table(results: &[LevelResult]) -> String {
    let mut t = String::from(
        "| streams | tokens/stream | samples | p50 | p90 | p99 | max | delta events | lost | failed streams | server CPU |\n\
         | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |\n",
    );
    for r in results {
        let l = &r.lat_us;
        let _ = writeln!(
            t,
            "| {} | {} | {} | {} | {} | {} | {} | {} | {} | {} | {:.0} % |",
            r.streams,
            r.tokens_per_stream,
            l.len(),
            ms(pct(l, 50.0)),
            ms(pct(l, 90.0)),
            ms(pct(l, 99.0)),
            ms(l.last().copied().unwrap_or(0)),
            r.deltas,
            r.missing,
            r.failed_streams,
            r.cpu_pct
        );
    }
    t
}

async fn run_latency(bin: &Path, opts: &Opts, ticks: u64) -> Res<String> {
    let (mock, mock_port) = start_mock().await?;
    let server = start_server(bin, mock_port, opts).await?;
    let result = latency_phase(&server, mock, opts, ticks).await;
    server.stop(result.is_err());
    result
}

async fn latency_phase(server: &Server, mock: Arc<Mock>, opts: &Opts, ticks: u64) -> Res<String> {
    let http = http_client()?;
    let auth = login(&http, &server.base()).await?;
    let max = opts.levels.iter().copied().max().unwrap_or(1);
    eprintln!("latency: creating {max} sessions…");
    let sessions = create_sessions(&http, &auth, max, "BENCH:quick").await?;
    // Their first replies must be over before the next message (one reply per session).
    {
        let (h, a) = (http.clone(), auth.clone());
        let waits = in_parallel(sessions.clone(), 64, move |sid| {
            let (h, a) = (h.clone(), a.clone());
            async move { wait_reply_over(&h, &a, &sid, Duration::from_secs(60)).await }
        })
        .await;
        for w in waits {
            w?;
        }
    }
    let ctx = LatencyCtx {
        http,
        auth,
        mock,
        sessions,
        pid: server.pid,
        ticks,
        next_stream: AtomicU32::new(0),
        round: AtomicU32::new(0),
    };
    // Warm-up, not reported: connections, caches, allocator.
    let warm = max.min(10);
    eprintln!("latency: warm-up ({warm} streams × 5 tokens)…");
    let w = latency_level(&ctx, warm, 5, opts.interval).await?;
    if w.failed_streams > 0 || w.missing > 0 {
        return Err(fail(format!("warm-up failed: {}", w.errors.join("; "))));
    }
    let mut results = Vec::new();
    for &n in &opts.levels {
        let tokens = opts.tokens.max(opts.min_samples.div_ceil(n));
        eprintln!(
            "latency: {n} streams × {tokens} tokens, {} ms apart (~{:.0} s)…",
            opts.interval.as_millis(),
            (opts.interval * tokens as u32).as_secs_f64()
        );
        let r = latency_level(&ctx, n, tokens, opts.interval).await?;
        eprintln!(
            "  p50 {} p99 {} max {} ({} samples, {} lost, {} failed streams, server CPU {:.0} %, {:.1} s)",
            ms(pct(&r.lat_us, 50.0)),
            ms(pct(&r.lat_us, 99.0)),
            ms(r.lat_us.last().copied().unwrap_or(0)),
            r.lat_us.len(),
            r.missing,
            r.failed_streams,
            r.cpu_pct,
            r.wall.as_secs_f64()
        );
        if !r.timeline.is_empty() {
            eprintln!("  p99 / max by when the token was written (s after the start): {}", r.timeline);
        }
        for e in r.errors.iter().take(10) {
            eprintln!("  ! {e}");
        }
        results.push(r);
        tokio::time::sleep(Duration::from_secs(2)).await;
    }
    let mut md = String::from("## Added SSE latency\n\n");
    md.push_str(&latency_table(&results));
    let _ = write!(
        md,
        "\nAdded latency = arrival of the token's text at the SSE client − the mock's write of its chunk \
         (same process clock). Each stream is its own session; tokens {} ms apart, streams' starts spread \
         evenly over one interval. `delta events` below `samples` means tokens were coalesced. \
         Server CPU is the server's user+system time over the level's wall time (100 % = one core).\n",
        opts.interval.as_millis()
    );
    let timelines: Vec<&LevelResult> = results.iter().filter(|r| !r.timeline.is_empty()).collect();
    if !timelines.is_empty() {
        md.push_str(
            "\nWhen the slow tokens happen: p99 / max of the tokens written in each 250 ms window, by the \
             window's start in seconds after the round began.\n\n",
        );
        for r in timelines {
            let _ = writeln!(md, "- {} streams: {}", r.streams, r.timeline);
        }
    }
    let problems: Vec<&String> = results.iter().flat_map(|r| r.errors.iter()).collect();
    if !problems.is_empty() {
        let _ = writeln!(md, "\nProblems ({}; first 10):\n", problems.len());
        for p in problems.iter().take(10) {
            let _ = writeln!(md, "- {p}");
        }
    }
    Ok(md)
}

// ---------------------------------------------------------------------------------------------
// Idle connections
// ---------------------------------------------------------------------------------------------

#[derive(Default)]
struct IdleCounters {
    ready: AtomicUsize,
    failed: AtomicUsize,
    closed_early: AtomicUsize,
    errors: Mutex<Vec<String>>,
}

impl IdleCounters {
    fn error(&self, e: String) {
        let mut v = lock(&self.errors);
        if v.len() < 20 {
            v.push(e);
        }
    }
}

/// One raw SSE connection: request, wait for `snapshot`, then read (and drop) until closed.
async fn idle_conn(port: u16, sid: String, cookie: String, gate: Arc<Semaphore>, c: Arc<IdleCounters>) {
    let permit = gate.acquire_owned().await;
    let opened = async {
        let mut sock = TcpStream::connect(("127.0.0.1", port)).await?;
        let req = format!(
            "GET /s/{sid}/events HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\nCookie: {cookie}\r\n\
             Accept: text/event-stream\r\n\r\n"
        );
        sock.write_all(req.as_bytes()).await?;
        let mut buf = Vec::with_capacity(2048);
        let mut chunk = [0u8; 1024];
        loop {
            let n = tokio::time::timeout(Duration::from_secs(60), sock.read(&mut chunk)).await??;
            if n == 0 {
                return Err(fail(format!("closed before the snapshot: {}", String::from_utf8_lossy(&buf))));
            }
            buf.extend_from_slice(&chunk[..n]);
            if !buf.starts_with(b"HTTP/1.1 200") && buf.len() >= 12 {
                let head = String::from_utf8_lossy(&buf);
                return Err(fail(format!("answered {}", head.lines().next().unwrap_or_default())));
            }
            if find(&buf, b"event: done").is_some() {
                return Err(fail("got `done` at once: the session has no live run"));
            }
            if find(&buf, b"event: snapshot").is_some() {
                return Res::Ok(sock);
            }
        }
    }
    .await;
    drop(permit);
    let mut sock = match opened {
        Ok(s) => s,
        Err(e) => {
            c.failed.fetch_add(1, Ordering::SeqCst);
            c.error(e.to_string());
            return;
        }
    };
    c.ready.fetch_add(1, Ordering::SeqCst);
    let mut sink = [0u8; 256];
    loop {
        match sock.read(&mut sink).await {
            Ok(0) | Err(_) => break,
            Ok(_) => {}
        }
    }
    c.closed_early.fetch_add(1, Ordering::SeqCst);
}

struct MemRow {
    state: String,
    mem: Mem,
}

async fn run_idle(bin: &Path, opts: &Opts) -> Res<String> {
    let (mock, mock_port) = start_mock().await?;
    let server = start_server(bin, mock_port, opts).await?;
    let result = idle_phase(&server, mock, opts).await;
    server.stop(result.is_err());
    result
}

async fn idle_phase(server: &Server, mock: Arc<Mock>, opts: &Opts) -> Res<String> {
    let pid = server.pid;
    let need = opts.idle_conns as u64 + 1000;
    let server_limit = nofile_limits(&pid.to_string()).and_then(|(soft, _)| soft);
    if let Some(soft) = server_limit
        && soft < need
    {
        return Err(fail(format!(
            "the server may open only {soft} files; it needs about {need} (check the hard limit: ulimit -H -n)"
        )));
    }
    let http = http_client()?;
    let auth = login(&http, &server.base()).await?;
    let mut rows = Vec::new();
    tokio::time::sleep(Duration::from_secs(2)).await;
    rows.push(MemRow { state: "started, signed in, nothing running".into(), mem: mem(pid) });

    eprintln!("idle: creating {} sessions with silent live replies…", opts.idle_sessions);
    let t = Instant::now();
    let sessions = create_sessions(&http, &auth, opts.idle_sessions, "BENCH:silent:600").await?;
    while mock.silent_open.load(Ordering::SeqCst) < opts.idle_sessions {
        if t.elapsed() > Duration::from_secs(120) {
            return Err(fail(format!(
                "only {} of {} silent upstream streams arrived at the mock",
                mock.silent_open.load(Ordering::SeqCst),
                opts.idle_sessions
            )));
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    eprintln!("  {} live silent runs after {:.1} s", opts.idle_sessions, t.elapsed().as_secs_f64());
    tokio::time::sleep(Duration::from_secs(2)).await;
    rows.push(MemRow {
        state: format!("{} live silent runs, no viewers", opts.idle_sessions),
        mem: mem(pid),
    });

    eprintln!("idle: opening {} SSE connections…", opts.idle_conns);
    let counters = Arc::new(IdleCounters::default());
    let gate = Arc::new(Semaphore::new(256));
    let mut conns = JoinSet::new();
    let t = Instant::now();
    for i in 0..opts.idle_conns {
        let sid = sessions[i % sessions.len()].clone();
        conns.spawn(idle_conn(server.port, sid, auth.cookie.clone(), gate.clone(), counters.clone()));
    }
    loop {
        let (ready, failed) = (counters.ready.load(Ordering::SeqCst), counters.failed.load(Ordering::SeqCst));
        if ready + failed >= opts.idle_conns {
            break;
        }
        if t.elapsed() > Duration::from_secs(300) {
            return Err(fail(format!(
                "after 300 s only {ready} connections had their snapshot ({failed} failed)"
            )));
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    let open_secs = t.elapsed().as_secs_f64();
    let ready = counters.ready.load(Ordering::SeqCst);
    let failed = counters.failed.load(Ordering::SeqCst);
    eprintln!("  {ready} open ({failed} failed) after {open_secs:.1} s; holding {:?}", opts.hold);
    let settle = Instant::now();
    let mut peak = mem(pid);
    while settle.elapsed() < opts.hold {
        tokio::time::sleep(Duration::from_secs(1)).await;
        let m = mem(pid);
        if m.rss_kb > peak.rss_kb {
            peak = m;
        }
    }
    let held = mem(pid);
    let closed_early = counters.closed_early.load(Ordering::SeqCst);
    rows.push(MemRow {
        state: format!("{ready} SSE connections open, after {} s", opts.hold.as_secs()),
        mem: held,
    });
    rows.push(MemRow { state: format!("{ready} SSE connections open, highest VmRSS sampled"), mem: peak });
    let runs_left = mock.silent_open.load(Ordering::SeqCst);
    drop(conns);
    // How long the server keeps the sockets of clients that have gone (it can only notice when a
    // keep-alive comment fails to send, or when it reads the client's EOF).
    let fds_before = rows.get(1).map(|r| r.mem.fds).unwrap_or(0);
    let gone = Instant::now();
    let linger_limit = Duration::from_secs(60);
    let mut after = mem(pid);
    while after.fds > fds_before + 20 && gone.elapsed() < linger_limit {
        tokio::time::sleep(Duration::from_millis(500)).await;
        after = mem(pid);
    }
    let released = if after.fds > fds_before + 20 {
        format!("not released {} s after the clients closed", linger_limit.as_secs())
    } else {
        format!("released {:.1} s after the clients closed", gone.elapsed().as_secs_f64())
    };
    eprintln!("  server sockets {released}");
    rows.push(MemRow { state: format!("clients gone; sockets {released}"), mem: after });

    let base = rows.get(1).map(|r| r.mem.rss_kb).unwrap_or(0);
    let per_conn = (peak.rss_kb.saturating_sub(base)) as f64 * 1024.0 / ready.max(1) as f64;
    let mut md = String::from("## Memory with idle SSE connections\n\n");
    md.push_str("| state | VmRSS | VmHWM | threads | open fds |\n| --- | ---: | ---: | ---: | ---: |\n");
    for r in &rows {
        let _ = writeln!(
            md,
            "| {} | {} | {} | {} | {} |",
            r.state,
            mib(r.mem.rss_kb),
            mib(r.mem.hwm_kb),
            r.mem.threads,
            r.mem.fds
        );
    }
    let _ = write!(
        md,
        "\n{ready} connections over {} sessions ({} per session), opened in {open_secs:.1} s ({failed} failed, \
         {closed_early} closed by the server while held); about {:.1} KiB of server RSS per connection \
         (highest sample − silent runs) / connections. {runs_left} silent upstream streams were still open \
         at the end. `server.workers = {}`, `llm.idle_timeout_secs = 600`, keep-alive comments every 15 s, \
         server open-file limit {}.\n",
        sessions.len(),
        opts.idle_conns / sessions.len(),
        per_conn / 1024.0,
        opts.workers,
        server_limit.map_or("unlimited".to_string(), |l| l.to_string())
    );
    let errors = std::mem::take(&mut *lock(&counters.errors));
    let problems: Vec<String> = errors.into_iter().chain(mock.take_problems()).collect();
    if !problems.is_empty() {
        let _ = writeln!(md, "\nProblems (first {}):\n", problems.len());
        for p in &problems {
            let _ = writeln!(md, "- {p}");
        }
    }
    eprintln!(
        "  VmRSS {} while open (peak {}), VmHWM {}",
        mib(held.rss_kb),
        mib(peak.rss_kb),
        mib(held.hwm_kb.max(peak.hwm_kb))
    );
    Ok(md)
}

// ---------------------------------------------------------------------------------------------

fn git_describe() -> String {
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

fn check_own_limits(opts: &Opts) -> Res<()> {
    let need = match opts.mode {
        Mode::Latency => 2 * opts.levels.iter().copied().max().unwrap_or(1) as u64 + 200,
        Mode::Idle | Mode::All => (opts.idle_conns + opts.idle_sessions) as u64 + 500,
    }
    .max(2 * opts.levels.iter().copied().max().unwrap_or(1) as u64 + 200);
    match nofile_limits("self") {
        Some((Some(soft), hard)) if soft < need => Err(fail(format!(
            "this process may open {soft} files but needs about {need} (client sockets plus the mock's \
             upstream sockets). Run it under a higher limit, e.g.\n  \
             (ulimit -n {} && cargo bench --bench streaming -- …)\n(the hard limit here is {})",
            hard.map_or(65536, |h| h.min(65536)),
            hard.map_or("unlimited".to_string(), |h| h.to_string())
        ))),
        _ => Ok(()),
    }
}

async fn run(opts: Opts) -> Res<()> {
    let bin = locate_binary()?;
    check_own_limits(&opts)?;
    if let Some(w) = staleness_warning(&bin) {
        eprintln!("{w}");
    }
    let ticks = clock_ticks_per_sec();
    let cores = std::thread::available_parallelism().map(|n| n.get()).unwrap_or(1);
    eprintln!("arbor binary: {}", bin.display());
    let mut sections = Vec::new();
    if matches!(opts.mode, Mode::Latency | Mode::All) {
        sections.push(run_latency(&bin, &opts, ticks).await?);
    }
    if matches!(opts.mode, Mode::Idle | Mode::All) {
        sections.push(run_idle(&bin, &opts).await?);
    }
    let kernel = std::fs::read_to_string("/proc/sys/kernel/osrelease").unwrap_or_default();
    let mut md = String::from("# Arbor streaming benchmark\n\n");
    let _ = writeln!(
        md,
        "Commit {}, binary `{}`, {cores} CPU cores (server, mock upstream and clients share them), \
         Linux {}, `server.workers = {}`{}. Command: `cargo bench --bench streaming -- {}`.\n",
        git_describe(),
        bin.display(),
        kernel.trim(),
        opts.workers,
        opts.server_cpus.as_ref().map(|c| format!(", server pinned to CPUs {c}")).unwrap_or_default(),
        std::env::args().skip(1).filter(|a| a != "--bench").collect::<Vec<_>>().join(" ")
    );
    md.push_str(&sections.join("\n"));
    println!("{md}");
    if opts.write {
        let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("bench/results");
        std::fs::create_dir_all(&dir)?;
        let path = dir.join("arbor-streaming.md");
        std::fs::write(&path, &md)?;
        eprintln!("written to {}", path.display());
    }
    Ok(())
}

fn main() -> std::process::ExitCode {
    // reqwest is built without a default TLS provider; Arbor installs ring, and so do we.
    let _ = rustls::crypto::ring::default_provider().install_default();
    let opts = match parse_args() {
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
            eprintln!("streaming bench failed: {e}");
            std::process::ExitCode::FAILURE
        }
    }
}
