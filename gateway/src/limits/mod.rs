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

use switchboard_kit::redis_client::RedisClient;

use crate::config::{RateClass, RateLimits};

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
    /// `redis_url` is where the versions are heard, the Redis of `redis`.
    pub fn new(limits: RateLimits, redis: Option<(Arc<RedisClient>, &str)>) -> Arc<Self> {
        let window_ms = limits.window_ms;
        let redis = redis.map(|(redis, url)| {
            // A URL the subscription cannot follow is logged by its task, which then keeps trying.
            redis::RedisBuckets::new(redis, versions::VersionWatch::start(url), window_ms)
        });
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
    use crate::config::RateClass;

    /// Tables kept per class are indexed by `index` and built from `ALL`: the two must agree.
    #[test]
    fn a_class_index_is_its_place_in_all() {
        for (place, class) in RateClass::ALL.into_iter().enumerate() {
            assert_eq!(class.index(), place, "{class:?}");
        }
    }
}
