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
//!
//! The same call hands this replica a lease of further tokens from each bucket (`lease.rs`),
//! and later requests of the team are admitted from it without a call, as long as the team's
//! version is known from the subscription (`versions.rs`). The call also reads the version of
//! each bucket's team (`switchboard_kit::team_versions`), so that `GET /me` can tell whether
//! the identity it holds is still current without a round trip of its own.

use std::collections::HashMap;
use std::sync::Arc;

use switchboard_kit::redis_client::RedisClient;
use switchboard_kit::team_versions;

use super::bucket::Decision;
use super::lease::{self, Granted, Leases};
use super::versions::VersionWatch;
use crate::combine::Combiner;
use crate::config::RateClass;

/// KEYS a bucket and its team's version key per bucket; ARGV the window (ms), the lease
/// divisor and smallest lease, then a limit, a wanted number of tokens and the largest lease
/// (0: none) per bucket. Answers `{granted, leased, tokens left, reset (ms), team version (0
/// when none)}` per bucket, then the server's `now`.
const SCRIPT: &str = r"
local window = tonumber(ARGV[1])
local divisor = tonumber(ARGV[2])
local smallest = tonumber(ARGV[3])
local clock = redis.call('TIME')
local now = tonumber(clock[1]) * 1000 + math.floor(tonumber(clock[2]) / 1000)
local out = {}
for i = 1, #KEYS / 2 do
  local key = KEYS[2 * i - 1]
  local limit = tonumber(ARGV[3 * i + 1])
  local wanted = tonumber(ARGV[3 * i + 2])
  local most = tonumber(ARGV[3 * i + 3])
  local state = redis.call('HMGET', key, 'tokens', 'reset')
  local tokens = tonumber(state[1])
  local reset = tonumber(state[2])
  local fresh = tokens == nil or reset == nil or now >= reset
  if fresh then
    tokens = limit
    reset = now + window
  end
  if tokens > limit then
    tokens = limit
  end
  local granted = math.min(tokens, wanted)
  tokens = tokens - granted
  local leased = math.min(math.floor(tokens / divisor), most)
  if leased < smallest then
    leased = 0
  end
  tokens = tokens - leased
  redis.call('HSET', key, 'tokens', tokens, 'reset', reset)
  -- HSET keeps a key's expiry: it is set once per window.
  if fresh then
    redis.call('PEXPIREAT', key, reset)
  end
  out[#out + 1] = granted
  out[#out + 1] = leased
  out[#out + 1] = tokens
  out[#out + 1] = reset
  out[#out + 1] = tonumber(redis.call('GET', KEYS[2 * i]) or '0') or 0
end
out[#out + 1] = now
return out
";

/// The most requests one script call serves: it holds Redis for about a microsecond each.
const MOST_PER_CALL: usize = 256;

/// One request's take: its team's bucket of this class, and the bucket's limit.
#[derive(Debug, Clone)]
struct Take {
    team_id: String,
    class: RateClass,
    limit: u32,
}

pub struct RedisBuckets {
    redis: Arc<RedisClient>,
    script: redis::Script,
    combiner: Combiner<(), Take, Option<Decision>>,
    /// Without a subscription to team versions, every request reads its team's version with
    /// its token, and no leases are taken.
    watch: Arc<VersionWatch>,
    leases: Leases,
    window_ms: i64,
}

/// What one bucket gave a batch, before it is shared out among the batch's requests for it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Grant {
    granted: u32,
    leased: u32,
    left: u32,
    reset_at_ms: i64,
    now_ms: i64,
    window_ms: i64,
    team_version: i64,
}

impl Grant {
    /// The decision of the `index`-th request for the bucket: the first `granted` requests get
    /// a token each, in order, numbered above the lease's tokens (which are handed out later).
    fn decision(&self, index: u32, class: RateClass, limit: u32) -> Decision {
        let allowed = index < self.granted;
        let remaining = if allowed { self.left + self.leased + (self.granted - index - 1) } else { 0 };
        Decision {
            class,
            allowed,
            limit,
            remaining,
            reset_at_ms: self.reset_at_ms,
            now_ms: self.now_ms,
            window_ms: self.window_ms,
            team_version: Some(self.team_version),
        }
    }
}

/// What a batch asks of one bucket.
#[derive(Debug, PartialEq, Eq)]
struct BucketTake<'a> {
    team_id: &'a str,
    class: RateClass,
    limit: u32,
    wanted: u32,
    /// The largest lease to take beside the wanted tokens.
    lease: u32,
}

/// A batch of takes grouped by bucket: the buckets in first-seen order with the tokens wanted
/// from each, and for each take its bucket and its place among that bucket's takes.
#[derive(Debug, Default, PartialEq, Eq)]
struct Batch<'a> {
    buckets: Vec<BucketTake<'a>>,
    places: Vec<(usize, u32)>,
}

impl BucketTake<'_> {
    /// The bucket's Redis key.
    fn key(&self) -> String {
        format!("switchboard:ratelimit:{}:{}", self.class.name(), self.team_id)
    }
}

impl<'a> Batch<'a> {
    fn of(takes: &'a [Take]) -> Self {
        let mut batch = Batch::default();
        let mut seen: HashMap<(&str, RateClass), usize> = HashMap::new();
        for take in takes {
            let bucket = *seen.entry((&take.team_id, take.class)).or_insert_with(|| {
                batch.buckets.push(BucketTake {
                    team_id: &take.team_id,
                    class: take.class,
                    limit: take.limit,
                    wanted: 0,
                    lease: 0,
                });
                batch.buckets.len() - 1
            });
            let wanted = &mut batch.buckets[bucket].wanted;
            batch.places.push((bucket, *wanted));
            *wanted += 1;
        }
        batch
    }
}

impl RedisBuckets {
    pub fn new(redis: Arc<RedisClient>, watch: Arc<VersionWatch>, window_ms: i64) -> Self {
        Self {
            redis,
            script: redis::Script::new(SCRIPT),
            combiner: Combiner::new(MOST_PER_CALL),
            watch,
            leases: Leases::default(),
            window_ms,
        }
    }

    /// The shared decision, or `None` when Redis cannot give one in time.
    pub async fn take(&self, team_id: &str, class: RateClass, limit: u32) -> Option<Decision> {
        if let Some(decision) = self.leased_token(team_id, class, limit) {
            return Some(decision);
        }
        if self.redis.skipping() {
            return None;
        }
        let take = Take { team_id: team_id.to_owned(), class, limit };
        // Boxed: once per lease, and inline its future would be part of every request's.
        Box::pin(self.combiner.run(
            (),
            take,
            |takes| self.serve(takes),
            |decisions, index| decisions.get(index).copied().flatten(),
        ))
        .await
    }

    /// Decides a batch of takes that waited while the previous call ran: from the leases that
    /// call may have brought where it can (so that waiting requests do not leave them unused),
    /// the rest with one script call that also takes new leases.
    async fn serve(&self, takes: Vec<Take>) -> Vec<Option<Decision>> {
        let mut decisions: Vec<Option<Decision>> =
            takes.iter().map(|take| self.leased_token(&take.team_id, take.class, take.limit)).collect();
        let pending: Vec<Take> = takes
            .iter()
            .zip(&decisions)
            .filter(|(_, decided)| decided.is_none())
            .map(|(take, _)| take.clone())
            .collect();
        if pending.is_empty() {
            return decisions;
        }
        let mut batch = Batch::of(&pending);
        let generation = self.watch.generation();
        if generation.is_some() {
            for bucket in batch.buckets.iter_mut().filter(|bucket| leases(bucket.class)) {
                if !self.leases.holds(bucket.team_id, bucket.class) {
                    bucket.lease = lease::MOST;
                }
            }
        }
        let Some(grants) = self.call(&batch.buckets).await else {
            return decisions;
        };
        if let Some(generation) = generation {
            for (bucket, grant) in batch.buckets.iter().zip(&grants) {
                self.watch.learned(generation, bucket.team_id, grant.team_version);
                self.leases.keep(bucket.team_id, bucket.class, grant.lease(bucket.limit));
            }
        }
        let mut answers = pending.iter().zip(&batch.places).map(|(take, (bucket, place))| {
            grants.get(*bucket).map(|grant| grant.decision(*place, take.class, take.limit))
        });
        for decision in decisions.iter_mut().filter(|decided| decided.is_none()) {
            *decision = answers.next().flatten();
        }
        decisions
    }

    /// The team's version as the subscription knows it.
    pub fn known_version(&self, team_id: &str) -> Option<i64> {
        self.watch.version(team_id)
    }

    /// A token from this replica's lease, when the team's version is known without a call.
    fn leased_token(&self, team_id: &str, class: RateClass, limit: u32) -> Option<Decision> {
        if !leases(class) {
            return None;
        }
        let version = self.watch.version(team_id)?;
        self.leases.take(team_id, class, limit, version)
    }

    /// One script call for every bucket of a batch.
    async fn call(&self, buckets: &[BucketTake<'_>]) -> Option<Vec<Grant>> {
        let mut invocation = self.script.prepare_invoke();
        invocation.arg(self.window_ms).arg(lease::DIVISOR).arg(lease::SMALLEST);
        for bucket in buckets {
            invocation
                .key(bucket.key())
                .key(team_versions::key(bucket.team_id))
                .arg(bucket.limit)
                .arg(bucket.wanted)
                .arg(bucket.lease);
        }
        let reply: Vec<i64> = self.redis.run(&invocation).await?;
        let Some((&now_ms, answers)) = reply.split_last() else {
            return self.redis.failed("empty script reply");
        };
        if answers.len() != buckets.len() * 5 {
            return self.redis.failed(&format!("script reply of {} values for {} buckets", reply.len(), buckets.len()));
        }
        let count = |value: i64| u32::try_from(value).unwrap_or(0);
        let grants = answers.chunks_exact(5).zip(buckets).map(|(answer, bucket)| Grant {
            granted: count(answer[0]).min(bucket.wanted),
            leased: count(answer[1]).min(bucket.lease),
            left: count(answer[2]),
            reset_at_ms: answer[3],
            now_ms,
            window_ms: self.window_ms,
            team_version: answer[4],
        });
        Some(grants.collect())
    }
}

/// Sign-in and other visitor buckets are per client address, have no team version and low
/// limits: their requests always take their token from Redis.
fn leases(class: RateClass) -> bool {
    class != RateClass::Auth
}

impl Grant {
    /// The lease part of the grant, as this replica keeps it.
    fn lease(&self, limit: u32) -> Granted {
        Granted {
            tokens: self.leased,
            left: self.left,
            limit,
            reset_at_ms: self.reset_at_ms,
            redis_now_ms: self.now_ms,
            window_ms: self.window_ms,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_grant_is_shared_out_in_order() {
        let grant = Grant {
            granted: 2,
            leased: 0,
            left: 0,
            reset_at_ms: 60_000,
            now_ms: 1_000,
            window_ms: 60_000,
            team_version: 7,
        };
        let decisions: Vec<_> = (0..3).map(|i| grant.decision(i, RateClass::Write, 60)).collect();
        assert!(decisions[0].allowed && decisions[1].allowed && !decisions[2].allowed);
        assert_eq!([decisions[0].remaining, decisions[1].remaining, decisions[2].remaining], [1, 0, 0]);
        assert!(decisions.iter().all(|d| d.reset_at_ms == 60_000 && d.limit == 60 && d.team_version == Some(7)));
    }

    #[test]
    fn a_full_grant_leaves_the_rest_to_the_last_request() {
        let grant = Grant {
            granted: 3,
            leased: 0,
            left: 10,
            reset_at_ms: 60_000,
            now_ms: 0,
            window_ms: 60_000,
            team_version: 0,
        };
        let remaining: Vec<_> = (0..3).map(|i| grant.decision(i, RateClass::Standard, 100).remaining).collect();
        assert_eq!(remaining, [12, 11, 10]);
    }

    #[test]
    fn the_requests_of_a_batch_are_numbered_above_the_lease() {
        let grant = Grant {
            granted: 2,
            leased: 4,
            left: 10,
            reset_at_ms: 60_000,
            now_ms: 0,
            window_ms: 60_000,
            team_version: 0,
        };
        let remaining: Vec<_> = (0..2).map(|i| grant.decision(i, RateClass::Standard, 100).remaining).collect();
        assert_eq!(remaining, [15, 14], "the lease holds 13 down to 10");
        let lease = grant.lease(100);
        assert_eq!((lease.tokens, lease.left), (4, 10));
    }

    fn take(team: &str, class: RateClass) -> Take {
        Take { team_id: team.to_owned(), class, limit: 10 }
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
        let buckets: Vec<_> = batch.buckets.iter().map(|bucket| (bucket.key(), bucket.wanted)).collect();
        let expected = [("standard", "a", 3), ("standard", "b", 1), ("write", "a", 1)]
            .map(|(class, team, wanted)| (format!("switchboard:ratelimit:{class}:{team}"), wanted));
        assert_eq!(buckets, expected);
        assert_eq!(batch.places, [(0, 0), (1, 0), (0, 1), (2, 0), (0, 2)]);
    }
}
