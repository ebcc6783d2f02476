//! A small map whose entries expire: authenticated keys and resolved subteams are trusted
//! for a couple of seconds, which keeps the identity service off the hot path while a
//! revoked key still stops working almost at once.

use std::collections::HashMap;
use std::hash::Hash;
use std::sync::RwLock;
use std::time::{Duration, Instant};

/// The longest an answer kept by its team's version (`switchboard_kit::team_versions`) is
/// trusted while the version holds: every change the platform makes announces a new version,
/// and this bounds what a change that could not be announced (the identity service cut off
/// from Redis) leaves stale.
pub const VERSIONED_TTL: Duration = Duration::from_secs(30);

/// How long to keep answers that are trusted for `ttl` as they are and, beyond it, while
/// their team's version holds; a zero `ttl` keeps nothing.
pub fn versioned_ttl(ttl: Duration) -> Duration {
    if ttl.is_zero() { ttl } else { VERSIONED_TTL.max(ttl) }
}

pub struct TtlCache<K, V> {
    entries: RwLock<HashMap<K, (Instant, V)>>,
    ttl: Duration,
    capacity: usize,
}

impl<K: Eq + Hash, V: Clone> TtlCache<K, V> {
    pub fn new(ttl: Duration, capacity: usize) -> Self {
        Self { entries: RwLock::new(HashMap::new()), ttl, capacity }
    }

    pub fn get<Q: Eq + Hash + ?Sized>(&self, key: &Q) -> Option<V>
    where
        K: std::borrow::Borrow<Q>,
    {
        let entries = self.entries.read().unwrap_or_else(|e| e.into_inner());
        entries.get(key).filter(|(stored, _)| stored.elapsed() < self.ttl).map(|(_, value)| value.clone())
    }

    pub fn insert(&self, key: K, value: V) {
        if self.ttl.is_zero() {
            return;
        }
        let mut entries = self.entries.write().unwrap_or_else(|e| e.into_inner());
        if entries.len() >= self.capacity {
            entries.retain(|_, (stored, _)| stored.elapsed() < self.ttl);
            if entries.len() >= self.capacity {
                entries.clear();
            }
        }
        entries.insert(key, (Instant::now(), value));
    }

    /// Forgets an entry before it expires (a session this process ended).
    pub fn remove<Q: Eq + Hash + ?Sized>(&self, key: &Q)
    where
        K: std::borrow::Borrow<Q>,
    {
        self.entries.write().unwrap_or_else(|e| e.into_inner()).remove(key);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn entries_expire() {
        let cache = TtlCache::new(Duration::from_millis(20), 10);
        cache.insert("a", 1);
        assert_eq!(cache.get(&"a"), Some(1));
        std::thread::sleep(Duration::from_millis(30));
        assert_eq!(cache.get(&"a"), None);
    }

    #[test]
    fn capacity_is_bounded() {
        let cache = TtlCache::new(Duration::from_secs(60), 3);
        for i in 0..10 {
            cache.insert(i, i);
        }
        assert!(cache.entries.read().unwrap().len() <= 3);
    }
}
