//! Buckets in Redis, shared by every gateway replica. One Lua script reads the server's
//! clock, refills, takes tokens and writes back atomically; gateway clocks never matter.
//! When Redis cannot answer in time ([`RedisClient`]) the in-process limiter answers instead.
//!
//! Requests that arrive while a script call is in flight wait and are then
//! served together by one call ([`Combiner`]) that takes, for each bucket of the batch, as
//! many tokens as the batch has requests for it: under load, the requests of many teams cost
//! Redis one round trip, and no token is ever granted that a one-by-one run would have
//! refused. The script touches several keys at once, so the buckets must live on one Redis
//! node (a single server or a primary with replicas, not a Redis Cluster).

use std::collections::HashMap;
use std::sync::Arc;

use super::bucket::Decision;
use super::{RateClass, WINDOW_MS};
use crate::combine::Combiner;
use crate::redis_client::RedisClient;

/// KEYS the buckets; ARGV the window (ms), then a limit and a wanted number of tokens per
/// bucket. Answers `{granted, tokens left, reset (ms)}` per bucket, then the server's `now`.
const SCRIPT: &str = r"
local window = tonumber(ARGV[1])
local clock = redis.call('TIME')
local now = tonumber(clock[1]) * 1000 + math.floor(tonumber(clock[2]) / 1000)
local out = {}
for i, key in ipairs(KEYS) do
  local limit = tonumber(ARGV[2 * i])
  local wanted = tonumber(ARGV[2 * i + 1])
  local state = redis.call('HMGET', key, 'tokens', 'reset')
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
  redis.call('HSET', key, 'tokens', tokens, 'reset', reset)
  redis.call('PEXPIREAT', key, reset)
  out[#out + 1] = granted
  out[#out + 1] = tokens
  out[#out + 1] = reset
end
out[#out + 1] = now
return out
";

/// The most requests one script call serves: it holds Redis for about a microsecond each.
const MOST_PER_CALL: usize = 256;

/// One request's take: its bucket and the bucket's limit.
#[derive(Debug, Clone)]
struct Take {
    bucket: String,
    class: RateClass,
    limit: u32,
}

pub struct RedisBuckets {
    redis: Arc<RedisClient>,
    script: redis::Script,
    combiner: Combiner<(), Take, Option<Decision>>,
}

/// What one bucket gave a batch, before it is shared out among the batch's requests for it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Grant {
    granted: u32,
    left: u32,
    reset_at_ms: i64,
    now_ms: i64,
}

impl Grant {
    /// The decision of the `index`-th request for the bucket: the first `granted` requests get
    /// a token each, in order, and see what was left after their own.
    fn decision(&self, index: u32, class: RateClass, limit: u32) -> Decision {
        let allowed = index < self.granted;
        let remaining = if allowed { self.left + (self.granted - index - 1) } else { 0 };
        Decision { class, allowed, limit, remaining, reset_at_ms: self.reset_at_ms, now_ms: self.now_ms }
    }
}

/// A batch of takes grouped by bucket: the buckets in first-seen order with the tokens wanted
/// from each, and for each take its bucket and its place among that bucket's takes.
#[derive(Debug, Default, PartialEq, Eq)]
struct Batch {
    buckets: Vec<(String, u32, u32)>,
    places: Vec<(usize, u32)>,
}

impl Batch {
    fn of(takes: &[Take]) -> Self {
        let mut batch = Batch::default();
        let mut seen: HashMap<&str, usize> = HashMap::new();
        for take in takes {
            let bucket = *seen.entry(&take.bucket).or_insert_with(|| {
                batch.buckets.push((take.bucket.clone(), take.limit, 0));
                batch.buckets.len() - 1
            });
            let wanted = &mut batch.buckets[bucket].2;
            batch.places.push((bucket, *wanted));
            *wanted += 1;
        }
        batch
    }
}

impl RedisBuckets {
    pub fn new(redis: Arc<RedisClient>) -> Self {
        Self { redis, script: redis::Script::new(SCRIPT), combiner: Combiner::new(MOST_PER_CALL) }
    }

    /// The shared decision, or `None` when Redis cannot give one in time.
    pub async fn take(&self, team_id: &str, class: RateClass, limit: u32) -> Option<Decision> {
        if self.redis.skipping() {
            return None;
        }
        let take = Take { bucket: format!("switchboard:ratelimit:{}:{team_id}", class.name()), class, limit };
        self.combiner
            .run(
                (),
                take,
                |takes| async move {
                    let batch = Batch::of(&takes);
                    let grants = self.call(&batch.buckets).await;
                    (takes, batch, grants)
                },
                |(takes, batch, grants), index| {
                    let grants = grants.as_ref()?;
                    let (take, (bucket, place)) = (takes.get(index)?, batch.places.get(index)?);
                    Some(grants.get(*bucket)?.decision(*place, take.class, take.limit))
                },
            )
            .await
    }

    /// One script call for every bucket of a batch: `(key, limit, wanted)`.
    async fn call(&self, buckets: &[(String, u32, u32)]) -> Option<Vec<Grant>> {
        let mut invocation = self.script.prepare_invoke();
        invocation.arg(WINDOW_MS);
        for (key, limit, wanted) in buckets {
            invocation.key(key).arg(limit).arg(wanted);
        }
        let reply: Vec<i64> = self.redis.run(&invocation).await?;
        let Some((&now_ms, triples)) = reply.split_last() else {
            return self.redis.failed("empty script reply");
        };
        if triples.len() != buckets.len() * 3 {
            return self.redis.failed(&format!("script reply of {} values for {} buckets", reply.len(), buckets.len()));
        }
        let grants = triples.chunks_exact(3).zip(buckets).map(|(triple, (_, _, wanted))| Grant {
            granted: u32::try_from(triple[0]).unwrap_or(0).min(*wanted),
            left: u32::try_from(triple[1]).unwrap_or(0),
            reset_at_ms: triple[2],
            now_ms,
        });
        Some(grants.collect())
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

    fn take(team: &str, class: RateClass) -> Take {
        Take { bucket: format!("{}:{team}", class.name()), class, limit: 10 }
    }

    #[test]
    fn a_batch_groups_takes_by_bucket_in_arrival_order() {
        let takes = [
            take("a", RateClass::Standard),
            take("b", RateClass::Standard),
            take("a", RateClass::Standard),
            take("a", RateClass::Write),
            take("a", RateClass::Standard),
        ];
        let batch = Batch::of(&takes);
        let buckets: Vec<_> = batch.buckets.iter().map(|(key, _, wanted)| (key.as_str(), *wanted)).collect();
        assert_eq!(buckets, [("standard:a", 3), ("standard:b", 1), ("write:a", 1)]);
        assert_eq!(batch.places, [(0, 0), (1, 0), (0, 1), (2, 0), (0, 2)]);
    }
}
