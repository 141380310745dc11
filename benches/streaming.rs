//! Streaming benchmark: added SSE latency under concurrency, and memory of idle SSE connections.
//!
//! ```sh
//! cargo build --release && cp target/release/arbor target/arbor-release
//! ulimit -n 20000                             # the idle phase holds ~11,000 sockets in this process
//! ARBOR_BIN=target/arbor-release cargo bench --bench streaming -- [latency|idle|all] [options]
//! ```
//!
//! (`cargo bench` builds `target/release/arbor` again under the `bench` profile, whose symbol
//! names miss `link/code-order.txt`: that binary's RSS is several MB higher than the release
//! build's, hence the copy.)
//!
//! The bench starts the release binary (`$ARBOR_BIN`, else `release/arbor` next to this bench's
//! own executable, else `$CARGO_TARGET_DIR/release/arbor`) in a fresh data directory, with a
//! config that points provider `mock` at an OpenAI-compatible upstream served by this process
//! (hand-written HTTP/1.1, chunked SSE, one chunk per event, `TCP_NODELAY`). The mock notes the
//! `Instant` just before it writes each token chunk; the SSE clients note the `Instant` each
//! chunk of the event stream arrives. Both use this process's monotonic clock, so
//! `arrival - write` is the latency Arbor adds (provider parsing, run task, coalescing, broadcast,
//! SSE framing and two loopback hops). The mock, starting the binary and the browser-side
//! helpers are in `benches/common`, shared with `benches/cluster.rs`.
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

mod common;

use std::fmt::Write as _;
use std::path::Path;
use std::sync::atomic::{AtomicU32, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use futures_util::StreamExt;
use tokio::io::{AsyncReadExt as _, AsyncWriteExt as _};
use tokio::net::TcpStream;
use tokio::sync::Semaphore;
use tokio::task::JoinSet;

use common::{
    Auth, Launch, Mem, Mock, Res, Server, SseSplitter, admin_create, clock_ticks_per_sec, cpu_ticks,
    create_sessions, delta_tokens, fail, find, git_describe, http_client, in_parallel, locate_binary, lock,
    login, mem, mib, ms, nofile_limits, pct, post_message, serve, staleness_warning, start_mock,
    wait_reply_over,
};

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
    let num = common::arg_number;
    while let Some(a) = args.next() {
        match a.as_str() {
            // `cargo bench` passes `--bench` to harness-less benches.
            "--bench" => {}
            "latency" => o.mode = Mode::Latency,
            "idle" => o.mode = Mode::Idle,
            "all" => o.mode = Mode::All,
            "--levels" => o.levels = common::arg_levels(args.next())?,
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
// The server under test
// ---------------------------------------------------------------------------------------------

async fn start_server(bin: &Path, mock_port: u16, opts: &Opts) -> Res<Server> {
    let dir = tempfile::Builder::new().prefix("arbor-bench-").tempdir()?;
    let data = dir.path().join("data");
    let config = dir.path().join("bench.toml");
    let log = dir.path().join("server.log");
    std::fs::write(
        &config,
        format!(
            "[server]\nworkers = {workers}\n\n[log]\nlevel = \"info\"\nformat = \"pretty\"\n\n\
[limits]\nruns_per_member = 10000\nstreams_per_member = 10000\n\n\
[llm]\ndetect_local_ollama = false\nidle_timeout_secs = 600\n\n\
[llm.providers.mock]\nkind = \"openai_compatible\"\nbase_url = \"http://127.0.0.1:{mock_port}/v1\"\n\
models = [\"bench-model\"]\n",
            workers = opts.workers
        ),
    )?;
    admin_create(bin, &config, &data, &[])?;
    serve(Launch {
        bin,
        config: &config,
        data: &data,
        log,
        env: Vec::new(),
        cpus: opts.server_cpus.clone(),
        health: "/healthz",
        dir: Some(dir),
        keep: opts.keep,
    })
    .await
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
    common::report(&md, opts.write, "arbor-streaming.md")
}

fn main() -> std::process::ExitCode {
    common::bench_main("streaming", parse_args, run)
}
