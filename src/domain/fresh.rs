//! Copies of rows that every call reads before it asks a provider (the token and its user, the
//! member's aliases, the quota table, members' own-key lists) or that every page request reads
//! (the browser session and its person), kept in memory between writes. A
//! copy is used while the generation its table's writes move (`storage::changes`) has not moved
//! since it was read, and for a fixed age at most. Writes on other instances move the
//! generation here through the bus ([`share_changes`]); the age bounds what a lost note or a
//! write by the command line (which has no bus) leaves stale.

use std::collections::HashMap;
use std::hash::Hash;
use std::sync::Mutex;
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
}

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
        copies.insert(key, Copy { generation, read_at: Instant::now(), value });
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
}
