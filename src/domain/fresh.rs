//! Copies of rows that every call reads before it asks a provider (the token and its user, the
//! member's aliases, the quota table, members' own-key lists) or that every page request reads
//! (the browser session and its person), kept in memory between writes. A
//! copy is used while the generation its table's writes move (`storage::changes`) has not moved
//! since it was read, and for a fixed age at most. Writes on other instances move the
//! generation here through the bus ([`share_changes`]); the age bounds what a lost note or a
//! write by the command line (which has no bus) leaves stale. The copies a provider call reads
//! (aliases, quotas, own keys) are read again beside the call once aged
//! ([`FreshCopies::get_or_refresh`]), so the read is never in the call's way; the token and
//! the browser session, which decide who may call at all, are read in the call.

use std::collections::HashMap;
use std::hash::Hash;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use bytes::Bytes;
use tokio::sync::broadcast;

use crate::bus::{Heard, SharedBus, Topic};
use crate::storage::changes::{self, Kept};

/// One copy: its value, the generation when it was read, and when.
struct Copy<V> {
    generation: u64,
    read_at: Instant,
    value: V,
    /// A read to replace it runs beside the calls ([`FreshCopies::get_or_refresh`]).
    refreshing: bool,
}

/// An aged copy is still used, while it is read again beside the call, until it is this many
/// ages old; older, the call reads it itself.
const REFRESH_BESIDE_UNTIL: u32 = 4;

/// Copies by key, each used for `age` at most; at `most` keys all are dropped and read again.
pub(crate) struct FreshCopies<K, V> {
    copies: Mutex<HashMap<K, Copy<V>>>,
    age: Duration,
    most: usize,
}

impl<K: Eq + Hash, V: Clone> FreshCopies<K, V> {
    /// No copies yet.
    pub(crate) fn new(age: Duration, most: usize) -> Self {
        FreshCopies { copies: Mutex::new(HashMap::new()), age, most }
    }

    /// The copy of `key`, if it was read at `generation` (read the generation before the rows)
    /// and is younger than the age.
    pub(crate) fn get(&self, key: &K, generation: u64) -> Option<V> {
        let copies = self.copies.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
        copies
            .get(key)
            .filter(|c| c.generation == generation && c.read_at.elapsed() < self.age)
            .map(|c| c.value.clone())
    }

    /// Keeps `value`, read at `generation`.
    pub(crate) fn put(&self, key: K, generation: u64, value: V) {
        let mut copies = self.copies.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
        if copies.len() >= self.most {
            copies.clear();
        }
        copies.insert(key, Copy { generation, read_at: Instant::now(), value, refreshing: false });
    }

    /// The copy of `key` while it is fresh (see [`Self::get`]; read `generation` before the
    /// rows), else what `find` reads, kept unless it found nothing.
    pub(crate) async fn get_or_find<E>(
        &self,
        key: K,
        generation: u64,
        find: impl AsyncFnOnce() -> Result<Option<V>, E>,
    ) -> Result<Option<V>, E> {
        if let Some(value) = self.get(&key, generation) {
            return Ok(Some(value));
        }
        let found = find().await?;
        if let Some(value) = &found {
            self.put(key, generation, value.clone());
        }
        Ok(found)
    }

    /// [`Self::get_or_find`] for rows that are always there (a list, a table).
    pub(crate) async fn get_or_read<E>(
        &self,
        key: K,
        generation: u64,
        read: impl AsyncFnOnce() -> Result<V, E>,
    ) -> Result<V, E> {
        if let Some(value) = self.get(&key, generation) {
            return Ok(value);
        }
        let value = read().await?;
        self.put(key, generation, value.clone());
        Ok(value)
    }
}

impl<K, V> FreshCopies<K, V>
where
    K: Eq + Hash + Clone + Send + 'static,
    V: Clone + Send + 'static,
{
    /// [`Self::get_or_read`], except that a copy that only aged (no write moved its generation)
    /// is still used while `read` runs again on a task of its own, and the next calls get what
    /// it read. The read before a provider call is then never in the call's way, and with no
    /// write here the age still bounds what another instance's or the command line's changes
    /// wait for, plus the one call that starts the read. Writes made here move the generation,
    /// and a copy read at another generation is never used.
    pub(crate) async fn get_or_refresh<E, Fut>(
        self: &Arc<Self>,
        key: K,
        generation: u64,
        read: impl FnOnce() -> Fut,
    ) -> Result<V, E>
    where
        Fut: Future<Output = Result<V, E>> + Send + 'static,
    {
        let aged = {
            let mut copies = self.copies.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
            match copies
                .get_mut(&key)
                .filter(|c| c.generation == generation)
                .map(|c| (c.read_at.elapsed(), c))
            {
                Some((age, c)) if age < self.age => return Ok(c.value.clone()),
                Some((age, c)) if age < self.age * REFRESH_BESIDE_UNTIL => {
                    let start = !c.refreshing;
                    c.refreshing = true;
                    Some((c.value.clone(), start))
                }
                _ => None,
            }
        };
        match aged {
            Some((value, true)) => {
                let copies = Arc::clone(self);
                let reading = read();
                tokio::spawn(async move {
                    match reading.await {
                        Ok(fresh) => copies.put(key, generation, fresh),
                        // Left aged: the next call tries again.
                        Err(_) => copies.refresh_failed(&key),
                    }
                });
                Ok(value)
            }
            Some((value, false)) => Ok(value),
            None => {
                let value = read().await?;
                self.put(key, generation, value.clone());
                Ok(value)
            }
        }
    }

    fn refresh_failed(&self, key: &K) {
        let mut copies = self.copies.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
        if let Some(c) = copies.get_mut(key) {
            c.refreshing = false;
        }
    }
}

/// Tells the other instances what this process writes, and moves the generations here for what
/// they write, for as long as the process runs.
pub fn share_changes(bus: &SharedBus) {
    if !bus.is_shared() {
        return;
    }
    let mut local = changes::local_changes();
    let out = bus.clone();
    tokio::spawn(async move {
        loop {
            match local.recv().await {
                Ok(kept) => {
                    if let Ok(body) = serde_json::to_vec(&Note { kept }) {
                        out.publish(Topic::Caches, Bytes::from(body));
                    }
                }
                // Some were dropped here: the others must read everything again.
                Err(broadcast::error::RecvError::Lagged(_)) => {
                    for kept in Kept::ALL {
                        if let Ok(body) = serde_json::to_vec(&Note { kept }) {
                            out.publish(Topic::Caches, Bytes::from(body));
                        }
                    }
                }
                Err(broadcast::error::RecvError::Closed) => return,
            }
        }
    });
    crate::bus::listen(bus, Topic::Caches, |heard| async move {
        match heard {
            Heard::Gap => Kept::ALL.into_iter().for_each(changes::heard),
            // Other subsystems' notes share the topic; theirs do not parse as this one.
            Heard::Frame(frame) => {
                if let Ok(Note { kept }) = serde_json::from_slice::<Note>(&frame.body) {
                    changes::heard(kept);
                }
            }
        }
    });
}

/// What instances tell each other of a write: which kind of kept copy it made stale.
#[derive(serde::Serialize, serde::Deserialize)]
#[serde(deny_unknown_fields)]
struct Note {
    kept: Kept,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_copy_serves_until_its_generation_moves_or_it_ages() {
        let copies = FreshCopies::new(Duration::from_millis(50), 2);
        copies.put(1, 7, "a");
        assert_eq!(copies.get(&1, 7), Some("a"));
        assert_eq!(copies.get(&1, 8), None, "written since");
        assert_eq!(copies.get(&2, 7), None);
        std::thread::sleep(Duration::from_millis(60));
        assert_eq!(copies.get(&1, 7), None, "too old");
        copies.put(1, 7, "a");
        copies.put(2, 7, "b");
        copies.put(3, 7, "c");
        assert_eq!((copies.get(&1, 7), copies.get(&3, 7)), (None, Some("c")), "bounded");
    }

    #[tokio::test]
    async fn a_read_through_reads_once_while_fresh_and_keeps_nothing_it_did_not_find() {
        let copies = FreshCopies::new(Duration::from_secs(60), 10);
        let reads = std::sync::atomic::AtomicUsize::new(0);
        let read = async || {
            reads.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
            Ok::<_, ()>("row")
        };
        assert_eq!(copies.get_or_read(1, 7, read).await, Ok("row"));
        assert_eq!(copies.get_or_read(1, 7, read).await, Ok("row"));
        assert_eq!(reads.load(std::sync::atomic::Ordering::SeqCst), 1, "the second came from memory");
        assert_eq!(copies.get_or_read(1, 8, read).await, Ok("row"));
        assert_eq!(reads.load(std::sync::atomic::Ordering::SeqCst), 2, "written since: read again");
        assert_eq!(copies.get_or_find(2, 7, async || Ok::<_, ()>(None)).await, Ok(None));
        assert_eq!(copies.get(&2, 7), None, "nothing found, nothing kept");
        assert_eq!(copies.get_or_find(2, 7, async || Err::<Option<&str>, _>("down")).await, Err("down"));
    }

    /// Waits (a few seconds at most) until `done` holds.
    async fn until(done: impl Fn() -> bool) {
        for _ in 0..5000 {
            if done() {
                return;
            }
            tokio::time::sleep(Duration::from_millis(1)).await;
        }
    }

    #[tokio::test]
    async fn an_aged_copy_serves_while_it_is_read_again_beside_the_call() {
        use std::sync::atomic::{AtomicUsize, Ordering::SeqCst};
        // Long enough that two calls in a row fall within it on a busy machine.
        const AGE: Duration = Duration::from_millis(300);
        let past = |ages: u32| AGE * ages + Duration::from_millis(20);
        let copies = Arc::new(FreshCopies::new(AGE, 10));
        let reads = Arc::new(AtomicUsize::new(0));
        let read = |value: &'static str| {
            let reads = Arc::clone(&reads);
            move || async move {
                reads.fetch_add(1, SeqCst);
                Ok::<_, ()>(value)
            }
        };
        assert_eq!(copies.get_or_refresh(1, 7, read("a")).await, Ok("a"), "nothing kept: read in the call");
        assert_eq!(copies.get_or_refresh(1, 7, read("b")).await, Ok("a"), "fresh: from memory");
        assert_eq!(reads.load(SeqCst), 1);
        tokio::time::sleep(past(1)).await;
        // Aged: this call gets the old copy and starts one read; the next ones do not start more.
        assert_eq!(copies.get_or_refresh(1, 7, read("b")).await, Ok("a"));
        until(|| copies.get(&1, 7) == Some("b")).await;
        assert_eq!(copies.get_or_refresh(1, 7, read("c")).await, Ok("b"), "the read beside the call landed");
        assert_eq!(reads.load(SeqCst), 2);
        // A write here moved the generation: never the old copy, read in the call.
        assert_eq!(copies.get_or_refresh(1, 8, read("d")).await, Ok("d"));
        // Far past the age (a read beside calls that never lands): read in the call again.
        tokio::time::sleep(past(REFRESH_BESIDE_UNTIL)).await;
        assert_eq!(copies.get_or_refresh(1, 8, read("e")).await, Ok("e"));
        // A failed read beside the call leaves the copy aged, and the next call tries again.
        tokio::time::sleep(past(1)).await;
        let failing = || async { Err::<&str, _>(()) };
        assert_eq!(copies.get_or_refresh(1, 8, failing).await, Ok("e"));
        until(|| copies.copies.lock().unwrap().get(&1).is_some_and(|c| !c.refreshing)).await;
        assert_eq!(copies.get_or_refresh(1, 8, read("f")).await, Ok("e"));
        until(|| copies.get(&1, 8) == Some("f")).await;
        assert_eq!(copies.get(&1, 8), Some("f"));
    }
}
