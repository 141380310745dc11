//! Browser path beside gateway path: the same streamed answers (200 chunks 5 ms apart from the
//! mock upstream) asked for straight from the mock (the baseline), through two bare relays (tokio
//! alone, and the libraries Arbor is made of; `relay/mod.rs`: the floors any such server stands
//! on), through `POST /v1/chat/completions`, and through the session page
//! (`POST /s/{id}/messages`, then the reply followed over `GET /s/{id}/events` until `done`),
//! at 1, 100 and 1,000 concurrent streams, closed loop, in one run against one server.
//!
//! ```sh
//! cargo build --release && cp target/release/arbor target/arbor-release
//! ARBOR_BIN=target/arbor-release taskset -c 0 cargo bench --bench browser_path -- --server-cpus 1
//! ```
//!
//! (`cargo bench` builds `target/release/arbor` again under the `bench` profile, whose symbol
//! names miss `link/code-order.txt`: that binary's RSS is several MB higher than the release
//! build's, hence the copy.)
//!
//! Per path and level: requests completed per second, time to the first token (from sending the
//! request to the arrival of the first token's text: a content chunk on the gateway, a `delta`
//! event in the browser), the server's CPU per completed request (user + system time of the
//! process over the window, divided by the requests completed in it), and its peak RSS during
//! the window (sampled every 100 ms). Every browser-path level has its own fresh sessions (one
//! per stream, made with a one-token first reply before the window). The mock and the clients
//! run in this process; pin it to the other core (`taskset -c 0` above), as the shared harness
//! pins its load generator.
//!
//! Results are printed as markdown and written to `bench/results/arbor-browser-path.md`.

mod common;
mod relay;

use std::fmt::Write as _;
use std::path::Path;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

use futures_util::StreamExt;
use tokio::task::JoinSet;

use common::{
    Auth, Launch, Res, Server, SseSplitter, admin_create, clock_ticks_per_sec, cpu_ticks, create_sessions,
    fail, git_describe, http_client, login, mem, mib, ms, pct, post_message, report, serve, start_mock,
};

const USAGE: &str = "\
usage: cargo bench --bench browser_path -- [options]

  --levels 1,100,1000     concurrent streams per level
  --seconds 10            measured window per path and level
  --chunks 200            chunks per answer
  --delay-ms 5            gap between two chunks
  --workers 1             Arbor's server.workers
  --server-cpus LIST      pin the server with `taskset -c LIST`
  --paths LIST            only these paths, of mock,bytes,libraries,gateway,browser (all)
  --keep                  keep the server's data directory and log
  --no-write              do not write bench/results/arbor-browser-path.md

env: ARBOR_BIN (binary to run), CARGO_TARGET_DIR (where release/arbor is looked for)";

#[derive(Clone, Debug)]
struct Opts {
    levels: Vec<usize>,
    window: Duration,
    chunks: u32,
    delay_ms: u64,
    workers: usize,
    server_cpus: Option<String>,
    /// The paths run, in the bench's order.
    paths: Vec<Route>,
    keep: bool,
    write: bool,
}

fn parse_args() -> Res<Opts> {
    let mut o = Opts {
        levels: vec![1, 100, 1000],
        window: Duration::from_secs(10),
        chunks: 200,
        delay_ms: 5,
        workers: 1,
        server_cpus: None,
        paths: Route::ALL.to_vec(),
        keep: false,
        write: true,
    };
    let mut args = std::env::args().skip(1);
    let num = common::arg_number;
    while let Some(a) = args.next() {
        match a.as_str() {
            // `cargo bench` passes `--bench` to harness-less benches.
            "--bench" => {}
            "--levels" => o.levels = common::arg_levels(args.next())?,
            "--seconds" => o.window = Duration::from_secs(num(&a, args.next())? as u64),
            "--chunks" => {
                o.chunks = u32::try_from(num(&a, args.next())?).map_err(|_| fail("--chunks: too big"))?
            }
            "--delay-ms" => o.delay_ms = num(&a, args.next())? as u64,
            "--workers" => o.workers = num(&a, args.next())?,
            "--server-cpus" => {
                o.server_cpus = Some(args.next().ok_or_else(|| fail("--server-cpus needs a value"))?)
            }
            "--paths" => o.paths = Route::parse_list(args.next())?,
            "--keep" => o.keep = true,
            "--no-write" => o.write = false,
            "-h" | "--help" => {
                println!("{USAGE}");
                std::process::exit(0);
            }
            other => return Err(fail(format!("unknown argument {other}\n\n{USAGE}"))),
        }
    }
    if o.levels.is_empty() || o.levels.contains(&0) || o.chunks == 0 || o.window.is_zero() || o.workers == 0 {
        return Err(fail("levels, seconds, chunks and workers must be positive"));
    }
    Ok(o)
}

async fn start_server(bin: &Path, mock_port: u16, opts: &Opts) -> Res<(Server, String)> {
    let dir = tempfile::Builder::new().prefix("arbor-bench-").tempdir()?;
    let data = dir.path().join("data");
    let config = dir.path().join("bench.toml");
    let log = dir.path().join("server.log");
    // Limits lifted: one member drives every stream here.
    std::fs::write(
        &config,
        format!(
            "[server]\nworkers = {workers}\n\n[log]\nlevel = \"warn\"\n\n\
[limits]\nruns_per_member = 10000\nstreams_per_member = 10000\n\n\
[metrics]\nenabled = true\ntoken = \"{METRICS_TOKEN}\"\n\n\
[llm]\ndetect_local_ollama = false\ninfer_titles = false\nidle_timeout_secs = 600\n\n\
[llm.providers.mock]\nkind = \"openai_compatible\"\nbase_url = \"http://127.0.0.1:{mock_port}/v1\"\n\
models = [\"bench-model\"]\n",
            workers = opts.workers
        ),
    )?;
    admin_create(bin, &config, &data, &[])?;
    let token = common::admin_token(bin, &config, &data, &[], "browser-path-bench")?;
    let server = serve(Launch {
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
    .await?;
    Ok((server, token))
}

/// The way an answer is asked for.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
enum Route {
    /// The mock upstream directly: the baseline for the time to the first token.
    Mock,
    /// A bare relay (`relay/mod.rs`): the floor under any server on Arbor's libraries.
    Relay(relay::Kind),
    Gateway,
    Browser,
}

impl Route {
    const ALL: [Route; 5] = [
        Route::Mock,
        Route::Relay(relay::Kind::Bytes),
        Route::Relay(relay::Kind::Libraries),
        Route::Gateway,
        Route::Browser,
    ];

    fn short_name(self) -> &'static str {
        match self {
            Route::Mock => "mock",
            Route::Relay(kind) => kind.arg(),
            Route::Gateway => "gateway",
            Route::Browser => "browser",
        }
    }

    /// `--paths`: a comma-separated subset, kept in the bench's own order.
    fn parse_list(v: Option<String>) -> Res<Vec<Route>> {
        let v = v.ok_or_else(|| fail("--paths needs a value"))?;
        let wanted: Vec<&str> = v.split(',').map(str::trim).collect();
        if let Some(bad) = wanted.iter().find(|w| !Route::ALL.iter().any(|r| r.short_name() == **w)) {
            return Err(fail(format!("--paths: unknown path {bad}\n\n{USAGE}")));
        }
        let chosen: Vec<Route> =
            Route::ALL.into_iter().filter(|r| wanted.contains(&r.short_name())).collect();
        if chosen.is_empty() {
            return Err(fail("--paths: name at least one path"));
        }
        Ok(chosen)
    }

    fn name(self) -> &'static str {
        match self {
            Route::Mock => "mock upstream directly",
            Route::Relay(relay::Kind::Libraries) => "bare relay: actix-web + reqwest, bytes passed through",
            Route::Relay(relay::Kind::Bytes) => "bare relay: tokio, each read written as it is",
            Route::Gateway => "gateway `/v1/chat/completions`",
            Route::Browser => "browser (session page + SSE)",
        }
    }
}

#[derive(Default)]
struct WorkerStats {
    /// (completed at, first token µs) of each answer read whole.
    done: Vec<(Instant, u64)>,
    errors: Vec<String>,
}

struct Shared {
    http: reqwest::Client,
    auth: Auth,
    token: String,
    mock_base: String,
    /// The relays' bases, by [`relay::Kind::index`].
    relay_bases: Vec<String>,
    script: String,
    /// The text of the answer's first and last chunk.
    first: String,
    last: String,
    end: Instant,
}

/// One streamed Chat Completions request read to `[DONE]` (through the gateway, the relay, or
/// straight to the mock); the first token's arrival in µs after sending.
async fn completion_once(s: &Shared, path: Route) -> Res<u64> {
    let body = serde_json::json!({
        "model": "mock/bench-model",
        "stream": true,
        "messages": [{"role": "user", "content": s.script}],
    });
    let (base, model) = match path {
        Route::Mock => (s.mock_base.as_str(), "bench-model"),
        Route::Relay(kind) => (s.relay_bases[kind.index()].as_str(), "bench-model"),
        Route::Gateway | Route::Browser => (s.auth.base.as_str(), "mock/bench-model"),
    };
    let mut body = body;
    body["model"] = model.into();
    let t0 = Instant::now();
    let res =
        s.http.post(format!("{base}/v1/chat/completions")).bearer_auth(&s.token).json(&body).send().await?;
    if !res.status().is_success() {
        let status = res.status();
        return Err(fail(format!("gateway answered {status}: {}", res.text().await.unwrap_or_default())));
    }
    let mut stream = res.bytes_stream();
    let (mut first, mut tail) = (None, Vec::new());
    while let Some(chunk) = stream.next().await {
        let chunk = chunk?;
        tail.extend_from_slice(&chunk);
        if first.is_none() && common::find(&tail, s.first.as_bytes()).is_some() {
            first = Some(t0.elapsed().as_micros() as u64);
        }
        // Only the end matters after the first token: keep the buffer small.
        if first.is_some() && tail.len() > 4096 {
            tail.drain(..tail.len() - 1024);
        }
    }
    let text = String::from_utf8_lossy(&tail);
    if !text.trim_end().ends_with("data: [DONE]") {
        return Err(fail(format!("incomplete gateway answer: …{}", &text[text.len().saturating_sub(200)..])));
    }
    first.ok_or_else(|| fail("the gateway answer had no first token"))
}

/// One turn in the session page, followed over its event stream to `done`.
async fn browser_once(s: &Shared, sid: &str) -> Res<u64> {
    let t0 = Instant::now();
    let message = post_message(&s.http, &s.auth, sid, &s.script).await?;
    let res = s
        .http
        .get(format!("{}/s/{sid}/events?m={message}", s.auth.base))
        .header("Cookie", &s.auth.cookie)
        .header("Accept", "text/event-stream")
        .send()
        .await?;
    if !res.status().is_success() {
        return Err(fail(format!("GET /s/{sid}/events answered {}", res.status())));
    }
    let mut stream = res.bytes_stream();
    let mut sse = SseSplitter::default();
    let (mut first, mut saw_last) = (None, false);
    while let Some(chunk) = stream.next().await {
        for event in sse.push(&chunk?) {
            match event.name.as_str() {
                "delta" | "snapshot" => {
                    if first.is_none() && event.data.contains(&s.first) {
                        first = Some(t0.elapsed().as_micros() as u64);
                    }
                    saw_last |= event.data.contains(&s.last);
                }
                "done" => {
                    saw_last |= event.data.contains(&s.last);
                    if !saw_last {
                        return Err(fail("the reply ended without its last token"));
                    }
                    // Under load the stream may open after the reply ended: then its first
                    // token reaches the page with the whole message.
                    return Ok(first.unwrap_or_else(|| t0.elapsed().as_micros() as u64));
                }
                _ => {}
            }
        }
    }
    Err(fail("the event stream ended before `done`"))
}

async fn worker(shared: Arc<Shared>, path: Route, sid: Option<String>) -> WorkerStats {
    let mut stats = WorkerStats::default();
    while Instant::now() < shared.end {
        let once = async {
            match (path, &sid) {
                (Route::Mock | Route::Relay(_) | Route::Gateway, _) => completion_once(&shared, path).await,
                (Route::Browser, Some(sid)) => browser_once(&shared, sid).await,
                (Route::Browser, None) => Err(fail("a browser worker without a session")),
            }
        };
        match tokio::time::timeout(Duration::from_secs(120), once).await {
            Ok(Ok(first)) => stats.done.push((Instant::now(), first)),
            Ok(Err(e)) => stats.errors.push(e.to_string()),
            Err(_) => stats.errors.push("no complete answer within 120 s".into()),
        }
    }
    stats
}

struct LevelResult {
    path: Route,
    streams: usize,
    rate: f64,
    errors: Vec<String>,
    first_us: Vec<u64>,
    cpu_ms_per_request: f64,
    /// Database statements Arbor ran per completed request over the window.
    statements_per_request: f64,
    peak_kb: u64,
}

/// The token this bench's server takes for `/metrics`.
const METRICS_TOKEN: &str = "browser-path-bench-metrics";

/// How many statements the server has run on its database so far (`arbor_db_statements_total`).
async fn statements_run(http: &reqwest::Client, base: &str) -> Res<u64> {
    let text = http.get(format!("{base}/metrics")).bearer_auth(METRICS_TOKEN).send().await?.text().await?;
    text.lines()
        .find_map(|l| l.strip_prefix("arbor_db_statements_total "))
        .and_then(|v| v.trim().parse::<f64>().ok())
        .map(|v| v as u64)
        .ok_or_else(|| fail("/metrics has no arbor_db_statements_total"))
}

/// One path at one level; `pid` is the process whose CPU and memory are measured (Arbor's, or
/// the relay's on its path).
async fn level(pid: u32, base: &Shared, path: Route, streams: usize, opts: &Opts) -> Res<LevelResult> {
    let sessions = match path {
        Route::Mock | Route::Relay(_) | Route::Gateway => vec![None; streams],
        Route::Browser => create_sessions(&base.http, &base.auth, streams, "BENCH:quick")
            .await?
            .into_iter()
            .map(Some)
            .collect(),
    };
    // Let the sessions' first replies finish before the window opens.
    tokio::time::sleep(Duration::from_secs(2)).await;
    let start = Instant::now();
    let shared = Arc::new(Shared {
        http: base.http.clone(),
        auth: base.auth.clone(),
        token: base.token.clone(),
        mock_base: base.mock_base.clone(),
        relay_bases: base.relay_bases.clone(),
        script: base.script.clone(),
        first: base.first.clone(),
        last: base.last.clone(),
        end: start + opts.window,
    });
    let cpu0 = cpu_ticks(pid);
    let statements0 = statements_run(&shared.http, &shared.auth.base).await?;
    let peak = Arc::new(AtomicU64::new(0));
    let sampler = {
        let (peak, end) = (peak.clone(), shared.end);
        tokio::spawn(async move {
            while Instant::now() < end {
                peak.fetch_max(mem(pid).rss_kb, Ordering::Relaxed);
                tokio::time::sleep(Duration::from_millis(100)).await;
            }
        })
    };
    let mut set = JoinSet::new();
    for sid in sessions {
        set.spawn(worker(shared.clone(), path, sid));
    }
    tokio::time::sleep_until(shared.end.into()).await;
    let cpu = cpu_ticks(pid).saturating_sub(cpu0);
    let statements = statements_run(&shared.http, &shared.auth.base).await?.saturating_sub(statements0);
    let _ = sampler.await;
    let mut result = LevelResult {
        path,
        streams,
        rate: 0.0,
        errors: Vec::new(),
        first_us: Vec::new(),
        cpu_ms_per_request: 0.0,
        statements_per_request: 0.0,
        peak_kb: peak.load(Ordering::Relaxed),
    };
    let mut completed = 0usize;
    while let Some(joined) = set.join_next().await {
        let stats = joined.map_err(|e| fail(format!("a worker panicked: {e}")))?;
        for (at, first) in stats.done {
            if at <= shared.end {
                completed += 1;
                result.first_us.push(first);
            }
        }
        result.errors.extend(stats.errors);
    }
    result.first_us.sort_unstable();
    result.rate = completed as f64 / opts.window.as_secs_f64();
    let cpu_ms = cpu as f64 * 1000.0 / clock_ticks_per_sec() as f64;
    result.cpu_ms_per_request = if completed > 0 { cpu_ms / completed as f64 } else { 0.0 };
    result.statements_per_request = if completed > 0 { statements as f64 / completed as f64 } else { 0.0 };
    // Whatever is still streaming after the window ends before the next level starts.
    tokio::time::sleep(Duration::from_secs(3)).await;
    Ok(result)
}

fn table(results: &[LevelResult], idle_kb: u64, opts: &Opts) -> String {
    let mut md = String::new();
    let _ = writeln!(
        md,
        "# Browser path beside gateway path\n\n{} chunks {} ms apart per answer, {} s per level, commit {}, idle RSS {}.\n",
        opts.chunks,
        opts.delay_ms,
        opts.window.as_secs(),
        git_describe(),
        mib(idle_kb)
    );
    md.push_str("| path | streams | req/s | TTFT p50 | TTFT p99 | the server's CPU per request | database statements per request | Arbor's peak RSS | errors |\n");
    md.push_str("| --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |\n");
    for r in results {
        let (cpu, statements, peak) = match r.path {
            // Arbor idles meanwhile; the mock's own CPU is this process's.
            Route::Mock => ("—".to_string(), "—".to_string(), "—".to_string()),
            // The relay's own CPU and memory; it has no database.
            Route::Relay(_) => (format!("{:.2} ms", r.cpu_ms_per_request), "—".to_string(), mib(r.peak_kb)),
            _ => (
                format!("{:.2} ms", r.cpu_ms_per_request),
                format!("{:.1}", r.statements_per_request),
                mib(r.peak_kb),
            ),
        };
        let _ = writeln!(
            md,
            "| {} | {} | {:.1} | {} | {} | {cpu} | {statements} | {peak} | {} |",
            r.path.name(),
            r.streams,
            r.rate,
            ms(pct(&r.first_us, 50.0)),
            ms(pct(&r.first_us, 99.0)),
            r.errors.len()
        );
    }
    md.push('\n');
    for streams in &opts.levels {
        let of = |p: Route| results.iter().find(|r| r.path == p && r.streams == *streams);
        if let (Some(m), Some(g)) = (of(Route::Mock), of(Route::Gateway)) {
            let over = |p: f64| ms(pct(&g.first_us, p).saturating_sub(pct(&m.first_us, p)));
            let _ = writeln!(
                md,
                "- {streams} streams: the gateway adds {} (p50) and {} (p99) to the first token.",
                over(50.0),
                over(99.0)
            );
        }
        if let (Some(m), Some(g)) = (of(Route::Mock), of(Route::Gateway)) {
            let over = |x: &LevelResult| ms(pct(&x.first_us, 50.0).saturating_sub(pct(&m.first_us, 50.0)));
            for kind in relay::Kind::ALL {
                if let Some(r) = of(Route::Relay(kind)) {
                    let _ = writeln!(
                        md,
                        "- {streams} streams: the {} relay adds {} (p50) to the first token and costs {:.2} ms \
                         of CPU per request (the gateway: {}, {:.2} ms).",
                        kind.arg(),
                        over(r),
                        r.cpu_ms_per_request,
                        over(g),
                        g.cpu_ms_per_request
                    );
                }
            }
        }
        if let (Some(g), Some(b)) = (of(Route::Gateway), of(Route::Browser))
            && g.cpu_ms_per_request > 0.0
        {
            let _ = writeln!(
                md,
                "- {streams} streams: the browser path costs {:+.0} % CPU per request against the gateway.",
                (b.cpu_ms_per_request / g.cpu_ms_per_request - 1.0) * 100.0
            );
        }
    }
    for r in results.iter().filter(|r| !r.errors.is_empty()) {
        let _ = writeln!(md, "- {} at {} streams, first error: {}", r.path.name(), r.streams, r.errors[0]);
    }
    md
}

async fn run(opts: Opts) -> Res<()> {
    let bin = common::locate_binary()?;
    if let Some(warning) = common::staleness_warning(&bin) {
        eprintln!("{warning}");
    }
    let (_mock, mock_port) = start_mock().await?;
    let cpus = opts.server_cpus.as_deref();
    let mut relays = Vec::new();
    for kind in relay::Kind::ALL {
        relays.push(relay::start(kind, cpus, mock_port).await?);
    }
    let (server, token) = start_server(&bin, mock_port, &opts).await?;
    let outcome = async {
        let http = http_client()?;
        let auth = login(&http, &server.base()).await?;
        tokio::time::sleep(Duration::from_secs(2)).await;
        let idle_kb = mem(server.pid).rss_kb;
        let base = Shared {
            http,
            auth,
            token,
            mock_base: format!("http://127.0.0.1:{mock_port}"),
            relay_bases: relays.iter().map(|r| r.base()).collect(),
            script: format!("BENCH:burst:{}:{}", opts.chunks, opts.delay_ms),
            first: "b0 ".into(),
            // No space after it: the `done` event's rendered message trims the text's end.
            last: format!("b{}", opts.chunks - 1),
            end: Instant::now(),
        };
        let mut results = Vec::new();
        for &streams in &opts.levels {
            for &path in &opts.paths {
                eprintln!("{} at {streams} streams…", path.name());
                let pid = match path {
                    Route::Relay(kind) => relays[kind.index()].pid,
                    _ => server.pid,
                };
                results.push(level(pid, &base, path, streams, &opts).await?);
            }
        }
        Ok::<_, common::Error>(table(&results, idle_kb, &opts))
    }
    .await;
    let failed = outcome.is_err();
    server.stop(failed);
    report(&outcome?, opts.write, "arbor-browser-path.md")
}

fn main() -> std::process::ExitCode {
    let args: Vec<String> = std::env::args().collect();
    if args.get(1).map(String::as_str) == Some(relay::SERVE_FLAG) {
        let port = |i: usize| args.get(i).and_then(|v| v.parse::<u16>().ok());
        let kind = args.get(2).and_then(|k| relay::Kind::parse(k));
        return match (kind, port(3), port(4)) {
            (Some(kind), Some(port), Some(upstream)) => relay::serve(kind, port, upstream),
            _ => {
                eprintln!("usage: {} libraries|bytes PORT UPSTREAM_PORT", relay::SERVE_FLAG);
                std::process::ExitCode::from(2)
            }
        };
    }
    common::bench_main("browser_path", parse_args, run)
}
