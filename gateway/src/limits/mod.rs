//! Rate limits per key-owning team and rate class.
//!
//! Each (team, class) has a bucket of `limit` tokens that is refilled in full when its
//! one-minute window ends; a request takes one token. This is what the spec's "N requests
//! per minute" promises (request N+1 inside the minute is refused) and what the hosted
//! product's `retryAfter`/`resetAt` describe. The bucket lives in Redis when configured,
//! updated by one Lua script on the server's clock, so every gateway replica shares it;
//! a replica takes tokens from it in leases and admits requests from them in memory
//! (`lease.rs`). When Redis is absent, slow or down the same algorithm runs in process.

mod bucket;
mod headers;
mod lease;
mod local;
mod redis;
mod subscriber;
mod versions;

use std::sync::Arc;

pub use bucket::Decision;
pub use headers::too_many_requests;

use crate::config::GatewayConfig;
use switchboard_kit::redis_client::RedisClient;

/// The window of every limit: the spec's "per minute". Tests shorten it
/// (`SWITCHBOARD_RATE_LIMIT_WINDOW_MS`) to see a window end without waiting a minute.
pub const WINDOW_MS: i64 = 60_000;

#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum RateClass {
    Standard,
    Write,
    Search,
    Bulk,
    /// Signing in, signing up, accepting an invitation, resetting a password: counted per
    /// client address, as there is no team yet.
    Auth,
}

impl RateClass {
    pub const ALL: [RateClass; 5] =
        [RateClass::Standard, RateClass::Write, RateClass::Search, RateClass::Bulk, RateClass::Auth];

    /// Its place in [`RateClass::ALL`], for tables kept per class.
    pub fn index(self) -> usize {
        self as usize
    }

    pub fn name(self) -> &'static str {
        match self {
            RateClass::Standard => "standard",
            RateClass::Write => "write",
            RateClass::Search => "search",
            RateClass::Bulk => "bulk",
            RateClass::Auth => "auth",
        }
    }
}

/// Requests per window (a minute) for each class.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RateLimits {
    pub standard: u32,
    pub write: u32,
    pub search: u32,
    pub bulk: u32,
    pub auth: u32,
    pub window_ms: i64,
}

impl Default for RateLimits {
    fn default() -> Self {
        Self { standard: 100, write: 60, search: 30, bulk: 10, auth: 30, window_ms: WINDOW_MS }
    }
}

impl RateLimits {
    pub fn of(&self, class: RateClass) -> u32 {
        match class {
            RateClass::Standard => self.standard,
            RateClass::Write => self.write,
            RateClass::Search => self.search,
            RateClass::Bulk => self.bulk,
            RateClass::Auth => self.auth,
        }
    }

    pub fn set(&mut self, class: RateClass, per_minute: u32) {
        match class {
            RateClass::Standard => self.standard = per_minute,
            RateClass::Write => self.write = per_minute,
            RateClass::Search => self.search = per_minute,
            RateClass::Bulk => self.bulk = per_minute,
            RateClass::Auth => self.auth = per_minute,
        }
    }
}

pub struct RateLimiter {
    limits: RateLimits,
    /// By [`RateClass::index`].
    policy_fields: [headers::PolicyFields; RateClass::ALL.len()],
    local: local::LocalBuckets,
    redis: Option<redis::RedisBuckets>,
}

impl RateLimiter {
    /// With Redis, also subscribes to team versions (`versions.rs`); must then be called on a
    /// tokio runtime.
    pub fn new(config: &GatewayConfig, redis: Option<Arc<RedisClient>>) -> Arc<Self> {
        let window_ms = config.rate_limits.window_ms;
        let redis = redis.map(|redis| {
            // A URL the subscription cannot follow is logged by its task, which then keeps trying.
            let watch = config.redis_url.as_deref().map(versions::VersionWatch::start);
            redis::RedisBuckets::new(redis, watch, window_ms)
        });
        let limits = config.rate_limits;
        let policy_fields = RateClass::ALL.map(|class| headers::PolicyFields::new(class, limits.of(class), window_ms));
        Arc::new(Self { limits, policy_fields, local: local::LocalBuckets::default(), redis })
    }

    /// The `X-RateLimit-*` and `RateLimit*` fields of an answer `decision` admitted or refused.
    pub fn headers(&self, decision: &Decision) -> [(http::HeaderName, http::HeaderValue); 5] {
        headers::rate_limit_headers(decision, &self.policy_fields[decision.class.index()])
    }

    /// The team's current version, when this gateway follows versions and has heard it.
    pub fn known_version(&self, team_id: &str) -> Option<i64> {
        self.redis.as_ref()?.known_version(team_id)
    }

    /// Takes a token from the team's bucket of this class.
    pub async fn check(&self, team_id: &str, class: RateClass) -> Decision {
        let limit = self.limits.of(class);
        if let Some(redis) = &self.redis
            && let Some(decision) = redis.take(team_id, class, limit).await
        {
            return decision;
        }
        self.local.take(team_id, class, limit, self.limits.window_ms, switchboard_kit::time::now_ms())
    }
}

#[cfg(test)]
mod tests {
    use super::RateClass;

    /// Tables kept per class are indexed by `index` and built from `ALL`: the two must agree.
    #[test]
    fn a_class_index_is_its_place_in_all() {
        for (place, class) in RateClass::ALL.into_iter().enumerate() {
            assert_eq!(class.index(), place, "{class:?}");
        }
    }
}
