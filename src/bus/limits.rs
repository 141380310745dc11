//! Counters every instance shares: fixed windows in Redis, each step one atomic script, so two
//! instances counting the same member's requests see one count. Without Redis (one instance)
//! callers keep their in-process counters; when Redis fails mid-way they fall back to them too,
//! and say so in the log.

use std::time::Duration;

use redis::Script;

/// A handle to the shared counters.
#[derive(Clone)]
pub struct SharedCounters {
    conn: redis::aio::ConnectionManager,
    prefix: std::sync::Arc<str>,
}

/// Counts one hit in `KEYS[1]`'s window unless it is full. Returns the count after the hit, or
/// minus the milliseconds until the window ends when it was full.
const HIT: &str = r"
local n = tonumber(redis.call('GET', KEYS[1]) or '0')
if n >= tonumber(ARGV[1]) then
  local ttl = redis.call('PTTL', KEYS[1])
  if ttl < 1 then ttl = 1 end
  return -ttl
end
n = redis.call('INCR', KEYS[1])
if n == 1 then redis.call('PEXPIRE', KEYS[1], ARGV[2]) end
return n
";

/// Adds `ARGV[1]` to `KEYS[1]`, starting its window when it is new; returns the total.
const ADD: &str = r"
local n = redis.call('INCRBY', KEYS[1], ARGV[1])
if redis.call('PTTL', KEYS[1]) < 0 then redis.call('PEXPIRE', KEYS[1], ARGV[2]) end
return n
";

/// Takes `KEYS[1]` away from `ARGV[1]` (never below zero, the key goes at zero).
const SUB: &str = r"
local n = tonumber(redis.call('GET', KEYS[1]) or '0') - tonumber(ARGV[1])
if n <= 0 then redis.call('DEL', KEYS[1]) return 0 end
redis.call('SET', KEYS[1], n, 'KEEPTTL')
return n
";

/// Deletes the lock `KEYS[1]` only if it still holds this holder's token `ARGV[1]`.
const UNLOCK: &str = r"
if redis.call('GET', KEYS[1]) == ARGV[1] then return redis.call('DEL', KEYS[1]) end
return 0
";

/// A short lock every instance respects, held until [`SharedCounters::unlock`] (or its expiry).
#[derive(Debug)]
pub struct SharedLock {
    key: String,
    token: String,
}

/// Why a shared counter could not be used.
#[derive(Debug, thiserror::Error)]
#[error("shared counters unavailable: {0}")]
pub struct CounterError(String);

impl SharedCounters {
    /// Connects to the Redis at `url`; every key starts with `prefix`.
    pub async fn connect(url: &str, prefix: &str) -> Result<SharedCounters, CounterError> {
        let client = redis::Client::open(url).map_err(|e| CounterError(e.to_string()))?;
        let conn = tokio::time::timeout(Duration::from_secs(5), client.get_connection_manager())
            .await
            .map_err(|_| CounterError("timed out".into()))?
            .map_err(|e| CounterError(e.to_string()))?;
        Ok(SharedCounters { conn, prefix: prefix.into() })
    }

    /// The full key of a counter named `name` (the installation's prefix first).
    pub fn key(&self, name: &str) -> String {
        format!("{}:{name}", self.prefix)
    }

    /// Counts one hit of `key` in a window of `window` unless `limit` hits were counted there
    /// already; then `Err` with the time left in the window.
    pub async fn hit(
        &self,
        key: &str,
        limit: u64,
        window: Duration,
    ) -> Result<Result<(), Duration>, CounterError> {
        let mut conn = self.conn.clone();
        let n: i64 = Script::new(HIT)
            .key(key)
            .arg(limit)
            .arg(window.as_millis().max(1) as u64)
            .invoke_async(&mut conn)
            .await
            .map_err(|e| CounterError(e.to_string()))?;
        Ok(if n < 0 { Err(Duration::from_millis(n.unsigned_abs())) } else { Ok(()) })
    }

    /// Adds `amount` to `key`'s window of `window`; returns the total in it.
    pub async fn add(&self, key: &str, amount: u64, window: Duration) -> Result<u64, CounterError> {
        let mut conn = self.conn.clone();
        let n: i64 = Script::new(ADD)
            .key(key)
            .arg(amount)
            .arg(window.as_millis().max(1) as u64)
            .invoke_async(&mut conn)
            .await
            .map_err(|e| CounterError(e.to_string()))?;
        Ok(n.max(0) as u64)
    }

    /// Takes `amount` from `key` (not below zero); returns what is left.
    pub async fn sub(&self, key: &str, amount: u64) -> Result<u64, CounterError> {
        let mut conn = self.conn.clone();
        let n: i64 = Script::new(SUB)
            .key(key)
            .arg(amount)
            .invoke_async(&mut conn)
            .await
            .map_err(|e| CounterError(e.to_string()))?;
        Ok(n.max(0) as u64)
    }

    /// Takes the lock `key` (waiting at most `wait` for another holder), held at most `hold`.
    pub async fn lock(&self, key: &str, hold: Duration, wait: Duration) -> Result<SharedLock, CounterError> {
        let token = uuid::Uuid::new_v4().simple().to_string();
        let deadline = tokio::time::Instant::now() + wait;
        loop {
            let mut conn = self.conn.clone();
            let taken: Option<String> = redis::cmd("SET")
                .arg(key)
                .arg(&token)
                .arg("NX")
                .arg("PX")
                .arg(hold.as_millis().max(1) as u64)
                .query_async(&mut conn)
                .await
                .map_err(|e| CounterError(e.to_string()))?;
            if taken.is_some() {
                return Ok(SharedLock { key: key.to_string(), token });
            }
            if tokio::time::Instant::now() >= deadline {
                return Err(CounterError(format!("{key} stayed locked")));
            }
            tokio::time::sleep(Duration::from_millis(5)).await;
        }
    }

    /// Gives a lock back (a lock that expired meanwhile is left to its new holder).
    pub async fn unlock(&self, lock: SharedLock) {
        let mut conn = self.conn.clone();
        let done: Result<i64, _> =
            Script::new(UNLOCK).key(&lock.key).arg(&lock.token).invoke_async(&mut conn).await;
        if let Err(e) = done {
            tracing::warn!(error = %e, key = %lock.key, "a shared lock was not given back; it expires on its own");
        }
    }

    /// The total in `key`'s window (0 when none is open), and the time left in it.
    pub async fn total(&self, key: &str) -> Result<(u64, Duration), CounterError> {
        let mut conn = self.conn.clone();
        let (n, ttl): (Option<i64>, i64) = redis::pipe()
            .cmd("GET")
            .arg(key)
            .cmd("PTTL")
            .arg(key)
            .query_async(&mut conn)
            .await
            .map_err(|e| CounterError(e.to_string()))?;
        Ok((n.unwrap_or(0).max(0) as u64, Duration::from_millis(ttl.max(0) as u64)))
    }
}
