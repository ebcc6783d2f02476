//! A per-key budget of units a window (a team's passages a minute for the encoder): a take of
//! `n` units is granted whole or not at all, and the budget is full again one window after the
//! first take of the window, as the gateway's rate-limit buckets are.
//!
//! With Redis every replica counts in one key per team (one script on Redis's clock); without
//! it, and for a second after Redis failed or was late ([`RedisClient`]), each process counts
//! alone, so that an outage of Redis never stops the work it meters.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use crate::redis_client::RedisClient;
use crate::time::now_ms;

/// KEYS[1]: the key's counter. ARGV: the budget, the window in ms, the units asked.
/// Returns `{granted (0|1), ms until the budget is full again, units used in the window}`.
const TAKE: &str = r"
local used = tonumber(redis.call('GET', KEYS[1]) or '0')
local asked = tonumber(ARGV[3])
if used + asked > tonumber(ARGV[1]) then
  local ttl = redis.call('PTTL', KEYS[1])
  if ttl < 0 then ttl = tonumber(ARGV[2]) end
  return {0, ttl, used}
end
local after = redis.call('INCRBY', KEYS[1], asked)
local ttl = redis.call('PTTL', KEYS[1])
if ttl < 0 then
  redis.call('PEXPIRE', KEYS[1], ARGV[2])
  ttl = tonumber(ARGV[2])
end
return {1, ttl, after}
";

/// Above this many counters, expired ones are dropped on the next take.
const SWEEP_ABOVE: usize = 10_000;

/// What a take found.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Take {
    pub granted: bool,
    /// Units used in the window, this take's included when granted.
    pub used: i64,
    /// When the budget is full again (ms since the epoch).
    pub reset_at_ms: i64,
}

pub struct WindowBudget {
    /// The Redis key of `id` is `{prefix}:{id}`.
    prefix: &'static str,
    limit: i64,
    window_ms: i64,
    redis: Option<Arc<RedisClient>>,
    script: redis::Script,
    /// `id` to (units used, window end in ms).
    local: Mutex<HashMap<String, (i64, i64)>>,
}

impl WindowBudget {
    pub fn new(prefix: &'static str, limit: i64, window_ms: i64, redis: Option<Arc<RedisClient>>) -> Self {
        Self {
            prefix,
            limit,
            window_ms: window_ms.max(1),
            redis,
            script: redis::Script::new(TAKE),
            local: Mutex::new(HashMap::new()),
        }
    }

    pub fn limit(&self) -> i64 {
        self.limit
    }

    /// The Redis key counting `id`'s units.
    pub fn key(&self, id: &str) -> String {
        format!("{}:{id}", self.prefix)
    }

    /// Takes `units` of `id`'s budget if they are all left.
    pub async fn take(&self, id: &str, units: i64) -> Take {
        if let Some(redis) = &self.redis {
            let mut invocation = self.script.prepare_invoke();
            invocation.key(self.key(id)).arg(self.limit).arg(self.window_ms).arg(units);
            match redis.run::<Vec<i64>>(&invocation).await.as_deref() {
                Some(&[granted, ttl_ms, used]) => {
                    return Take { granted: granted == 1, used, reset_at_ms: now_ms() + ttl_ms.max(0) };
                }
                // The client already logged a failure; an answer of another shape is one too.
                Some(_) => {
                    let _: Option<()> = redis.failed("the budget script answered an unexpected shape");
                }
                None => {}
            }
        }
        self.take_locally(id, units, now_ms())
    }

    fn take_locally(&self, id: &str, units: i64, now: i64) -> Take {
        // A poisoned lock only means another take panicked mid-update; the map is still valid.
        let mut counters = self.local.lock().unwrap_or_else(|e| e.into_inner());
        if counters.len() > SWEEP_ABOVE {
            counters.retain(|_, (_, reset_at)| *reset_at > now);
        }
        let (used, reset_at_ms) = match counters.get(id) {
            Some(&(used, reset_at)) if reset_at > now => (used, reset_at),
            _ => (0, now + self.window_ms),
        };
        if used.saturating_add(units) > self.limit {
            return Take { granted: false, used, reset_at_ms };
        }
        let used = used + units;
        counters.insert(id.to_owned(), (used, reset_at_ms));
        Take { granted: true, used, reset_at_ms }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn takes_are_whole_per_key_and_the_window_refills_the_budget() {
        let budget = WindowBudget::new("test", 10, 60_000, None);
        assert_eq!(budget.take_locally("a", 6, 0), Take { granted: true, used: 6, reset_at_ms: 60_000 });
        assert_eq!(budget.take_locally("a", 5, 1), Take { granted: false, used: 6, reset_at_ms: 60_000 });
        assert!(budget.take_locally("b", 10, 2).granted, "another key has its own budget");
        assert_eq!(budget.take_locally("a", 4, 3), Take { granted: true, used: 10, reset_at_ms: 60_000 });
        assert!(!budget.take_locally("a", 1, 59_999).granted);
        assert_eq!(budget.take_locally("a", 1, 60_000), Take { granted: true, used: 1, reset_at_ms: 120_000 });
        assert!(!budget.take_locally("c", 11, 0).granted, "more than the budget is never granted");
    }
}
