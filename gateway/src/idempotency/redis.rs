//! Keys in Redis, shared by every gateway replica. A claim is one script call (take the key
//! unless it is taken, else return what holds it); settling compares the claim before it
//! writes, so a claim that expired and was taken again is never overwritten.

use std::sync::atomic::{AtomicI64, Ordering};
use std::time::Duration;

use anyhow::Context;
use redis::aio::{ConnectionManager, ConnectionManagerConfig};
use switchboard_kit::time::now_ms;

use super::{CLAIM_FOR, KEEP_FOR, Record};

/// KEYS[1] the slot; ARGV the claim and how long it holds (ms). Answers nothing when claimed,
/// else the record that holds the slot.
const CLAIM: &str = r"
local held = redis.call('GET', KEYS[1])
if held then
  return held
end
redis.call('SET', KEYS[1], ARGV[1], 'PX', ARGV[2])
return false
";

/// KEYS[1] the slot; ARGV the claim, the record that replaces it ('' to release) and how long
/// that is kept (ms).
const SETTLE: &str = r"
if redis.call('GET', KEYS[1]) ~= ARGV[1] then
  return 0
end
if ARGV[2] == '' then
  redis.call('DEL', KEYS[1])
else
  redis.call('SET', KEYS[1], ARGV[2], 'PX', ARGV[3])
end
return 1
";

/// After a failed call, Redis is left alone this long (the in-process store answers).
const SKIP_AFTER_FAILURE_MS: i64 = 1_000;

pub struct RedisStore {
    connection: ConnectionManager,
    claim: redis::Script,
    settle: redis::Script,
    timeout: Duration,
    skip_until_ms: AtomicI64,
}

impl RedisStore {
    pub fn new(url: &str, timeout: Duration) -> anyhow::Result<Self> {
        let client = redis::Client::open(url).context("parsing REDIS_URL")?;
        let config = ConnectionManagerConfig::new()
            .set_connection_timeout(Some(Duration::from_millis(250)))
            .set_response_timeout(Some(timeout))
            .set_number_of_retries(1);
        let connection =
            ConnectionManager::new_lazy_with_config(client, config).context("creating the Redis connection manager")?;
        Ok(Self {
            connection,
            claim: redis::Script::new(CLAIM),
            settle: redis::Script::new(SETTLE),
            timeout,
            skip_until_ms: AtomicI64::new(0),
        })
    }

    /// `Some(None)` when claimed, `Some(Some(record))` when the slot is held, `None` when
    /// Redis did not answer in time.
    pub async fn claim(&self, slot: &str, running: &Record) -> Option<Option<Record>> {
        if now_ms() < self.skip_until_ms.load(Ordering::Relaxed) {
            return None;
        }
        let value = serde_json::to_string(running).ok()?;
        let mut invocation = self.claim.key(slot);
        invocation.arg(value).arg(millis(CLAIM_FOR));
        let mut connection = self.connection.clone();
        let held = self.answer(invocation.invoke_async::<Option<String>>(&mut connection)).await?;
        match held.map(|held| serde_json::from_str::<Record>(&held)).transpose() {
            Ok(record) => Some(record),
            Err(error) => {
                // Not ours to judge: a record this version cannot read is treated as held.
                tracing::warn!(%error, slot, "an idempotency record could not be read");
                Some(Some(Record::Running { fingerprint: String::new(), token: String::new() }))
            }
        }
    }

    pub async fn settle(&self, slot: &str, running: &Record, done: Option<&Record>) {
        let (Ok(running), Ok(done)) = (
            serde_json::to_string(running),
            done.map(serde_json::to_string).transpose().map(Option::unwrap_or_default),
        ) else {
            return;
        };
        let mut invocation = self.settle.key(slot);
        invocation.arg(running).arg(done).arg(millis(KEEP_FOR));
        let mut connection = self.connection.clone();
        // A claim that cannot be settled expires after CLAIM_FOR.
        let _ = self.answer(invocation.invoke_async::<i64>(&mut connection)).await;
    }

    async fn answer<T>(&self, call: impl Future<Output = redis::RedisResult<T>>) -> Option<T> {
        let span = switchboard_kit::telemetry::redis_span("EVALSHA");
        match tokio::time::timeout(self.timeout, tracing::Instrument::instrument(call, span)).await {
            Ok(Ok(value)) => Some(value),
            Ok(Err(error)) => self.failed(&error.to_string()),
            Err(_) => self.failed(&format!("no answer within {:?}", self.timeout)),
        }
    }

    fn failed<T>(&self, reason: &str) -> Option<T> {
        self.skip_until_ms.store(now_ms() + SKIP_AFTER_FAILURE_MS, Ordering::Relaxed);
        tracing::warn!(%reason, "Redis unavailable for idempotency keys; keeping them in process");
        None
    }
}

fn millis(duration: Duration) -> u64 {
    u64::try_from(duration.as_millis()).unwrap_or(u64::MAX)
}
