//! The platform's one Redis, shared by every replica: the gateway's rate-limit buckets and
//! idempotency keys, and the team versions the identity service publishes. Every call is a Lua script bounded by the configured timeout (50 ms by default). A call that
//! errors or is late makes Redis be skipped for a second, while callers answer from their
//! in-process fallbacks, so an outage costs one timeout a second, not one per request.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicI64, Ordering};
use std::time::Duration;

use anyhow::Context;
use redis::aio::{ConnectionManager, ConnectionManagerConfig};

use crate::time::now_ms;

const SKIP_AFTER_FAILURE_MS: i64 = 1_000;

/// How long a call may take unless configured (`SWITCHBOARD_REDIS_TIMEOUT_MS`).
pub const DEFAULT_TIMEOUT: Duration = Duration::from_millis(50);

pub struct RedisClient {
    connection: ConnectionManager,
    timeout: Duration,
    skip_until_ms: AtomicI64,
    failing: AtomicBool,
    /// What falls back while Redis is away, for the log.
    fallback: &'static str,
}

impl RedisClient {
    /// Connects lazily: a Redis that is down at start is tried again on later calls.
    /// `fallback` says what this process does without Redis, for the log.
    pub fn connect(url: &str, timeout: Duration, fallback: &'static str) -> anyhow::Result<Arc<Self>> {
        let client = redis::Client::open(url).context("parsing REDIS_URL")?;
        let config = ConnectionManagerConfig::new()
            .set_connection_timeout(Some(Duration::from_millis(250)))
            .set_response_timeout(Some(timeout))
            .set_number_of_retries(1)
            .set_min_delay(Duration::from_millis(50))
            .set_max_delay(Duration::from_millis(500));
        let connection =
            ConnectionManager::new_lazy_with_config(client, config).context("creating the Redis connection manager")?;
        Ok(Arc::new(Self {
            connection,
            timeout,
            skip_until_ms: AtomicI64::new(0),
            failing: AtomicBool::new(false),
            fallback,
        }))
    }

    /// True for a second after a failed call: callers use their fallback without trying.
    pub fn skipping(&self) -> bool {
        now_ms() < self.skip_until_ms.load(Ordering::Relaxed)
    }

    /// Runs a script (a client span), or `None` when Redis is skipped, errs or is late.
    pub async fn run<T: redis::FromRedisValue>(&self, invocation: &redis::ScriptInvocation<'_>) -> Option<T> {
        if self.skipping() {
            return None;
        }
        let mut connection = self.connection.clone();
        let call = invocation.invoke_async::<T>(&mut connection);
        let span = crate::telemetry::redis_span("EVALSHA");
        match tokio::time::timeout(self.timeout, tracing::Instrument::instrument(call, span)).await {
            Ok(Ok(value)) => {
                if self.failing.swap(false, Ordering::Relaxed) {
                    tracing::info!(fallback = self.fallback, "Redis answers again");
                }
                Some(value)
            }
            Ok(Err(error)) => self.failed(&error.to_string()),
            Err(_) => self.failed(&format!("no answer within {:?}", self.timeout)),
        }
    }

    /// Skips Redis for a second (also for an answer the caller cannot use).
    pub fn failed<T>(&self, reason: &str) -> Option<T> {
        self.skip_until_ms.store(now_ms() + SKIP_AFTER_FAILURE_MS, Ordering::Relaxed);
        if !self.failing.swap(true, Ordering::Relaxed) {
            tracing::warn!(%reason, fallback = self.fallback, "Redis unavailable");
        }
        None
    }
}
