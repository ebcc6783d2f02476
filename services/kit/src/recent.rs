//! What a service found in another one recently (a team, an agent), trusted for a while so
//! that bursts of calls about the same thing do not each cost a lookup.

use std::collections::HashMap;
use std::hash::Hash;
use std::time::{Duration, Instant};

use tokio::sync::Mutex;

/// Keys seen within `ttl`, at most `capacity` of them (older ones go first when full; if all
/// are fresh, all go).
pub struct Recent<K> {
    seen: Mutex<HashMap<K, Instant>>,
    ttl: Duration,
    capacity: usize,
}

impl<K: Hash + Eq> Recent<K> {
    pub fn new(ttl: Duration, capacity: usize) -> Self {
        Self { seen: Mutex::default(), ttl, capacity }
    }

    /// Whether `key` was remembered less than the time to live ago.
    pub async fn contains(&self, key: &K) -> bool {
        self.seen.lock().await.get(key).is_some_and(|at| at.elapsed() < self.ttl)
    }

    pub async fn remember(&self, key: K) {
        let mut seen = self.seen.lock().await;
        if seen.len() >= self.capacity {
            seen.retain(|_, at| at.elapsed() < self.ttl);
            if seen.len() >= self.capacity {
                seen.clear();
            }
        }
        seen.insert(key, Instant::now());
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn keys_are_known_until_they_expire_and_the_map_stays_bounded() {
        let recent = Recent::new(Duration::from_millis(50), 2);
        recent.remember("a").await;
        assert!(recent.contains(&"a").await);
        assert!(!recent.contains(&"b").await);
        recent.remember("b").await;
        recent.remember("c").await;
        assert!(recent.seen.lock().await.len() <= 2);
        tokio::time::sleep(Duration::from_millis(60)).await;
        assert!(!recent.contains(&"c").await);
    }
}
