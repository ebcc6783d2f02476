//! The in-process limiter: used when no Redis is configured and whenever Redis fails.

use std::collections::HashMap;
use std::sync::Mutex;

use super::bucket::{self, Decision, State};
use crate::config::RateClass;

/// Above this many buckets, expired ones are dropped on the next write.
const SWEEP_ABOVE: usize = 10_000;

#[derive(Default)]
pub struct LocalBuckets {
    buckets: Mutex<HashMap<(String, RateClass), State>>,
}

impl LocalBuckets {
    pub fn take(&self, team_id: &str, class: RateClass, limit: u32, window_ms: i64, now_ms: i64) -> Decision {
        // A poisoned lock only means another request panicked mid-update; the map is
        // still a valid map of buckets.
        let mut buckets = self.buckets.lock().unwrap_or_else(|e| e.into_inner());
        if buckets.len() > SWEEP_ABOVE {
            buckets.retain(|_, state| state.reset_at_ms > now_ms);
        }
        let key = (team_id.to_owned(), class);
        let (state, decision) = bucket::take(buckets.get(&key).copied(), class, limit, window_ms, now_ms);
        buckets.insert(key, state);
        decision
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::WINDOW_MS;

    #[test]
    fn teams_and_classes_have_separate_buckets() {
        let buckets = LocalBuckets::default();
        assert!(buckets.take("a", RateClass::Bulk, 1, WINDOW_MS, 0).allowed);
        assert!(!buckets.take("a", RateClass::Bulk, 1, WINDOW_MS, 1).allowed);
        assert!(buckets.take("b", RateClass::Bulk, 1, WINDOW_MS, 2).allowed);
        assert!(buckets.take("a", RateClass::Write, 1, WINDOW_MS, 3).allowed);
    }
}
