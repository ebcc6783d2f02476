//! Keys in Redis, shared by every gateway replica. A claim is one script call (take the key
//! unless it is taken, else return what holds it); settling compares the claim before it
//! writes, so a claim that expired and was taken again is never overwritten. When Redis cannot
//! answer in time ([`RedisClient`]) the keys are kept in process.

use std::sync::Arc;
use std::time::Duration;

use switchboard_kit::redis_client::RedisClient;

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

pub struct RedisStore {
    redis: Arc<RedisClient>,
    claim: redis::Script,
    settle: redis::Script,
}

impl RedisStore {
    pub fn new(redis: Arc<RedisClient>) -> Self {
        Self { redis, claim: redis::Script::new(CLAIM), settle: redis::Script::new(SETTLE) }
    }

    /// `Some(None)` when claimed, `Some(Some(record))` when the slot is held, `None` when
    /// Redis did not answer in time.
    pub async fn claim(&self, slot: &str, running: &Record) -> Option<Option<Record>> {
        let value = serde_json::to_string(running).ok()?;
        let mut invocation = self.claim.key(slot);
        invocation.arg(value).arg(millis(CLAIM_FOR));
        let held: Option<String> = self.redis.run(&invocation).await?;
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
        // A claim that cannot be settled expires after CLAIM_FOR.
        let _: Option<i64> = self.redis.run(&invocation).await;
    }
}

fn millis(duration: Duration) -> u64 {
    u64::try_from(duration.as_millis()).unwrap_or(u64::MAX)
}
