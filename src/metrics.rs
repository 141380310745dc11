//! Prometheus metrics: the recorder, what each part of Arbor records, and the text a scrape gets.
//!
//! Recording goes through the `metrics` facade, so a call costs next to nothing when metrics are
//! off (no recorder is installed then). Counters and histograms are recorded where things
//! happen; gauges that describe the present (live runs, open streams, the pool) are read when a
//! scraper asks, so they cannot drift.

use std::sync::OnceLock;
use std::time::Duration;

use metrics::{counter, gauge, histogram};
use metrics_exporter_prometheus::{Matcher, PrometheusBuilder, PrometheusHandle};

/// Upper bounds of the latency histograms, in seconds: a page is milliseconds, a provider call
/// up to minutes.
const LATENCY_BUCKETS: &[f64] =
    &[0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0, 60.0, 180.0];

static HANDLE: OnceLock<Option<PrometheusHandle>> = OnceLock::new();

/// Installs the process-wide recorder once and returns its handle (tests start many servers in
/// one process; they share it). `None` if another recorder was installed first.
pub fn install() -> Option<PrometheusHandle> {
    HANDLE
        .get_or_init(|| {
            let builder = PrometheusBuilder::new()
                .set_buckets_for_metric(Matcher::Suffix("_seconds".into()), LATENCY_BUCKETS)
                .ok()?;
            match builder.install_recorder() {
                Ok(handle) => {
                    describe();
                    Some(handle)
                }
                Err(e) => {
                    tracing::warn!(error = %e, "metrics recorder not installed");
                    None
                }
            }
        })
        .clone()
}

/// Whether metrics are being recorded: callers skip building labels when they are not.
pub fn enabled() -> bool {
    HANDLE.get().is_some_and(Option::is_some)
}

fn describe() {
    use metrics::{describe_counter, describe_gauge, describe_histogram};
    describe_counter!(
        "arbor_http_requests_total",
        "HTTP requests answered, by route pattern, method and status."
    );
    describe_histogram!(
        "arbor_http_request_duration_seconds",
        "Time to the response head, by route pattern."
    );
    describe_counter!(
        "arbor_provider_requests_total",
        "Calls to LLM providers, by provider, model and outcome."
    );
    describe_histogram!(
        "arbor_provider_request_duration_seconds",
        "Time until a provider's stream opened (or the call failed)."
    );
    describe_counter!(
        "arbor_provider_tokens_total",
        "Tokens reported by providers, by direction and surface."
    );
    describe_counter!(
        "arbor_cost_usd_total",
        "Cost of provider calls in US dollars, where prices are known."
    );
    describe_gauge!("arbor_runs", "Runs by state, from the database.");
    describe_gauge!("arbor_runs_live", "Replies being written by this instance now.");
    describe_gauge!("arbor_sse_connections", "Open live event streams (session pages and tabs).");
    describe_gauge!(
        "arbor_queue_depth",
        "Items waiting in an internal queue (search indexer, usage writer)."
    );
    describe_gauge!("arbor_db_pool_connections", "Database pool connections, by state.");
    describe_counter!("arbor_db_statements_total", "Statements run on the database.");
    describe_counter!(
        "arbor_db_write_failures_total",
        "Attempts at a write nobody waits on that the database refused, by write (reply_end, \
         usage); each write gets five attempts before it is given up."
    );
    describe_gauge!(
        "arbor_allocator_bytes",
        "The memory allocator's figures: allocated (live), active (pages holding live memory), \
         resident (pages it holds in RAM, including freed ones not yet returned), mapped, retained \
         (returned but kept mapped), metadata."
    );
    // Shown from the first scrape, empty or not.
    for queue in ["search_indexer", "usage_writer"] {
        gauge!("arbor_queue_depth", "queue" => queue).increment(0.0);
    }
}

/// An HTTP request answered. `route` is the matched pattern (never the raw path, so ids do not
/// make a series each).
pub fn http_request(route: &str, method: &str, status: u16, elapsed: Duration) {
    if !enabled() {
        return;
    }
    let labels =
        [("route", route.to_string()), ("method", method.to_string()), ("status", status.to_string())];
    counter!("arbor_http_requests_total", &labels).increment(1);
    let labels = [("route", route.to_string()), ("method", method.to_string())];
    histogram!("arbor_http_request_duration_seconds", &labels).record(elapsed.as_secs_f64());
}

/// A provider call opened its stream (`outcome` "ok") or failed ("error", "rate_limited",
/// "unauthorized"…).
pub fn provider_call(provider: &str, model: &str, outcome: &'static str, elapsed: Duration) {
    if !enabled() {
        return;
    }
    let labels =
        [("provider", provider.to_string()), ("model", model.to_string()), ("outcome", outcome.to_string())];
    counter!("arbor_provider_requests_total", &labels).increment(1);
    let labels = [("provider", provider.to_string()), ("model", model.to_string())];
    histogram!("arbor_provider_request_duration_seconds", &labels).record(elapsed.as_secs_f64());
}

/// What a finished call used, as recorded in the usage table; `via` is `ui` or `api`.
pub fn provider_usage(
    provider: &str,
    model: &str,
    via: &str,
    input: u64,
    output: u64,
    cost_micros: Option<i64>,
) {
    if !enabled() {
        return;
    }
    for (direction, n) in [("input", input), ("output", output)] {
        let labels = [
            ("provider", provider.to_string()),
            ("model", model.to_string()),
            ("direction", direction.to_string()),
            ("via", via.to_string()),
        ];
        counter!("arbor_provider_tokens_total", &labels).increment(n);
    }
    if let Some(micros) = cost_micros.filter(|c| *c > 0) {
        let labels = [("provider", provider.to_string()), ("model", model.to_string())];
        // The facade's counters count integers and cost is fractional: a gauge that only ever
        // grows reads as a counter to Prometheus.
        gauge!("arbor_cost_usd_total", &labels).increment(micros as f64 / 1_000_000.0);
    }
}

/// One more item waits in `queue`.
pub fn queued(queue: &'static str) {
    gauge!("arbor_queue_depth", "queue" => queue).increment(1.0);
}

/// `n` items left `queue`.
pub fn dequeued(queue: &'static str, n: usize) {
    gauge!("arbor_queue_depth", "queue" => queue).decrement(n as f64);
}

/// `n` statements ran on the database (one call, or a script of several).
pub fn db_statements(n: u64) {
    counter!("arbor_db_statements_total").increment(n);
}

/// The database refused an attempt at a `write` that is tried again
/// ([`crate::storage::retry`]).
pub fn write_failed(write: &'static str) {
    counter!("arbor_db_write_failures_total", "write" => write).increment(1);
}

/// The present, read when a scraper asks.
#[derive(Debug, Default)]
pub struct Present {
    /// Runs by state, from the database.
    pub runs_by_state: Vec<(String, u64)>,
    /// Replies this instance is writing now.
    pub runs_live: usize,
    /// Open live event streams.
    pub sse_connections: usize,
    /// Pool connections open and idle.
    pub pool: (u32, usize),
}

/// The text format a scraper reads, with the present folded in.
pub fn render(handle: &PrometheusHandle, present: &Present) -> String {
    for state in ["running", "awaiting_confirmation"] {
        let n = present.runs_by_state.iter().find(|(s, _)| s == state).map_or(0, |(_, n)| *n);
        gauge!("arbor_runs", "state" => state).set(n as f64);
    }
    gauge!("arbor_runs_live").set(present.runs_live as f64);
    gauge!("arbor_sse_connections").set(present.sse_connections as f64);
    let (open, idle) = present.pool;
    gauge!("arbor_db_pool_connections", "state" => "idle").set(idle as f64);
    gauge!("arbor_db_pool_connections", "state" => "busy").set(open.saturating_sub(idle as u32) as f64);
    allocator_figures();
    handle.run_upkeep();
    handle.render()
}

/// jemalloc's own statistics, refreshed (its `epoch`) at each scrape: they tell memory in use
/// from memory the allocator keeps after a burst. Absent if jemalloc cannot be read.
#[cfg(all(unix, not(target_env = "musl")))]
fn allocator_figures() {
    use tikv_jemalloc_ctl::{epoch, stats};
    if epoch::advance().is_err() {
        return;
    }
    let figures = [
        ("allocated", stats::allocated::read()),
        ("active", stats::active::read()),
        ("resident", stats::resident::read()),
        ("mapped", stats::mapped::read()),
        ("retained", stats::retained::read()),
        ("metadata", stats::metadata::read()),
    ];
    for (kind, bytes) in figures {
        if let Ok(bytes) = bytes {
            gauge!("arbor_allocator_bytes", "kind" => kind).set(bytes as f64);
        }
    }
}

/// Where the server does not run on jemalloc there are no allocator figures.
#[cfg(not(all(unix, not(target_env = "musl"))))]
fn allocator_figures() {}

#[cfg(all(test, unix, not(target_env = "musl")))]
mod tests {
    /// `.cargo/config.toml` builds jemalloc with one arena that gives freed pages back after
    /// 250 ms (BENCHMARKS.md, "Soak") and small per-thread caches (step 16 of the performance
    /// work); a build that lost the settings would keep them for 10 s in four arenas per core,
    /// and up to 200 objects of each size up to 32 KiB in every thread.
    #[test]
    fn the_allocator_is_built_with_one_arena_that_returns_freed_pages_within_a_quarter_second() {
        let mut report = Vec::new();
        tikv_jemalloc_ctl::stats_print::stats_print(
            &mut report,
            tikv_jemalloc_ctl::stats_print::Options::default(),
        )
        .expect("jemalloc's statistics");
        let report = String::from_utf8_lossy(&report);
        // Lines such as `  opt.dirty_decay_ms: 250 (arenas.dirty_decay_ms: 250)`.
        let option = |name: &str| {
            let prefix = format!("opt.{name}: ");
            report.lines().find_map(|l| {
                l.trim().strip_prefix(prefix.as_str())?.split_whitespace().next().map(str::to_owned)
            })
        };
        let excerpt = &report[..report.len().min(3000)];
        assert_eq!(option("dirty_decay_ms").as_deref(), Some("250"), "{excerpt}");
        assert_eq!(option("narenas").as_deref(), Some("1"), "{excerpt}");
        assert_eq!(option("tcache_max").as_deref(), Some("4096"), "{excerpt}");
        assert_eq!(option("tcache_nslots_small_max").as_deref(), Some("32"), "{excerpt}");
        assert_eq!(option("tcache_nslots_large").as_deref(), Some("4"), "{excerpt}");
    }
}
