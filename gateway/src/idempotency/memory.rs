//! Keys in this process: when no Redis is configured, or while it does not answer.

use std::collections::HashMap;
use std::time::Instant;

use parking_lot::Mutex;

use super::{CLAIM_FOR, KEEP_FOR, Record};

/// Expired records are swept when the map has grown by this many since the last sweep.
const SWEEP_EVERY: usize = 1024;

#[derive(Default)]
pub struct MemoryStore {
    records: Mutex<Records>,
}

#[derive(Default)]
struct Records {
    by_slot: HashMap<String, (Record, Instant)>,
    size_after_sweep: usize,
}

impl Records {
    fn sweep(&mut self, now: Instant) {
        if self.by_slot.len() >= self.size_after_sweep + SWEEP_EVERY {
            self.by_slot.retain(|_, (_, expires)| *expires > now);
            self.size_after_sweep = self.by_slot.len();
        }
    }
}

impl MemoryStore {
    /// Stores `running` unless the slot holds a live record, which is returned instead.
    pub fn claim(&self, slot: &str, running: &Record) -> Option<Record> {
        let now = Instant::now();
        let mut records = self.records.lock();
        records.sweep(now);
        if let Some((record, expires)) = records.by_slot.get(slot)
            && *expires > now
        {
            return Some(record.clone());
        }
        records.by_slot.insert(slot.to_owned(), (running.clone(), now + CLAIM_FOR));
        None
    }

    /// Replaces the claim `running` by `done`, or removes it; a slot claimed anew since (after
    /// the claim expired) is left alone.
    pub fn settle(&self, slot: &str, running: &Record, done: Option<Record>) {
        let mut records = self.records.lock();
        if records.by_slot.get(slot).is_none_or(|(record, _)| record != running) {
            return;
        }
        match done {
            Some(done) => {
                records.by_slot.insert(slot.to_owned(), (done, Instant::now() + KEEP_FOR));
            }
            None => {
                records.by_slot.remove(slot);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::idempotency::Kept;

    fn running(token: &str) -> Record {
        Record::Running { fingerprint: "f".into(), token: token.into() }
    }

    #[test]
    fn the_first_claim_wins_and_a_settled_one_is_found() {
        let store = MemoryStore::default();
        assert_eq!(store.claim("s", &running("a")), None);
        assert_eq!(store.claim("s", &running("b")), Some(running("a")));
        let kept = Kept::created_for_tests();
        let done = Record::Done { fingerprint: "f".into(), kept };
        // Another claim's settlement changes nothing.
        store.settle("s", &running("b"), None);
        assert_eq!(store.claim("s", &running("c")), Some(running("a")));
        store.settle("s", &running("a"), Some(done.clone()));
        assert_eq!(store.claim("s", &running("c")), Some(done));
    }

    #[test]
    fn a_released_claim_frees_the_key() {
        let store = MemoryStore::default();
        assert_eq!(store.claim("s", &running("a")), None);
        store.settle("s", &running("a"), None);
        assert_eq!(store.claim("s", &running("b")), None);
    }
}
