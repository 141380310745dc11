//! Per-member counters for what one person may hold at once (live streams, uploads), so that
//! no member can starve the others (SECURITY.md 54). In memory, per instance.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use uuid::Uuid;

/// How many of one kind of thing each member holds now. Cheap to clone; clones share counts.
#[derive(Clone, Default)]
pub struct MemberSlots {
    held: Arc<Mutex<HashMap<Uuid, usize>>>,
}

/// One taken slot; dropping it gives the slot back.
pub struct Slot {
    slots: MemberSlots,
    member: Uuid,
}

impl MemberSlots {
    /// Takes a slot for `member` unless they already hold `max`.
    pub fn try_take(&self, member: Uuid, max: usize) -> Option<Slot> {
        let mut held = self.held.lock().unwrap_or_else(|p| p.into_inner());
        let count = held.entry(member).or_insert(0);
        if *count >= max {
            return None;
        }
        *count += 1;
        Some(Slot { slots: self.clone(), member })
    }

    /// How many slots all members hold now.
    pub fn total(&self) -> usize {
        self.held.lock().unwrap_or_else(|p| p.into_inner()).values().sum()
    }

    /// How many slots `member` holds now.
    pub fn held(&self, member: Uuid) -> usize {
        self.held.lock().unwrap_or_else(|p| p.into_inner()).get(&member).copied().unwrap_or(0)
    }
}

impl Drop for Slot {
    fn drop(&mut self) {
        let mut held = self.slots.held.lock().unwrap_or_else(|p| p.into_inner());
        if let Some(count) = held.get_mut(&self.member) {
            *count = count.saturating_sub(1);
            if *count == 0 {
                held.remove(&self.member);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn slots_are_per_member_and_come_back_when_dropped() {
        let slots = MemberSlots::default();
        let (a, b) = (Uuid::now_v7(), Uuid::now_v7());
        let first = slots.try_take(a, 2).unwrap();
        let _second = slots.try_take(a, 2).unwrap();
        assert!(slots.try_take(a, 2).is_none(), "a third is refused");
        assert!(slots.try_take(b, 2).is_some(), "another member is not affected");
        drop(first);
        assert_eq!(slots.held(a), 1);
        assert!(slots.try_take(a, 2).is_some());
    }
}
