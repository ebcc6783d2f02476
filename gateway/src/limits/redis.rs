//! Buckets in Redis, shared by every gateway replica. One Lua script reads the server's
//! clock, refills, takes tokens and writes back atomically; gateway clocks never matter.
//! When Redis cannot answer in time ([`RedisClient`]) the in-process limiter answers instead.
//!
//! Requests for one bucket that arrive while a script call for it is in flight wait and
//! are then served together by one call that asks for as many tokens as there are
//! requests ([`Combiner`]): under load a busy team costs Redis one round trip per batch
//! instead of one per request, and no token is ever granted that a one-by-one run would
//! have refused.

use std::sync::Arc;

use super::bucket::Decision;
use super::{RateClass, WINDOW_MS};
use crate::combine::Combiner;
use crate::redis_client::RedisClient;

/// KEYS[1] the bucket; ARGV limit, window (ms), requested tokens. Answers
/// `{granted, tokens left, reset (ms), now (ms)}`.
const SCRIPT: &str = r"
local limit = tonumber(ARGV[1])
local window = tonumber(ARGV[2])
local wanted = tonumber(ARGV[3])
local clock = redis.call('TIME')
local now = tonumber(clock[1]) * 1000 + math.floor(tonumber(clock[2]) / 1000)
local state = redis.call('HMGET', KEYS[1], 'tokens', 'reset')
local tokens = tonumber(state[1])
local reset = tonumber(state[2])
if tokens == nil or reset == nil or now >= reset then
  tokens = limit
  reset = now + window
end
if tokens > limit then
  tokens = limit
end
local granted = math.min(tokens, wanted)
tokens = tokens - granted
redis.call('HSET', KEYS[1], 'tokens', tokens, 'reset', reset)
redis.call('PEXPIREAT', KEYS[1], reset)
return {granted, tokens, reset, now}
";

pub struct RedisBuckets {
    redis: Arc<RedisClient>,
    script: redis::Script,
    /// Batches the requests of one bucket into one script call.
    combiner: Combiner<String, Option<Decision>>,
}

/// The outcome of one script call, before it is shared out among the requests it served.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Grant {
    granted: u32,
    left: u32,
    reset_at_ms: i64,
    now_ms: i64,
}

impl Grant {
    /// The decision of the `index`-th request of the batch: the first `granted` requests get
    /// a token each, in order, and see what was left after their own.
    fn decision(&self, index: u32, class: RateClass, limit: u32) -> Decision {
        let allowed = index < self.granted;
        let remaining = if allowed { self.left + (self.granted - index - 1) } else { 0 };
        Decision { class, allowed, limit, remaining, reset_at_ms: self.reset_at_ms, now_ms: self.now_ms }
    }
}

impl RedisBuckets {
    pub fn new(redis: Arc<RedisClient>) -> Self {
        Self { redis, script: redis::Script::new(SCRIPT), combiner: Combiner::default() }
    }

    /// The shared decision, or `None` when Redis cannot give one in time.
    pub async fn take(&self, team_id: &str, class: RateClass, limit: u32) -> Option<Decision> {
        if self.redis.skipping() {
            return None;
        }
        let key = format!("switchboard:ratelimit:{}:{team_id}", class.name());
        self.combiner
            .run(
                key.clone(),
                |wanted| self.call(&key, limit, u32::try_from(wanted).unwrap_or(u32::MAX)),
                |grant, index| {
                    grant.map(|grant| grant.decision(u32::try_from(index).unwrap_or(u32::MAX), class, limit))
                },
            )
            .await
    }

    /// One script call for `wanted` tokens.
    async fn call(&self, key: &str, limit: u32, wanted: u32) -> Option<Grant> {
        let mut invocation = self.script.key(key);
        invocation.arg(limit).arg(WINDOW_MS).arg(wanted);
        let reply: Vec<i64> = self.redis.run(&invocation).await?;
        let [granted, left, reset_at_ms, now_ms] = reply[..] else {
            return self.redis.failed(&format!("unexpected script reply {reply:?}"));
        };
        Some(Grant {
            granted: u32::try_from(granted).unwrap_or(0).min(wanted),
            left: u32::try_from(left).unwrap_or(0),
            reset_at_ms,
            now_ms,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_grant_is_shared_out_in_order() {
        let grant = Grant { granted: 2, left: 0, reset_at_ms: 60_000, now_ms: 1_000 };
        let decisions: Vec<_> = (0..3).map(|i| grant.decision(i, RateClass::Write, 60)).collect();
        assert!(decisions[0].allowed && decisions[1].allowed && !decisions[2].allowed);
        assert_eq!([decisions[0].remaining, decisions[1].remaining, decisions[2].remaining], [1, 0, 0]);
        assert!(decisions.iter().all(|d| d.reset_at_ms == 60_000 && d.limit == 60));
    }

    #[test]
    fn a_full_grant_leaves_the_rest_to_the_last_request() {
        let grant = Grant { granted: 3, left: 10, reset_at_ms: 60_000, now_ms: 0 };
        let remaining: Vec<_> = (0..3).map(|i| grant.decision(i, RateClass::Standard, 100).remaining).collect();
        assert_eq!(remaining, [12, 11, 10]);
    }
}
