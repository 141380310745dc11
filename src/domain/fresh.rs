//! Copies of rows that every call reads before it asks a provider (the quota table, members'
//! own-key lists), kept in memory between writes. A copy is used while the generation its
//! writer moves on every write in this process has not moved since it was read, and for a
//! fixed age at most: how long a write made by another instance takes to count here.

use std::collections::HashMap;
use std::hash::Hash;
use std::sync::Mutex;
use std::time::{Duration, Instant};

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
}
