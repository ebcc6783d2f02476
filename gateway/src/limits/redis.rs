//! Buckets in Redis, shared by every gateway replica. One Lua script reads the server's
//! clock, refills, takes tokens and writes back atomically; gateway clocks never matter.
//! A call that errors or takes longer than the configured timeout (50 ms by default) is
//! answered by the in-process limiter instead, and Redis is skipped for a second before it
//! is tried again, so an outage costs one timeout a second, not one per request.
//!
//! Requests for one bucket that arrive while a script call for it is in flight wait and
//! are then served together by one call that asks for as many tokens as there are
//! requests (see [`Combiner`]): under load a busy team costs Redis one round trip per batch
//! instead of one per request, and no token is ever granted that a one-by-one run would
//! have refused.

use std::collections::{HashMap, VecDeque};
use std::sync::atomic::{AtomicBool, AtomicI64, Ordering};
use std::time::Duration;

use anyhow::Context;
use parking_lot::Mutex;
use redis::aio::{ConnectionManager, ConnectionManagerConfig};
use switchboard_kit::time::now_ms;
use tokio::sync::oneshot;

use super::bucket::Decision;
use super::{RateClass, WINDOW_MS};

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
    combiner: Combiner,
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

/// What a waiting request is told when the call it waited for ends.
enum Turn {
    /// Served: its decision, or `None` when Redis could not decide.
    Done(Option<Decision>),
    /// The previous batch is done and this request is first in line: it makes the next call.
    Lead,
}

/// Flat combining per bucket: the first request for an idle bucket leads a batch (itself
/// plus everyone queued by the time it starts); later ones queue until that batch ends and
/// the first of them leads the next.
#[derive(Default)]
struct Combiner {
    queues: Mutex<HashMap<String, VecDeque<oneshot::Sender<Turn>>>>,
}

/// Hands a bucket to the first live request queued for it, or marks it idle.
struct Handover<'a> {
    queues: &'a Mutex<HashMap<String, VecDeque<oneshot::Sender<Turn>>>>,
    key: &'a str,
}

impl Drop for Handover<'_> {
    fn drop(&mut self) {
        let mut queues = self.queues.lock();
        while let Some(queue) = queues.get_mut(self.key) {
            let Some(next) = queue.pop_front() else {
                queues.remove(self.key);
                return;
            };
            // A request whose client went away cannot lead; the one after it can.
            if next.send(Turn::Lead).is_ok() {
                return;
            }
        }
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
        let (sender, receiver) = oneshot::channel();
        let leads = {
            let mut queues = self.combiner.queues.lock();
            match queues.get_mut(&key) {
                Some(queue) => {
                    queue.push_back(sender);
                    false
                }
                None => {
                    queues.insert(key.clone(), VecDeque::new());
                    true
                }
            }
        };
        if !leads {
            match receiver.await {
                Ok(Turn::Done(decision)) => return decision,
                Ok(Turn::Lead) => {}
                // The leader's future was dropped (its client went away) before it handed
                // over; its batch is lost, so this request asks on its own.
                Err(_) => return self.call(&key, limit, 1).await.map(|grant| grant.decision(0, class, limit)),
            }
        }
        self.lead(&key, class, limit).await
    }

    /// Takes this request's token and those of everyone queued behind it in one call and
    /// shares the grant out; the bucket passes to the next request in line when this ends,
    /// even if this request's future is dropped half-way.
    async fn lead(&self, key: &str, class: RateClass, limit: u32) -> Option<Decision> {
        let _handover = Handover { queues: &self.combiner.queues, key };
        let followers = self.combiner.queues.lock().get_mut(key).map(std::mem::take).unwrap_or_default();
        let wanted = u32::try_from(followers.len() + 1).unwrap_or(u32::MAX);
        let grant = self.call(key, limit, wanted).await;
        for (index, follower) in (1..).zip(followers) {
            let _ = follower.send(Turn::Done(grant.map(|grant| grant.decision(index, class, limit))));
        }
        grant.map(|grant| grant.decision(0, class, limit))
    }

    /// One script call for `wanted` tokens.
    async fn call(&self, key: &str, limit: u32, wanted: u32) -> Option<Grant> {
        let mut connection = self.connection.clone();
        let mut invocation = self.script.key(key);
        invocation.arg(limit).arg(WINDOW_MS).arg(wanted);
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
