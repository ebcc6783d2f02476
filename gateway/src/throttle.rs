//! Failed sign-ins: at most 10 per e-mail address and 50 per client address in 15 minutes; past
//! that, sign-in answers 429 with `Retry-After` until the window that began with the first
//! failure ends. The counts live in Redis when there is one, so every gateway replica sees the
//! same; without Redis (or while it does not answer) each process counts its own.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use switchboard_kit::redis_client::RedisClient;
use switchboard_kit::time::now_ms;
use switchboard_kit::{ErrorKind, ServiceError, ServiceResult};

pub const WINDOW_MS: i64 = 15 * 60 * 1000;
pub const PER_EMAIL: i64 = 10;
pub const PER_ADDRESS: i64 = 50;

/// KEYS: the e-mail's counter, the address's. ARGV: the window (ms), and 1 to count a failure
/// or 0 to read. Answers each counter's value and milliseconds left.
const SCRIPT: &str = r"
local out = {}
for i = 1, 2 do
  local key = KEYS[i]
  if ARGV[2] == '1' then
    if redis.call('INCR', key) == 1 then
      redis.call('PEXPIRE', key, ARGV[1])
    end
  end
  out[#out + 1] = tonumber(redis.call('GET', key) or '0')
  out[#out + 1] = redis.call('PTTL', key)
end
return out
";

pub struct SignInThrottle {
    redis: Option<Arc<RedisClient>>,
    script: redis::Script,
    /// By counter key: failures and when the window ends (ms).
    local: Mutex<HashMap<String, (i64, i64)>>,
}

fn keys(email: &str, address: &str) -> [String; 2] {
    use sha2::Digest;
    // Hashed: addresses are not kept in Redis in the clear.
    let email = hex::encode(sha2::Sha256::digest(email.trim().to_lowercase().as_bytes()));
    [format!("switchboard:signin:email:{email}"), format!("switchboard:signin:addr:{address}")]
}

impl SignInThrottle {
    pub fn new(redis: Option<Arc<RedisClient>>) -> Self {
        Self { redis, script: redis::Script::new(SCRIPT), local: Mutex::new(HashMap::new()) }
    }

    /// 429 when the e-mail or the address has failed too often in its window.
    pub async fn check(&self, email: &str, address: &str) -> ServiceResult<()> {
        let [(email_failures, email_left), (address_failures, address_left)] = self.counts(email, address, false).await;
        let mut wait_ms = 0;
        if email_failures >= PER_EMAIL {
            wait_ms = email_left;
        }
        if address_failures >= PER_ADDRESS {
            wait_ms = wait_ms.max(address_left);
        }
        if wait_ms <= 0 {
            return Ok(());
        }
        let mut error = ServiceError::new(ErrorKind::RateLimited, "Too many failed sign-ins; try again later")
            .with_hint("After 10 failures for an e-mail address (50 from one client) in 15 minutes, sign-in waits.");
        error.retry_at_ms = Some(now_ms() + wait_ms);
        Err(error)
    }

    /// Counts a failed sign-in.
    pub async fn failed(&self, email: &str, address: &str) {
        self.counts(email, address, true).await;
    }

    async fn counts(&self, email: &str, address: &str, fail: bool) -> [(i64, i64); 2] {
        let keys = keys(email, address);
        if let Some(redis) = &self.redis {
            let mut invocation = self.script.prepare_invoke();
            invocation.key(&keys[0]).key(&keys[1]).arg(WINDOW_MS).arg(i64::from(fail));
            if let Some(values) = redis.run::<Vec<i64>>(&invocation).await
                && let [email_count, email_left, address_count, address_left] = values[..]
            {
                return [(email_count, email_left), (address_count, address_left)];
            }
        }
        let now = now_ms();
        let mut local = self.local.lock().unwrap_or_else(|e| e.into_inner());
        if local.len() > 100_000 {
            local.retain(|_, (_, ends)| *ends > now);
        }
        keys.map(|key| {
            let entry = local.entry(key).or_insert((0, now + WINDOW_MS));
            if entry.1 <= now {
                *entry = (0, now + WINDOW_MS);
            }
            if fail {
                entry.0 += 1;
            }
            (entry.0, entry.1 - now)
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn the_eleventh_try_for_an_email_waits_and_others_do_not() {
        let throttle = SignInThrottle::new(None);
        for _ in 0..PER_EMAIL {
            throttle.check("Ada@example.com", "10.0.0.1").await.expect("not yet");
            throttle.failed("ada@example.com", "10.0.0.1").await;
        }
        let refused = throttle.check("ada@EXAMPLE.com", "10.0.0.2").await.expect_err("throttled");
        assert_eq!(refused.kind, ErrorKind::RateLimited);
        assert!(refused.retry_at_ms.is_some_and(|at| at > now_ms()));
        throttle.check("grace@example.com", "10.0.0.1").await.expect("another address is not throttled");
    }
}
