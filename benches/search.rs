//! Search benchmark: indexing throughput and query latency of `arbor::index` on disk
//! (targets: at least 50,000 messages/s indexed; p99 under 20 ms at 1M messages).
//!
//! ```sh
//! cargo bench --bench search -- [SIZE ...] [--batch 50000] [--queries 1000]
//! ```
//!
//! For each SIZE (default: 10000 100000 1000000) a fresh index in a temp dir receives SIZE
//! generated messages from 100 users through `SearchIndex::apply`, in batches of `--batch`
//! upserts (default `REINDEX_BATCH`; one commit per batch, as reindexing does). Text is
//! sentences of 20–200 words drawn from a fixed 5,000-word vocabulary with a Zipf distribution,
//! from a seeded RNG, so every run indexes the same data. Then `--queries` searches (a page of
//! 20, snippets included), each for one random user, cycle through five kinds: a common word,
//! two words, a phrase, a rare word, a common word with `role:assistant`.
//!
//! Throughput counts only the time spent in `apply` (generating text is not Arbor's work; merges
//! still running after the last commit are not counted). Latency is per `parse` + `search`
//! call, sequential, after 50 warm-up queries. One markdown row per size is printed, and the
//! per-kind latencies go to stderr. Run it on an otherwise idle machine.

use std::collections::HashSet;
use std::path::Path;
use std::time::{Duration, Instant};

use arbor::index::{IndexDoc, IndexOp, REINDEX_BATCH, SearchIndex, SearchQuery};
use chrono::{DateTime, TimeZone, Utc};
use rand::rngs::SmallRng;
use rand::{RngExt, SeedableRng};
use uuid::Uuid;

const USERS: usize = 100;
const VOCABULARY: usize = 5_000;
const ZIPF_S: f64 = 1.0;
const SESSION_LEN: usize = 20;

type Res<T> = Result<T, Box<dyn std::error::Error>>;

struct Args {
    sizes: Vec<usize>,
    batch: usize,
    queries: usize,
}

fn args() -> Args {
    let mut out = Args { sizes: Vec::new(), batch: REINDEX_BATCH, queries: 1_000 };
    let mut it = std::env::args().skip(1);
    while let Some(a) = it.next() {
        match a.as_str() {
            "--batch" => out.batch = it.next().and_then(|v| v.parse().ok()).unwrap_or(out.batch),
            "--queries" => out.queries = it.next().and_then(|v| v.parse().ok()).unwrap_or(out.queries),
            // `cargo bench` passes `--bench`; ignore it and anything else unknown.
            _ => {
                if let Ok(n) = a.replace('_', "").parse() {
                    out.sizes.push(n);
                }
            }
        }
    }
    if out.sizes.is_empty() {
        out.sizes = vec![10_000, 100_000, 1_000_000];
    }
    out
}

/// Pronounceable pseudo-words, shortest first so the frequent ranks get the short words, as in
/// natural language.
fn vocabulary(rng: &mut SmallRng) -> Vec<String> {
    const ONSETS: &[&str] = &[
        "b", "c", "d", "f", "g", "h", "j", "k", "l", "m", "n", "p", "r", "s", "t", "v", "w", "z", "br", "ch",
        "cl", "dr", "fl", "gr", "pl", "pr", "sh", "sl", "st", "th", "tr",
    ];
    const VOWELS: &[&str] = &["a", "e", "i", "o", "u", "ai", "ea", "io", "ou"];
    let mut seen = HashSet::new();
    let mut words = Vec::with_capacity(VOCABULARY);
    while words.len() < VOCABULARY {
        let syllables = 1 + (words.len() * 4 / VOCABULARY) + rng.random_range(0..2);
        let mut w = String::new();
        for _ in 0..syllables {
            w.push_str(ONSETS[rng.random_range(0..ONSETS.len())]);
            w.push_str(VOWELS[rng.random_range(0..VOWELS.len())]);
        }
        if rng.random_bool(0.3) {
            w.push_str(["n", "s", "t", "r", "ng"][rng.random_range(0..5)]);
        }
        if seen.insert(w.clone()) {
            words.push(w);
        }
    }
    words
}

struct Zipf {
    cumulative: Vec<f64>,
}

impl Zipf {
    fn new(n: usize, s: f64) -> Zipf {
        let mut acc = 0.0;
        let cumulative = (1..=n)
            .map(|r| {
                acc += 1.0 / (r as f64).powf(s);
                acc
            })
            .collect();
        Zipf { cumulative }
    }

    fn sample(&self, rng: &mut SmallRng) -> usize {
        let total = self.cumulative.last().copied().unwrap_or(1.0);
        let x = rng.random::<f64>() * total;
        self.cumulative.partition_point(|&c| c < x).min(self.cumulative.len() - 1)
    }
}

struct Generator {
    rng: SmallRng,
    words: Vec<String>,
    zipf: Zipf,
    users: Vec<Uuid>,
    /// Per user: (workspace, session, messages in it so far).
    sessions: Vec<(Uuid, Uuid, usize)>,
    start: DateTime<Utc>,
    count: u64,
}

impl Generator {
    fn new(seed: u64) -> Generator {
        let mut rng = SmallRng::seed_from_u64(seed);
        let words = vocabulary(&mut rng);
        let users: Vec<Uuid> = (0..USERS).map(|i| Uuid::from_u128(0xA000 + i as u128)).collect();
        let sessions =
            users.iter().map(|u| (Uuid::from_u128(u.as_u128() << 16), Uuid::nil(), SESSION_LEN)).collect();
        let start = Utc.with_ymd_and_hms(2024, 1, 1, 0, 0, 0).single().unwrap_or_default();
        Generator { rng, words, zipf: Zipf::new(VOCABULARY, ZIPF_S), users, sessions, start, count: 0 }
    }

    fn text(&mut self) -> String {
        let n = self.rng.random_range(20..=200);
        let mut text = String::with_capacity(n * 7);
        let mut sentence_left = 0;
        for i in 0..n {
            let w = &self.words[self.zipf.sample(&mut self.rng)];
            if sentence_left == 0 {
                if i > 0 {
                    text.push_str(". ");
                }
                sentence_left = self.rng.random_range(6..16);
                let mut c = w.chars();
                if let Some(first) = c.next() {
                    text.extend(first.to_uppercase());
                    text.push_str(c.as_str());
                }
            } else {
                text.push_str(if self.rng.random_bool(0.08) { ", " } else { " " });
                text.push_str(w);
            }
            sentence_left -= 1;
        }
        text.push('.');
        text
    }

    fn next(&mut self) -> IndexDoc {
        let u = self.rng.random_range(0..USERS);
        let user_id = self.users[u];
        let (workspace_id, session_id, len) = &mut self.sessions[u];
        if *len >= SESSION_LEN {
            *session_id = Uuid::new_v4();
            *len = 0;
        }
        *len += 1;
        let (workspace_id, session_id, turn) = (*workspace_id, *session_id, *len);
        self.count += 1;
        let role = match (turn % 2, self.rng.random_bool(0.1)) {
            (_, true) => "tool",
            (1, _) => "user",
            _ => "assistant",
        };
        let title = format!("{} {}", self.words[turn * 7 % 500], self.words[self.count as usize % 800]);
        IndexDoc {
            message_id: Uuid::now_v7(),
            user_id,
            workspace_id,
            session_id,
            role: role.to_string(),
            // A message every ~30 s: 1M messages span about a year.
            created_at: self.start + chrono::Duration::seconds(self.count as i64 * 30),
            has_attachment: self.rng.random_bool(0.05),
            text: self.text(),
            session_title: title,
        }
    }
}

fn percentile(sorted: &[Duration], p: f64) -> Duration {
    let idx = ((sorted.len() as f64 - 1.0) * p).round() as usize;
    sorted.get(idx.min(sorted.len().saturating_sub(1))).copied().unwrap_or_default()
}

fn ms(d: Duration) -> f64 {
    d.as_secs_f64() * 1e3
}

fn dir_size(dir: &Path) -> u64 {
    std::fs::read_dir(dir)
        .map(|rd| rd.flatten().filter_map(|e| e.metadata().ok()).map(|m| m.len()).sum())
        .unwrap_or(0)
}

struct Row {
    size: usize,
    index_secs: f64,
    rate: f64,
    disk_mb: f64,
    p50: Duration,
    p99: Duration,
    max: Duration,
    by_kind: Vec<(&'static str, Duration, Duration, f64)>,
}

fn run(size: usize, batch: usize, queries: usize) -> Res<Row> {
    let tmp = tempfile::tempdir()?;
    let (index, _) = SearchIndex::open(tmp.path())?;
    let mut generator = Generator::new(7);
    let mut applying = Duration::ZERO;
    let mut done = 0;
    while done < size {
        let n = batch.min(size - done);
        let ops: Vec<IndexOp> = (0..n).map(|_| IndexOp::Upsert(generator.next())).collect();
        let t = Instant::now();
        index.apply(ops)?;
        applying += t.elapsed();
        done += n;
    }
    if index.num_docs() != size as u64 {
        return Err(format!("indexed {} of {size}", index.num_docs()).into());
    }
    // Let background merges settle a little, as they would between bursts on a server.
    std::thread::sleep(Duration::from_secs(2));

    let words = generator.words.clone();
    let users = generator.users.clone();
    let mut rng = SmallRng::seed_from_u64(99);
    let mut phrase_source = Generator::new(7);
    let kinds = ["common word", "two words", "phrase", "rare word", "word + role"];
    let mut make = |i: usize, rng: &mut SmallRng| -> (usize, String) {
        let kind = i % kinds.len();
        let q = match kind {
            0 => words[rng.random_range(0..50)].clone(),
            1 => format!("{} {}", words[rng.random_range(0..100)], words[rng.random_range(100..1000)]),
            2 => {
                // Two adjacent words from a message like the indexed ones.
                let text = phrase_source.text().to_lowercase();
                let ws: Vec<&str> =
                    text.split(|c: char| !c.is_alphanumeric()).filter(|w| !w.is_empty()).collect();
                let at = rng.random_range(0..ws.len().saturating_sub(1).max(1));
                format!("\"{} {}\"", ws[at], ws.get(at + 1).copied().unwrap_or(ws[at]))
            }
            3 => words[rng.random_range(3000..VOCABULARY)].clone(),
            _ => format!("{} role:assistant", words[rng.random_range(0..50)]),
        };
        (kind, q)
    };
    for i in 0..50 {
        let (_, q) = make(i, &mut rng);
        let user = users[rng.random_range(0..USERS)];
        index.search(user, &SearchQuery::parse(&q, None)?, 0, 20)?;
    }
    let mut all = Vec::with_capacity(queries);
    let mut per_kind: Vec<(Vec<Duration>, usize)> = vec![(Vec::new(), 0); kinds.len()];
    for i in 0..queries {
        let (kind, q) = make(i, &mut rng);
        let user = users[rng.random_range(0..USERS)];
        let t = Instant::now();
        let r = index.search(user, &SearchQuery::parse(&q, None)?, 0, 20)?;
        let took = t.elapsed();
        all.push(took);
        per_kind[kind].0.push(took);
        per_kind[kind].1 += r.total;
    }
    all.sort();
    let by_kind = per_kind
        .into_iter()
        .zip(kinds)
        .map(|((mut v, hits), name)| {
            v.sort();
            let avg_hits = hits as f64 / v.len().max(1) as f64;
            (name, percentile(&v, 0.5), percentile(&v, 0.99), avg_hits)
        })
        .collect();
    Ok(Row {
        size,
        index_secs: applying.as_secs_f64(),
        rate: size as f64 / applying.as_secs_f64(),
        disk_mb: dir_size(tmp.path()) as f64 / 1e6,
        p50: percentile(&all, 0.5),
        p99: percentile(&all, 0.99),
        max: all.last().copied().unwrap_or_default(),
        by_kind,
    })
}

fn main() -> Res<()> {
    let a = args();
    let cores = std::thread::available_parallelism().map_or(1, |n| n.get());
    println!("search benchmark: {cores} cores, batches of {}, {} queries per size\n", a.batch, a.queries);
    let mut rows = Vec::new();
    for &size in &a.sizes {
        eprintln!("indexing {size} messages…");
        let row = run(size, a.batch, a.queries)?;
        eprintln!(
            "  {:.1} s, {:.0} msg/s; per kind (p50 / p99 ms, avg total hits): {}",
            row.index_secs,
            row.rate,
            row.by_kind
                .iter()
                .map(|(k, p50, p99, h)| format!("{k} {:.2} / {:.2}, {h:.0}", ms(*p50), ms(*p99)))
                .collect::<Vec<_>>()
                .join("; ")
        );
        rows.push(row);
    }
    println!("| messages | indexing | messages/s | index size | query p50 | query p99 | query max |");
    println!("|---:|---:|---:|---:|---:|---:|---:|");
    for r in &rows {
        println!(
            "| {} | {:.1} s | {:.0} | {:.0} MB | {:.2} ms | {:.2} ms | {:.2} ms |",
            r.size,
            r.index_secs,
            r.rate,
            r.disk_mb,
            ms(r.p50),
            ms(r.p99),
            ms(r.max)
        );
    }
    Ok(())
}
