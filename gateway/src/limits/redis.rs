//! Buckets in Redis, shared by every gateway replica. One Lua script reads the server's
//! clock, refills, takes tokens and writes back atomically; gateway clocks never matter.
//! A call that errors or takes longer than the configured timeout (50 ms by default) is
//! answered by the in-process limiter instead, and Redis is skipped for a second before it
//! is tried again, so an outage costs one timeout a second, not one per request.
//!
//! Requests for one bucket that arrive while a script call for it is in flight wait and
//! are then served together by one call that asks for as many tokens as there are
//! requests ([`Combiner`]): under load a busy team costs Redis one round trip per batch
//! instead of one per request, and no token is ever granted that a one-by-one run would
//! have refused.

use std::sync::atomic::{AtomicBool, AtomicI64, Ordering};
use std::time::Duration;

use anyhow::Context;
use redis::aio::{ConnectionManager, ConnectionManagerConfig};
use switchboard_kit::time::now_ms;

use super::bucket::Decision;
use super::{RateClass, WINDOW_MS};
use crate::combine::Combiner;

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

const SKIP_AFTER_FAILURE_MS: i64 = 1_000;

pub struct RedisBuckets {
    connection: ConnectionManager,
    script: redis::Script,
    timeout: Duration,
    skip_until_ms: AtomicI64,
    failing: AtomicBool,
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
    /// Connects lazily: a Redis that is down at start is tried again on later requests.
    pub fn new(url: &str, timeout: Duration) -> anyhow::Result<Self> {
        let client = redis::Client::open(url).context("parsing REDIS_URL")?;
        let config = ConnectionManagerConfig::new()
            .set_connection_timeout(Some(Duration::from_millis(250)))
            .set_response_timeout(Some(timeout))
            .set_number_of_retries(1)
            .set_min_delay(Duration::from_millis(50))
            .set_max_delay(Duration::from_millis(500));
        let connection =
            ConnectionManager::new_lazy_with_config(client, config).context("creating the Redis connection manager")?;
        Ok(Self {
            connection,
            script: redis::Script::new(SCRIPT),
            timeout,
            skip_until_ms: AtomicI64::new(0),
            failing: AtomicBool::new(false),
            combiner: Combiner::default(),
        })
    }

    /// The shared decision, or `None` when Redis cannot give one in time.
    pub async fn take(&self, team_id: &str, class: RateClass, limit: u32) -> Option<Decision> {
        if now_ms() < self.skip_until_ms.load(Ordering::Relaxed) {
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
        let mut connection = self.connection.clone();
        let mut invocation = self.script.key(key);
        invocation.arg(limit).arg(WINDOW_MS).arg(wanted);
        let script = invocation.invoke_async::<Vec<i64>>(&mut connection);
        let span = switchboard_kit::telemetry::redis_span("EVALSHA");
        let outcome = tokio::time::timeout(self.timeout, tracing::Instrument::instrument(script, span)).await;
        let reply = match outcome {
            Ok(Ok(reply)) if reply.len() == 4 => reply,
            Ok(Ok(reply)) => return self.failed(format!("unexpected script reply {reply:?}")),
            Ok(Err(error)) => return self.failed(error.to_string()),
            Err(_) => return self.failed(format!("no answer within {:?}", self.timeout)),
        };
        if self.failing.swap(false, Ordering::Relaxed) {
            tracing::info!("Redis answers again; rate limits are shared across replicas again");
        }
        Some(Grant {
            granted: u32::try_from(reply[0]).unwrap_or(0).min(wanted),
            left: u32::try_from(reply[1]).unwrap_or(0),
            reset_at_ms: reply[2],
            now_ms: reply[3],
        })
    }

    fn failed<T>(&self, reason: String) -> Option<T> {
        self.skip_until_ms.store(now_ms() + SKIP_AFTER_FAILURE_MS, Ordering::Relaxed);
        if !self.failing.swap(true, Ordering::Relaxed) {
            tracing::warn!(%reason, "Redis rate limiter unavailable; using the in-process limiter");
        }
        None
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
