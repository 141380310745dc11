//! Several instances benchmark (issue #20): what crossing instances through Redis adds to live
//! events, and the gateway's throughput with two instances against one.
//!
//! ```sh
//! cargo build --release && cp target/release/arbor target/arbor-release
//! ARBOR_BIN=target/arbor-release cargo bench --bench cluster -- [events|gateway|all] [options]
//! ```
//!
//! (`cargo bench` builds `target/release/arbor` again under the `bench` profile, whose symbol
//! names miss `link/code-order.txt`: that binary's RSS is several MB higher than the release
//! build's, hence the copy.)
//!
//! Needs PostgreSQL (`$ARBOR_BENCH_DATABASE_URL`, a URL of a database to connect to for
//! `CREATE DATABASE`, default `postgres://postgres@127.0.0.1:5432/postgres`) and Redis
//! (`$ARBOR_BENCH_REDIS_URL`, default `redis://127.0.0.1:6379`). Each run creates a fresh
//! database `arbor_bench_<random>` (dropped at the end) and a fresh bus prefix, and starts two
//! release binaries (found like `benches/streaming.rs` does: `$ARBOR_BIN`, else next to this
//! bench, else `$CARGO_TARGET_DIR/release/arbor`) on that database and Redis, sharing one data
//! folder and master key, each with its own search index. Provider `mock` points at the
//! OpenAI-compatible upstream this process serves (`benches/common`).
//!
//! - `events`: the bench's account signs in on instance A; for each level (default 1 and 100
//!   concurrent streams, one session each) every stream posts a message on A, and two SSE clients
//!   follow its reply: one on A (same instance) and one on B (the run's events cross Redis once).
//!   The mock holds the tokens back until all clients have their `snapshot`, then writes
//!   `--tokens` unique tokens `--interval-ms` apart, noting the `Instant` of each write; the
//!   clients note each arrival. `arrival - write` (one process clock) is reported for both
//!   clients of the same tokens, with the per-token difference B − A.
//! - `gateway`: closed-loop load on `POST /v1/chat/completions` (streamed, `--chunks` chunks
//!   `--chunk-delay-ms` apart, API token made with `arbor admin token`), `--concurrency`
//!   workers for `--duration-secs`: all on A (B up but idle), then round-robin over A and B,
//!   repeated `--repeats` times. Requests/s, latency and CPU of every process involved.
//!
//! Results are printed as markdown and written to `bench/results/arbor-cluster.md`.

mod common;

use std::collections::HashMap;
use std::fmt::Write as _;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::{AtomicU32, AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use futures_util::StreamExt;
use sea_orm::{ConnectionTrait, Statement};
use tokio::sync::Semaphore;
use tokio::task::JoinSet;

use common::{
    Auth, Launch, Mock, Res, Server, SseSplitter, admin_create, clock_ticks_per_sec, cpu_ticks,
    create_sessions, delta_tokens, fail, git_describe, http_client, in_parallel, locate_binary, lock, login,
    ms, pct, post_message, serve, staleness_warning, start_mock, wait_reply_over,
};

const USAGE: &str = "\
usage: cargo bench --bench cluster -- [events|gateway|all] [options]

  events (SSE clients on the executing instance and on the other one):
  --levels 1,100          concurrent streams per level
  --tokens 20             tokens per stream
  --interval-ms 100       gap between two tokens of a stream
  --min-samples 300       at least this many tokens per level (few streams send more tokens)

  gateway (POST /v1/chat/completions, closed loop):
  --concurrency 64        workers, each one request at a time
  --duration-secs 10      measured window of each run
  --chunks 50             streamed chunks per answer
  --chunk-delay-ms 0      gap between two chunks (0: back to back)
  --repeats 2             runs of (one instance, two instances)

  --workers 2             each instance's server.workers
  --keep                  keep the instances' folder and logs
  --no-write              do not write bench/results/arbor-cluster.md

env: ARBOR_BIN, CARGO_TARGET_DIR, ARBOR_BENCH_DATABASE_URL, ARBOR_BENCH_REDIS_URL";

#[derive(Clone, Copy, PartialEq, Eq, Debug)]
enum Mode {
    Events,
    Gateway,
    All,
}

#[derive(Clone, Debug)]
struct Opts {
    mode: Mode,
    levels: Vec<usize>,
    tokens: usize,
    interval: Duration,
    min_samples: usize,
    concurrency: usize,
    duration: Duration,
    chunks: u32,
    chunk_delay_ms: u64,
    repeats: usize,
    workers: usize,
    keep: bool,
    write: bool,
}

fn parse_args() -> Res<Opts> {
    let mut o = Opts {
        mode: Mode::All,
        levels: vec![1, 100],
        tokens: 20,
        interval: Duration::from_millis(100),
        min_samples: 300,
        concurrency: 64,
        duration: Duration::from_secs(10),
        chunks: 50,
        chunk_delay_ms: 0,
        repeats: 2,
        workers: 2,
        keep: false,
        write: true,
    };
    let mut args = std::env::args().skip(1);
    let num = common::arg_number;
    while let Some(a) = args.next() {
        match a.as_str() {
            // `cargo bench` passes `--bench` to harness-less benches.
            "--bench" => {}
            "events" => o.mode = Mode::Events,
            "gateway" => o.mode = Mode::Gateway,
            "all" => o.mode = Mode::All,
            "--levels" => o.levels = common::arg_levels(args.next())?,
            "--tokens" => o.tokens = num(&a, args.next())?,
            "--interval-ms" => o.interval = Duration::from_millis(num(&a, args.next())? as u64),
            "--min-samples" => o.min_samples = num(&a, args.next())?,
            "--concurrency" => o.concurrency = num(&a, args.next())?,
            "--duration-secs" => o.duration = Duration::from_secs(num(&a, args.next())? as u64),
            "--chunks" => o.chunks = num(&a, args.next())? as u32,
            "--chunk-delay-ms" => o.chunk_delay_ms = num(&a, args.next())? as u64,
            "--repeats" => o.repeats = num(&a, args.next())?,
            "--workers" => o.workers = num(&a, args.next())?,
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
    if o.concurrency == 0 || o.duration.is_zero() || o.chunks == 0 || o.repeats == 0 {
        return Err(fail("concurrency, duration, chunks and repeats must be positive"));
    }
    Ok(o)
}

// ---------------------------------------------------------------------------------------------
// PostgreSQL, and the two instances
// ---------------------------------------------------------------------------------------------

fn env_or(name: &str, default: &str) -> String {
    std::env::var(name).ok().filter(|v| !v.is_empty()).unwrap_or_else(|| default.to_string())
}

/// A fresh database on the bench's PostgreSQL, dropped by `drop`.
struct BenchDb {
    admin_url: String,
    name: String,
    url: String,
    version: String,
}

impl BenchDb {
    async fn create() -> Res<BenchDb> {
        let admin_url = env_or("ARBOR_BENCH_DATABASE_URL", "postgres://postgres@127.0.0.1:5432/postgres");
        let admin = sea_orm::Database::connect(admin_url.as_str())
            .await
            .map_err(|e| fail(format!("cannot connect to PostgreSQL at {admin_url}: {e}")))?;
        let name = format!("arbor_bench_{}", uuid::Uuid::new_v4().simple());
        admin.execute_unprepared(&format!("CREATE DATABASE \"{name}\"")).await?;
        let version = admin
            .query_one_raw(Statement::from_string(admin.get_database_backend(), "SHOW server_version"))
            .await?
            .and_then(|row| row.try_get_by_index::<String>(0).ok())
            .unwrap_or_default();
        admin.close().await?;
        let mut url = reqwest::Url::parse(&admin_url)?;
        url.set_path(&format!("/{name}"));
        Ok(BenchDb { admin_url, name, url: url.to_string(), version })
    }

    async fn drop(self) {
        let dropped = async {
            let admin = sea_orm::Database::connect(self.admin_url.as_str()).await?;
            admin
                .execute_unprepared(&format!("DROP DATABASE IF EXISTS \"{}\" WITH (FORCE)", self.name))
                .await?;
            admin.close().await?;
            Res::Ok(())
        };
        if let Err(e) = dropped.await {
            eprintln!("could not drop the bench database {}: {e}", self.name);
        }
    }
}

/// Two instances on one database, one Redis, one data folder and one master key.
struct Cluster {
    a: Server,
    b: Server,
    dir: tempfile::TempDir,
    config: PathBuf,
    data: PathBuf,
    env: Vec<(String, String)>,
    keep: bool,
}

impl Cluster {
    async fn start(bin: &Path, mock_port: u16, db: &BenchDb, opts: &Opts) -> Res<Cluster> {
        let dir = tempfile::Builder::new().prefix("arbor-cluster-bench-").tempdir()?;
        let data = dir.path().join("data");
        let config = dir.path().join("cluster.toml");
        let redis = env_or("ARBOR_BENCH_REDIS_URL", "redis://127.0.0.1:6379");
        let prefix = format!("arbor-bench-{}", &uuid::Uuid::new_v4().simple().to_string()[..12]);
        // Limits far above the bench's load: one member holds every stream and run.
        std::fs::write(
            &config,
            format!(
                "[server]\nworkers = {workers}\n\n[log]\nlevel = \"info\"\nformat = \"pretty\"\n\n\
[bus]\nurl = \"{redis}\"\nprefix = \"{prefix}\"\n\n\
[limits]\nruns_per_member = 10000\nstreams_per_member = 10000\n\n\
[llm]\ndetect_local_ollama = false\nidle_timeout_secs = 600\ninfer_titles = false\n\n\
[llm.providers.mock]\nkind = \"openai_compatible\"\nbase_url = \"http://127.0.0.1:{mock_port}/v1\"\n\
models = [\"bench-model\"]\n",
                workers = opts.workers
            ),
        )?;
        let master_key = format!("{}{}", uuid::Uuid::new_v4().simple(), uuid::Uuid::new_v4().simple());
        let env = vec![
            ("ARBOR_DATABASE_URL".to_string(), db.url.clone()),
            ("ARBOR_MASTER_KEY".to_string(), master_key),
        ];
        admin_create(bin, &config, &data, &env)?;
        let launch = |name: &str| {
            let mut env = env.clone();
            env.push((
                "ARBOR_SEARCH__INDEX_DIR".into(),
                dir.path().join(format!("index-{name}")).display().to_string(),
            ));
            Launch {
                bin,
                config: &config,
                data: &data,
                log: dir.path().join(format!("instance-{name}.log")),
                env,
                cpus: None,
                health: "/readyz",
                dir: None,
                keep: false,
            }
        };
        let keep_dir =
            |dir: tempfile::TempDir| eprintln!("kept the instances' folder {}", dir.keep().display());
        let a = match serve(launch("a")).await {
            Ok(a) => a,
            Err(e) => {
                keep_dir(dir);
                return Err(e);
            }
        };
        let b = match serve(launch("b")).await {
            Ok(b) => b,
            Err(e) => {
                a.stop(true);
                keep_dir(dir);
                return Err(e);
            }
        };
        Ok(Cluster { a, b, dir, config, data, env, keep: opts.keep })
    }

    fn stop(self, failed: bool) {
        self.a.stop(failed);
        self.b.stop(failed);
        if self.keep || failed {
            let kept = self.dir.keep();
            eprintln!("kept the instances' folder {} (logs: instance-a.log, instance-b.log)", kept.display());
        }
    }

    /// An API token of the bench's account, made with `arbor admin token`.
    fn api_token(&self, bin: &Path) -> Res<String> {
        common::admin_token(bin, &self.config, &self.data, &self.env, "cluster-bench")
    }
}

// ---------------------------------------------------------------------------------------------
// CPU of the processes involved
// ---------------------------------------------------------------------------------------------

/// CPU ticks of instance A, instance B, this process (clients and mock), PostgreSQL's and
/// Redis's processes (per pid: a backend that exits in between is lost, Arbor pools them).
struct CpuSnap {
    at: Instant,
    a: u64,
    b: u64,
    me: u64,
    pg: HashMap<u32, u64>,
    redis: HashMap<u32, u64>,
}

fn processes_named(name: &str) -> HashMap<u32, u64> {
    let mut out = HashMap::new();
    let Ok(rd) = std::fs::read_dir("/proc") else { return out };
    for e in rd.flatten() {
        let Some(pid) = e.file_name().to_str().and_then(|s| s.parse::<u32>().ok()) else { continue };
        if std::fs::read_to_string(format!("/proc/{pid}/comm")).is_ok_and(|c| c.trim() == name) {
            out.insert(pid, cpu_ticks(pid));
        }
    }
    out
}

fn cpu_snap(c: &Cluster) -> CpuSnap {
    CpuSnap {
        at: Instant::now(),
        a: cpu_ticks(c.a.pid),
        b: cpu_ticks(c.b.pid),
        me: cpu_ticks(std::process::id()),
        pg: processes_named("postgres"),
        redis: processes_named("redis-server"),
    }
}

/// Percent of one core over the interval (100 % = one core busy).
#[derive(Clone, Copy, Default)]
struct CpuUse {
    a: f64,
    b: f64,
    me: f64,
    pg: f64,
    redis: f64,
}

impl CpuUse {
    fn between(s0: &CpuSnap, s1: &CpuSnap, ticks: u64) -> CpuUse {
        let secs = s1.at.saturating_duration_since(s0.at).as_secs_f64().max(0.001);
        let p = |t: u64| 100.0 * t as f64 / ticks as f64 / secs;
        let group = |m0: &HashMap<u32, u64>, m1: &HashMap<u32, u64>| -> u64 {
            m1.iter().map(|(pid, t)| t.saturating_sub(m0.get(pid).copied().unwrap_or(0))).sum()
        };
        CpuUse {
            a: p(s1.a.saturating_sub(s0.a)),
            b: p(s1.b.saturating_sub(s0.b)),
            me: p(s1.me.saturating_sub(s0.me)),
            pg: p(group(&s0.pg, &s1.pg)),
            redis: p(group(&s0.redis, &s1.redis)),
        }
    }

    fn total(&self) -> f64 {
        self.a + self.b + self.me + self.pg + self.redis
    }
}

// ---------------------------------------------------------------------------------------------
// Events across instances
// ---------------------------------------------------------------------------------------------

/// One SSE client's view of one reply.
#[derive(Default)]
struct Watch {
    /// (k, arrival) per token received.
    received: Vec<(u32, Instant)>,
    deltas: usize,
    done: bool,
    /// Streams that ended with `done` before any `snapshot` (the run not known there yet) and
    /// were opened again.
    retries: usize,
    error: Option<String>,
}

/// Follows the reply `mid` of session `sid` on the instance of `auth`, from its snapshot to
/// `done`, noting when each of this stream's tokens arrives.
async fn watch(
    http: &reqwest::Client,
    auth: &Auth,
    (sid, mid, stream): (&str, &str, u32),
    subscribed: &AtomicUsize,
    limit: Duration,
) -> Watch {
    let mut w = Watch::default();
    let deadline = tokio::time::Instant::now() + limit;
    let retry_until = Instant::now() + Duration::from_secs(10);
    let mut counted = false;
    let mut ks = Vec::new();
    'attempts: loop {
        let res = http
            .get(format!("{}/s/{sid}/events?m={mid}", auth.base))
            .header("Cookie", &auth.cookie)
            .header("Accept", "text/event-stream")
            .send()
            .await;
        let res = match res {
            Ok(r) if r.status().is_success() => r,
            Ok(r) => {
                w.error = Some(format!("GET events answered {}", r.status()));
                break;
            }
            Err(e) => {
                w.error = Some(format!("GET events: {e}"));
                break;
            }
        };
        let mut body = res.bytes_stream();
        let mut sse = SseSplitter::default();
        let mut snapshot_seen = false;
        loop {
            let chunk = match tokio::time::timeout_at(deadline, body.next()).await {
                Err(_) => {
                    w.error = Some(format!("no `done` within {limit:?}"));
                    break 'attempts;
                }
                Ok(None) => {
                    w.error = Some("the event stream ended without `done`".into());
                    break 'attempts;
                }
                Ok(Some(Err(e))) => {
                    w.error = Some(format!("event stream: {e}"));
                    break 'attempts;
                }
                Ok(Some(Ok(c))) => c,
            };
            let at = Instant::now();
            for ev in sse.push(&chunk) {
                match ev.name.as_str() {
                    "snapshot" if !snapshot_seen => {
                        snapshot_seen = true;
                        if ev.data.contains(&format!("t{stream}-")) {
                            w.error = Some("tokens arrived before the subscription".into());
                        }
                        if !counted {
                            counted = true;
                            subscribed.fetch_add(1, Ordering::SeqCst);
                        }
                    }
                    "snapshot" => w.error = Some("a second snapshot (the client lagged)".into()),
                    "delta" => {
                        w.deltas += 1;
                        ks.clear();
                        delta_tokens(&ev.data, stream, &mut ks);
                        w.received.extend(ks.iter().map(|k| (*k, at)));
                    }
                    "error" => w.error = Some(format!("error event: {}", ev.data)),
                    // The other instance may not know the run yet (its first message is still
                    // crossing Redis): a page would reload; open the stream again.
                    "done" if !snapshot_seen && Instant::now() < retry_until => {
                        w.retries += 1;
                        tokio::time::sleep(Duration::from_millis(10)).await;
                        continue 'attempts;
                    }
                    "done" if !snapshot_seen => {
                        w.error = Some("only `done`, never a snapshot, for 10 s".into());
                        break 'attempts;
                    }
                    "done" => w.done = true,
                    _ => {}
                }
            }
            if w.done {
                break 'attempts;
            }
        }
    }
    if !counted {
        // Count it anyway so the round is not held up waiting for this client.
        subscribed.fetch_add(1, Ordering::SeqCst);
    }
    w
}

struct StreamOutcome {
    stream: u32,
    post_error: Option<String>,
    /// The client on A (same instance), the client on B (across instances).
    watches: [Watch; 2],
}

struct EventStream {
    http: reqwest::Client,
    on_a: Auth,
    on_b: Auth,
    sid: String,
    stream: u32,
    message: String,
    subscribed: Arc<AtomicUsize>,
    post_gate: Arc<Semaphore>,
    limit: Duration,
}

/// Posts the message on A, then follows the reply on A and on B at once.
async fn event_stream(s: EventStream) -> StreamOutcome {
    let mid = {
        let _permit = s.post_gate.acquire().await;
        post_message(&s.http, &s.on_a, &s.sid, &s.message).await
    };
    let mid = match mid {
        Ok(m) => m,
        Err(e) => {
            // Both clients count as subscribed, so the round is not held up.
            s.subscribed.fetch_add(2, Ordering::SeqCst);
            return StreamOutcome {
                stream: s.stream,
                post_error: Some(e.to_string()),
                watches: Default::default(),
            };
        }
    };
    let key = (s.sid.as_str(), mid.as_str(), s.stream);
    let (wa, wb) = tokio::join!(
        watch(&s.http, &s.on_a, key, &s.subscribed, s.limit),
        watch(&s.http, &s.on_b, key, &s.subscribed, s.limit)
    );
    StreamOutcome { stream: s.stream, post_error: None, watches: [wa, wb] }
}

/// Added latency of one client side at one level.
#[derive(Default)]
struct Side {
    /// Microseconds, sorted.
    lat_us: Vec<u64>,
    deltas: usize,
    missing: usize,
    retries: usize,
}

struct LevelResult {
    streams: usize,
    tokens_per_stream: usize,
    sides: [Side; 2],
    /// Per token received by both: arrival on B − arrival on A, microseconds, sorted.
    diff_us: Vec<i64>,
    failed_streams: usize,
    errors: Vec<String>,
    cpu: CpuUse,
    wall: Duration,
}

fn pct_i(sorted: &[i64], p: f64) -> i64 {
    if sorted.is_empty() {
        return 0;
    }
    let rank = ((p / 100.0) * sorted.len() as f64).ceil() as usize;
    sorted[rank.clamp(1, sorted.len()) - 1]
}

fn ms_i(us: i64) -> String {
    format!("{:.2} ms", us as f64 / 1000.0)
}

fn signed_us(from: Instant, to: Instant) -> i64 {
    if to >= from {
        to.duration_since(from).as_micros() as i64
    } else {
        -(from.duration_since(to).as_micros() as i64)
    }
}

struct EventsCtx<'a> {
    cluster: &'a Cluster,
    http: reqwest::Client,
    on_a: Auth,
    on_b: Auth,
    mock: Arc<Mock>,
    sessions: Vec<String>,
    ticks: u64,
    next_stream: AtomicU32,
    round: AtomicU32,
}

async fn events_level(ctx: &EventsCtx<'_>, n: usize, tokens: usize, interval: Duration) -> Res<LevelResult> {
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
        set.spawn(event_stream(EventStream {
            http: ctx.http.clone(),
            on_a: ctx.on_a.clone(),
            on_b: ctx.on_b.clone(),
            sid: ctx.sessions[i].clone(),
            stream,
            message,
            subscribed: subscribed.clone(),
            post_gate: post_gate.clone(),
            limit,
        }));
    }
    let wait_from = Instant::now();
    while subscribed.load(Ordering::SeqCst) < 2 * n {
        if wait_from.elapsed() > Duration::from_secs(180) {
            return Err(fail(format!(
                "only {} of {} clients subscribed within 180 s",
                subscribed.load(Ordering::SeqCst),
                2 * n
            )));
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    let start = Instant::now() + Duration::from_millis(300);
    let cpu0 = cpu_snap(ctx.cluster);
    ctx.mock.go.send_replace((round, start));
    let mut outcomes = Vec::with_capacity(n);
    while let Some(r) = set.join_next().await {
        match r {
            Ok(o) => outcomes.push(o),
            Err(e) => return Err(fail(format!("a stream task panicked: {e}"))),
        }
    }
    let cpu = CpuUse::between(&cpu0, &cpu_snap(ctx.cluster), ctx.ticks);
    let wall = start.elapsed();
    let writes = std::mem::take(&mut *lock(&ctx.mock.writes));
    let mut r = LevelResult {
        streams: n,
        tokens_per_stream: tokens,
        sides: Default::default(),
        diff_us: Vec::new(),
        failed_streams: 0,
        errors: Vec::new(),
        cpu,
        wall,
    };
    for o in outcomes {
        if let Some(e) = o.post_error {
            r.failed_streams += 1;
            r.errors.push(format!("stream {}: {e}", o.stream));
            continue;
        }
        let mut arrivals: [Vec<Option<Instant>>; 2] = [vec![None; tokens], vec![None; tokens]];
        for (side, w) in o.watches.iter().enumerate() {
            let name = ["A", "B"][side];
            let s = &mut r.sides[side];
            s.deltas += w.deltas;
            s.retries += w.retries;
            for (k, at) in &w.received {
                let Some(written) = writes.get(&(o.stream, *k)) else {
                    r.errors.push(format!(
                        "stream {} on {name}: token {k} arrived but was never written",
                        o.stream
                    ));
                    continue;
                };
                match arrivals[side].get_mut(*k as usize) {
                    Some(Some(_)) => {
                        r.errors.push(format!("stream {} on {name}: token {k} arrived twice", o.stream))
                    }
                    Some(slot) => *slot = Some(*at),
                    None => r.errors.push(format!("stream {} on {name}: token {k} out of range", o.stream)),
                }
                s.lat_us.push(at.saturating_duration_since(*written).as_micros() as u64);
            }
            s.missing += arrivals[side].iter().filter(|a| a.is_none()).count();
            if !w.done || w.error.is_some() {
                r.errors.push(format!(
                    "stream {} on {name}: {}",
                    o.stream,
                    w.error.clone().unwrap_or_else(|| "no `done`".into())
                ));
            }
        }
        if o.watches.iter().any(|w| !w.done || w.error.is_some()) {
            r.failed_streams += 1;
        }
        for (a, b) in arrivals[0].iter().zip(&arrivals[1]) {
            if let (Some(a), Some(b)) = (a, b) {
                r.diff_us.push(signed_us(*a, *b));
            }
        }
    }
    for s in &mut r.sides {
        s.lat_us.sort_unstable();
    }
    r.diff_us.sort_unstable();
    r.errors.extend(ctx.mock.take_problems());
    Ok(r)
}

fn events_tables(results: &[LevelResult]) -> String {
    let mut t = String::from(
        "| streams | tokens/stream | SSE client on | samples | p50 | p90 | p99 | max | delta events | lost | reopened |\n\
         | ---: | ---: | --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |\n",
    );
    for r in results {
        for (side, label) in [(0, "A (runs the reply)"), (1, "B (across Redis)")] {
            let s = &r.sides[side];
            let l = &s.lat_us;
            let _ = writeln!(
                t,
                "| {} | {} | {label} | {} | {} | {} | {} | {} | {} | {} | {} |",
                r.streams,
                r.tokens_per_stream,
                l.len(),
                ms(pct(l, 50.0)),
                ms(pct(l, 90.0)),
                ms(pct(l, 99.0)),
                ms(l.last().copied().unwrap_or(0)),
                s.deltas,
                s.missing,
                s.retries
            );
        }
    }
    t.push_str(
        "\nWhat crossing instances adds: the difference of the percentiles above (B − A), and the \
         per-token difference (the same token's arrival on B − its arrival on A).\n\n\
         | streams | p50 B − p50 A | p99 B − p99 A | per token: p50 | p90 | p99 | max | failed streams | \
         CPU A | CPU B | Redis | PostgreSQL | bench process |\n\
         | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |\n",
    );
    for r in results {
        let [a, b] = &r.sides;
        let d = &r.diff_us;
        let _ = writeln!(
            t,
            "| {} | {} | {} | {} | {} | {} | {} | {} | {:.0} % | {:.0} % | {:.0} % | {:.0} % | {:.0} % |",
            r.streams,
            ms_i(pct(&b.lat_us, 50.0) as i64 - pct(&a.lat_us, 50.0) as i64),
            ms_i(pct(&b.lat_us, 99.0) as i64 - pct(&a.lat_us, 99.0) as i64),
            ms_i(pct_i(d, 50.0)),
            ms_i(pct_i(d, 90.0)),
            ms_i(pct_i(d, 99.0)),
            ms_i(d.last().copied().unwrap_or(0)),
            r.failed_streams,
            r.cpu.a,
            r.cpu.b,
            r.cpu.redis,
            r.cpu.pg,
            r.cpu.me
        );
    }
    t
}

async fn run_events(bin: &Path, db: &BenchDb, opts: &Opts, ticks: u64) -> Res<String> {
    let (mock, mock_port) = start_mock().await?;
    let cluster = Cluster::start(bin, mock_port, db, opts).await?;
    let result = events_phase(&cluster, mock, opts, ticks).await;
    cluster.stop(result.is_err());
    result
}

async fn events_phase(cluster: &Cluster, mock: Arc<Mock>, opts: &Opts, ticks: u64) -> Res<String> {
    let http = http_client()?;
    let on_a = login(&http, &cluster.a.base()).await?;
    // The same browser session on B: one database holds it.
    let on_b = Auth { base: cluster.b.base(), ..on_a.clone() };
    let max = opts.levels.iter().copied().max().unwrap_or(1);
    eprintln!("events: creating {max} sessions on A…");
    let sessions = create_sessions(&http, &on_a, max, "BENCH:quick").await?;
    // Their first replies must be over before the next message (one reply per session).
    {
        let (h, a) = (http.clone(), on_a.clone());
        let waits = in_parallel(sessions.clone(), 64, move |sid| {
            let (h, a) = (h.clone(), a.clone());
            async move { wait_reply_over(&h, &a, &sid, Duration::from_secs(60)).await }
        })
        .await;
        for w in waits {
            w?;
        }
    }
    let ctx = EventsCtx {
        cluster,
        http,
        on_a,
        on_b,
        mock,
        sessions,
        ticks,
        next_stream: AtomicU32::new(0),
        round: AtomicU32::new(0),
    };
    // Warm-up, not reported: connections, caches, the bus subscription.
    let warm = max.min(10);
    eprintln!("events: warm-up ({warm} streams × 5 tokens)…");
    let w = events_level(&ctx, warm, 5, opts.interval).await?;
    if w.failed_streams > 0 || w.sides.iter().any(|s| s.missing > 0) {
        return Err(fail(format!("warm-up failed: {}", w.errors.join("; "))));
    }
    let mut results = Vec::new();
    for &n in &opts.levels {
        let tokens = opts.tokens.max(opts.min_samples.div_ceil(n));
        eprintln!(
            "events: {n} streams × {tokens} tokens, {} ms apart, each followed on A and on B (~{:.0} s)…",
            opts.interval.as_millis(),
            (opts.interval * tokens as u32).as_secs_f64()
        );
        let r = events_level(&ctx, n, tokens, opts.interval).await?;
        let [a, b] = &r.sides;
        eprintln!(
            "  A: p50 {} p99 {} · B: p50 {} p99 {} · B − A per token p50 {} p99 {} ({} lost, {} failed streams, \
             {:.1} s)",
            ms(pct(&a.lat_us, 50.0)),
            ms(pct(&a.lat_us, 99.0)),
            ms(pct(&b.lat_us, 50.0)),
            ms(pct(&b.lat_us, 99.0)),
            ms_i(pct_i(&r.diff_us, 50.0)),
            ms_i(pct_i(&r.diff_us, 99.0)),
            a.missing + b.missing,
            r.failed_streams,
            r.wall.as_secs_f64()
        );
        for e in r.errors.iter().take(10) {
            eprintln!("  ! {e}");
        }
        results.push(r);
        tokio::time::sleep(Duration::from_secs(2)).await;
    }
    let mut md = String::from("## Live events across instances\n\n");
    md.push_str(&events_tables(&results));
    let _ = write!(
        md,
        "\nAdded latency = arrival of the token's text at the SSE client − the mock's write of its chunk \
         (same process clock). Every stream is its own session; its message is posted on A, which runs \
         the reply, and two clients follow it: one on A, one on B (the run's events reach B through Redis \
         pub/sub). Tokens {} ms apart, streams' starts spread evenly over one interval. `reopened` = \
         streams on B that answered `done` at once because the run's first message had not crossed yet, \
         opened again (as the page would). CPU = user+system time over the level's wall time \
         (100 % = one core); `bench process` is the SSE clients and the mock upstream.\n",
        opts.interval.as_millis()
    );
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
// Gateway throughput
// ---------------------------------------------------------------------------------------------

struct Load {
    /// Where the requests go, in turn.
    ports: Arc<Vec<u16>>,
    next: Arc<AtomicUsize>,
    token: Arc<String>,
    body: Arc<String>,
    /// Text the last content chunk carries.
    last: Arc<String>,
    end: Instant,
}

#[derive(Default)]
struct WorkerStats {
    /// (completed at, total µs, first byte µs) of each request answered in full.
    done: Vec<(Instant, u64, u64)>,
    errors: Vec<String>,
}

/// One streamed request: `Ok((first byte µs))` when the answer is complete.
async fn gateway_request(http: &reqwest::Client, port: u16, load: &Load, t0: Instant) -> Res<u64> {
    let res = http
        .post(format!("http://127.0.0.1:{port}/v1/chat/completions"))
        .header("Authorization", format!("Bearer {}", load.token))
        .header("Content-Type", "application/json")
        .body(load.body.to_string())
        .send()
        .await?;
    if !res.status().is_success() {
        let s = res.status();
        let text = res.text().await.unwrap_or_default();
        return Err(fail(format!("answered {s}: {}", &text[..text.len().min(200)])));
    }
    let mut body = res.bytes_stream();
    let mut first = None;
    let mut text = Vec::new();
    while let Some(chunk) = body.next().await {
        let chunk = chunk?;
        first.get_or_insert_with(|| t0.elapsed().as_micros() as u64);
        text.extend_from_slice(&chunk);
    }
    let text = String::from_utf8_lossy(&text);
    if !text.contains(load.last.as_str()) || !text.trim_end().ends_with("data: [DONE]") {
        return Err(fail(format!("incomplete answer: …{}", &text[text.len().saturating_sub(200)..])));
    }
    Ok(first.unwrap_or(0))
}

async fn gateway_worker(http: reqwest::Client, load: Arc<Load>) -> WorkerStats {
    let mut s = WorkerStats::default();
    while Instant::now() < load.end {
        let port = load.ports[load.next.fetch_add(1, Ordering::Relaxed) % load.ports.len()];
        let t0 = Instant::now();
        match tokio::time::timeout(Duration::from_secs(60), gateway_request(&http, port, &load, t0)).await {
            Ok(Ok(first)) => s.done.push((Instant::now(), t0.elapsed().as_micros() as u64, first)),
            Ok(Err(e)) => s.errors.push(e.to_string()),
            Err(_) => s.errors.push("no complete answer within 60 s".into()),
        }
    }
    s
}

struct GatewayRun {
    label: String,
    instances: usize,
    /// Requests completed inside the measured window.
    completed: usize,
    rate: f64,
    errors: Vec<String>,
    /// Microseconds, sorted.
    total_us: Vec<u64>,
    first_us: Vec<u64>,
    cpu: CpuUse,
    window: Duration,
}

struct GatewayCtx<'a> {
    cluster: &'a Cluster,
    http: reqwest::Client,
    token: Arc<String>,
    body: Arc<String>,
    last: Arc<String>,
    ticks: u64,
}

/// `concurrency` workers, closed loop, for `window`, over `ports` in turn.
async fn gateway_load(
    ctx: &GatewayCtx<'_>,
    ports: Vec<u16>,
    concurrency: usize,
    window: Duration,
) -> GatewayRun {
    let start = Instant::now();
    let load = Arc::new(Load {
        ports: Arc::new(ports.clone()),
        next: Arc::new(AtomicUsize::new(0)),
        token: ctx.token.clone(),
        body: ctx.body.clone(),
        last: ctx.last.clone(),
        end: start + window,
    });
    let cpu0 = cpu_snap(ctx.cluster);
    let mut set = JoinSet::new();
    for _ in 0..concurrency {
        set.spawn(gateway_worker(ctx.http.clone(), load.clone()));
    }
    // CPU over the window only (the requests still running after it are not counted).
    tokio::time::sleep_until(load.end.into()).await;
    let cpu = CpuUse::between(&cpu0, &cpu_snap(ctx.cluster), ctx.ticks);
    let mut stats = Vec::new();
    while let Some(r) = set.join_next().await {
        if let Ok(s) = r {
            stats.push(s);
        }
    }
    let mut run = GatewayRun {
        label: String::new(),
        instances: ports.len(),
        completed: 0,
        rate: 0.0,
        errors: Vec::new(),
        total_us: Vec::new(),
        first_us: Vec::new(),
        cpu,
        window,
    };
    for s in stats {
        for (at, total, first) in s.done {
            if at <= load.end {
                run.completed += 1;
            }
            run.total_us.push(total);
            run.first_us.push(first);
        }
        run.errors.extend(s.errors);
    }
    run.total_us.sort_unstable();
    run.first_us.sort_unstable();
    run.rate = run.completed as f64 / window.as_secs_f64();
    run
}

fn gateway_table(runs: &[GatewayRun]) -> String {
    let mut t = String::from(
        "| run | instances | requests | req/s | errors | TTFB p50 | total p50 | total p99 | CPU A | CPU B | \
         PostgreSQL | Redis | bench process | all | Arbor CPU ms/req |\n\
         | --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |\n",
    );
    for r in runs {
        let arbor_ms =
            (r.cpu.a + r.cpu.b) / 100.0 * r.window.as_secs_f64() * 1000.0 / r.completed.max(1) as f64;
        let _ = writeln!(
            t,
            "| {} | {} | {} | {:.0} | {} | {} | {} | {} | {:.0} % | {:.0} % | {:.0} % | {:.0} % | {:.0} % | {:.0} % | {:.2} |",
            r.label,
            r.instances,
            r.completed,
            r.rate,
            r.errors.len(),
            ms(pct(&r.first_us, 50.0)),
            ms(pct(&r.total_us, 50.0)),
            ms(pct(&r.total_us, 99.0)),
            r.cpu.a,
            r.cpu.b,
            r.cpu.pg,
            r.cpu.redis,
            r.cpu.me,
            r.cpu.total(),
            arbor_ms
        );
    }
    t
}

async fn run_gateway(bin: &Path, db: &BenchDb, opts: &Opts, ticks: u64, cores: usize) -> Res<String> {
    let (mock, mock_port) = start_mock().await?;
    let cluster = Cluster::start(bin, mock_port, db, opts).await?;
    let result = gateway_phase(bin, &cluster, &mock, opts, ticks, cores).await;
    cluster.stop(result.is_err());
    result
}

async fn gateway_phase(
    bin: &Path,
    cluster: &Cluster,
    mock: &Mock,
    opts: &Opts,
    ticks: u64,
    cores: usize,
) -> Res<String> {
    let token = cluster.api_token(bin)?;
    let http = reqwest::Client::builder()
        // Below actix's 5 s keep-alive, so a pooled connection is never reused as it closes.
        .pool_idle_timeout(Duration::from_secs(2))
        .tcp_nodelay(true)
        .build()?;
    let body = serde_json::json!({
        "model": "mock/bench-model",
        "stream": true,
        "messages": [{"role": "user", "content": format!("BENCH:burst:{}:{}", opts.chunks, opts.chunk_delay_ms)}],
    })
    .to_string();
    let ctx = GatewayCtx {
        cluster,
        http,
        token: Arc::new(token),
        body: Arc::new(body),
        last: Arc::new(format!("b{} ", opts.chunks - 1)),
        ticks,
    };
    // One request through each instance must work before any load.
    let probe = Load {
        ports: Arc::new(Vec::new()),
        next: Arc::new(AtomicUsize::new(0)),
        token: ctx.token.clone(),
        body: ctx.body.clone(),
        last: ctx.last.clone(),
        end: Instant::now(),
    };
    for (name, port) in [("A", cluster.a.port), ("B", cluster.b.port)] {
        gateway_request(&ctx.http, port, &probe, Instant::now())
            .await
            .map_err(|e| fail(format!("a streamed chat completion through {name} failed: {e}")))?;
    }
    let (a, b) = (cluster.a.port, cluster.b.port);
    eprintln!("gateway: warm-up (2 s on A and B)…");
    let warm = gateway_load(&ctx, vec![a, b], opts.concurrency, Duration::from_secs(2)).await;
    if !warm.errors.is_empty() {
        return Err(fail(format!("warm-up failed: {}", warm.errors[..warm.errors.len().min(5)].join("; "))));
    }
    let mut runs = Vec::new();
    for rep in 1..=opts.repeats {
        for ports in [vec![a], vec![a, b]] {
            tokio::time::sleep(Duration::from_secs(2)).await;
            let n = ports.len();
            eprintln!(
                "gateway: run {rep}, {n} instance{}, {} workers for {} s…",
                if n == 1 { "" } else { "s" },
                opts.concurrency,
                opts.duration.as_secs()
            );
            let mut r = gateway_load(&ctx, ports, opts.concurrency, opts.duration).await;
            r.label = rep.to_string();
            eprintln!(
                "  {:.0} req/s, total p50 {} p99 {}, {} errors; CPU A {:.0} % B {:.0} % PostgreSQL {:.0} % Redis {:.0} % \
                 bench {:.0} %",
                r.rate,
                ms(pct(&r.total_us, 50.0)),
                ms(pct(&r.total_us, 99.0)),
                r.errors.len(),
                r.cpu.a,
                r.cpu.b,
                r.cpu.pg,
                r.cpu.redis,
                r.cpu.me
            );
            for e in r.errors.iter().take(5) {
                eprintln!("  ! {e}");
            }
            runs.push(r);
        }
    }
    let mean = |n: usize| {
        let rates: Vec<f64> = runs.iter().filter(|r| r.instances == n).map(|r| r.rate).collect();
        rates.iter().sum::<f64>() / rates.len().max(1) as f64
    };
    let (one, two) = (mean(1), mean(2));
    let mut md = String::from("## Gateway throughput: two instances against one\n\n");
    md.push_str(&gateway_table(&runs));
    let _ = write!(
        md,
        "\nMean over the runs: **{one:.0} req/s with one instance, {two:.0} req/s with two** ({:+.0} %).\n\n\
         Closed loop: {} workers, each sending `POST /v1/chat/completions` (streamed, {} chunks {} ms apart from \
         the mock, API token) and reading the answer to `data: [DONE]` before the next, for {} s per run; \
         with two instances the requests go to A and B in turn. With one instance B is up but idle. \
         `requests` = answers complete inside the window; CPU over the window (100 % = one core; \
         `all` = the sum, out of {} % on this machine); `Arbor CPU ms/req` = (A + B) CPU time / requests.\n",
        (two / one.max(0.001) - 1.0) * 100.0,
        opts.concurrency,
        opts.chunks,
        opts.chunk_delay_ms,
        opts.duration.as_secs(),
        cores * 100
    );
    let problems: Vec<String> =
        runs.iter().flat_map(|r| r.errors.iter().cloned()).chain(mock.take_problems()).collect();
    if !problems.is_empty() {
        let _ = writeln!(md, "\nProblems ({}; first 10):\n", problems.len());
        for p in problems.iter().take(10) {
            let _ = writeln!(md, "- {p}");
        }
    }
    Ok(md)
}

// ---------------------------------------------------------------------------------------------

async fn run(opts: Opts) -> Res<()> {
    let bin = locate_binary()?;
    if let Some(w) = staleness_warning(&bin) {
        eprintln!("{w}");
    }
    let ticks = clock_ticks_per_sec();
    let cores = std::thread::available_parallelism().map(|n| n.get()).unwrap_or(1);
    eprintln!("arbor binary: {}", bin.display());
    let db = BenchDb::create().await?;
    eprintln!("database {} on PostgreSQL {}", db.name, db.version);
    let mut sections = Vec::new();
    let mut result = Ok(());
    if matches!(opts.mode, Mode::Events | Mode::All) {
        match run_events(&bin, &db, &opts, ticks).await {
            Ok(s) => sections.push(s),
            Err(e) => result = Err(e),
        }
    }
    if result.is_ok() && matches!(opts.mode, Mode::Gateway | Mode::All) {
        // A fresh database: the events phase's sessions and runs are not in its way.
        match BenchDb::create().await {
            Ok(gw_db) => {
                match run_gateway(&bin, &gw_db, &opts, ticks, cores).await {
                    Ok(s) => sections.push(s),
                    Err(e) => result = Err(e),
                }
                gw_db.drop().await;
            }
            Err(e) => result = Err(e),
        }
    }
    let pg_version = db.version.clone();
    db.drop().await;
    result?;
    let kernel = std::fs::read_to_string("/proc/sys/kernel/osrelease").unwrap_or_default();
    let mut md = String::from("# Arbor cluster benchmark: two instances, one PostgreSQL, one Redis\n\n");
    let _ = writeln!(
        md,
        "{} UTC. Commit {}, binary `{}`, {cores} CPU cores shared by both instances, PostgreSQL {pg_version}, \
         Redis, the mock upstream and the clients; Linux {}, `server.workers = {}` per instance. \
         Command: `cargo bench --bench cluster -- {}`.\n",
        chrono::Utc::now().format("%Y-%m-%d %H:%M"),
        git_describe(),
        bin.display(),
        kernel.trim(),
        opts.workers,
        std::env::args().skip(1).filter(|a| a != "--bench").collect::<Vec<_>>().join(" ")
    );
    md.push_str(&sections.join("\n"));
    common::report(&md, opts.write, "arbor-cluster.md")
}

fn main() -> std::process::ExitCode {
    common::bench_main("cluster", parse_args, run)
}
