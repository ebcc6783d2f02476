//! Buckets in Redis, shared by every gateway replica. One Lua script reads the server's
//! clock, refills, takes a token and writes back atomically; gateway clocks never matter.
//! A call that errors or takes longer than the configured timeout (50 ms by default) is
//! answered by the in-process limiter instead, and Redis is skipped for a second before it
//! is tried again, so an outage costs one timeout a second, not one per request.

use std::sync::atomic::{AtomicBool, AtomicI64, Ordering};
use std::time::Duration;

use anyhow::Context;
use redis::aio::{ConnectionManager, ConnectionManagerConfig};
use switchboard_kit::time::now_ms;

use super::bucket::Decision;
use super::{RateClass, WINDOW_MS};

const SCRIPT: &str = r"
local limit = tonumber(ARGV[1])
local window = tonumber(ARGV[2])
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
local allowed = 0
if tokens > 0 then
  tokens = tokens - 1
  allowed = 1
end
redis.call('HSET', KEYS[1], 'tokens', tokens, 'reset', reset)
redis.call('PEXPIREAT', KEYS[1], reset)
return {allowed, tokens, reset, now}
";

const SKIP_AFTER_FAILURE_MS: i64 = 1_000;

pub struct RedisBuckets {
    connection: ConnectionManager,
    script: redis::Script,
    timeout: Duration,
    skip_until_ms: AtomicI64,
    failing: AtomicBool,
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
        })
    }

    /// The shared decision, or `None` when Redis cannot give one in time.
    pub async fn take(&self, team_id: &str, class: RateClass, limit: u32) -> Option<Decision> {
        if now_ms() < self.skip_until_ms.load(Ordering::Relaxed) {
            return None;
        }
        let key = format!("switchboard:ratelimit:{}:{team_id}", class.name());
        let mut connection = self.connection.clone();
        let mut invocation = self.script.key(key);
        invocation.arg(limit).arg(WINDOW_MS);
        let outcome = tokio::time::timeout(self.timeout, invocation.invoke_async::<Vec<i64>>(&mut connection)).await;
        let reply = match outcome {
            Ok(Ok(reply)) if reply.len() == 4 => reply,
            Ok(Ok(reply)) => return self.failed(format!("unexpected script reply {reply:?}")),
            Ok(Err(error)) => return self.failed(error.to_string()),
            Err(_) => return self.failed(format!("no answer within {:?}", self.timeout)),
        };
        if self.failing.swap(false, Ordering::Relaxed) {
            tracing::info!("Redis answers again; rate limits are shared across replicas again");
        }
        Some(Decision {
            class,
            allowed: reply[0] == 1,
            limit,
            remaining: u32::try_from(reply[1]).unwrap_or(0),
            reset_at_ms: reply[2],
            now_ms: reply[3],
        })
    }

    fn failed(&self, reason: String) -> Option<Decision> {
        self.skip_until_ms.store(now_ms() + SKIP_AFTER_FAILURE_MS, Ordering::Relaxed);
        if !self.failing.swap(true, Ordering::Relaxed) {
            tracing::warn!(%reason, "Redis rate limiter unavailable; using the in-process limiter");
        }
        None
    }
}
