//! Team versions: a Redis value per team that the identity service replaces, before it answers,
//! whenever something `GET /me` shows of the team changes (its credits, its deletion). The
//! new value is also published on [`CHANNEL`] as `<team id> <version>`. Gateways keep the
//! last identity they read under the version they saw before the read; while the version is
//! unchanged the identity is served from memory, and a changed version makes the next request
//! read again. A gateway learns versions from the channel while subscribed, and otherwise
//! reads them in the script call that takes a request's rate-limit tokens. A team that was
//! never changed has version 0 (no key).
//!
//! Values are random, never counters: a Redis that restarts empty or from an old snapshot
//! can only make a version differ from what a gateway holds (one extra read), never repeat a
//! value the gateway holds for older data.

use std::sync::Arc;

use crate::redis_client::RedisClient;

/// How long a version outlives the team's last change: a key that expires reads as version 0,
/// which only costs gateways one read.
const KEEP_SECONDS: u64 = 86_400;

/// Where new versions are published, as `<team id> <version>`.
pub const CHANNEL: &str = "switchboard:team-versions";

/// ARGV: the keys' lifetime in seconds, the channel, then a version and a team id per key.
/// Sets each KEYS[i] to its version and publishes `<team id> <version>`; set before published,
/// so that a gateway subscribing in between reads the new value.
const PUBLISH: &str = r"
for i, key in ipairs(KEYS) do
  local version = ARGV[2 * i + 1]
  redis.call('SET', key, version, 'EX', ARGV[1])
  redis.call('PUBLISH', ARGV[2], ARGV[2 * i + 2] .. ' ' .. version)
end
return #KEYS
";

/// The Redis key holding a team's version.
pub fn key(team_id: &str) -> String {
    format!("switchboard:team-version:{team_id}")
}

/// The identity service's side: replaces the versions of teams it changed.
#[derive(Clone)]
pub struct TeamVersions {
    redis: Arc<RedisClient>,
    script: Arc<redis::Script>,
    settle: Arc<redis::Script>,
}

impl TeamVersions {
    pub fn new(redis: Arc<RedisClient>) -> Self {
        Self { redis, script: Arc::new(redis::Script::new(PUBLISH)), settle: Arc::new(redis::Script::new("return 1")) }
    }

    /// Gives each team a new version. Called after the change is committed and before the
    /// caller is answered, so that any request the caller makes next sees the new version.
    /// When Redis cannot take it (down, late), gateways may show the team's old identity for
    /// as long as they keep one (their cache lifetime, 2 s by default): the change itself is
    /// done, so this does not fail.
    pub async fn changed(&self, team_ids: &[&str]) {
        if team_ids.is_empty() {
            return;
        }
        let mut invocation = self.script.prepare_invoke();
        invocation.arg(KEEP_SECONDS).arg(CHANNEL);
        for team_id in team_ids {
            invocation.key(key(team_id)).arg(fresh_version()).arg(*team_id);
        }
        // The client logs the outage once, not once per change.
        if self.redis.run::<i64>(&invocation).await.is_none() {
            tracing::debug!(teams = ?team_ids, "team versions not published");
            return;
        }
        // Redis writes a script's reply and the messages it published in one pass of its event
        // loop, the reply first; if Redis is descheduled in between (a busy machine), the caller
        // could be answered and reach another gateway before that gateway's subscription has
        // the message. A second call is served only after that pass ended, so once it answers
        // every subscriber's socket has the new version.
        let _ = self.redis.run::<i64>(&self.settle.prepare_invoke()).await;
    }
}

/// Gives the teams new versions when the platform has a Redis (`versions`); without one,
/// gateways keep no identity past their cache time, so there is nothing to announce.
pub async fn announce(versions: Option<&TeamVersions>, team_ids: &[&str]) {
    if let Some(versions) = versions {
        versions.changed(team_ids).await;
    }
}

/// A random version: positive and below 2^53, so that Lua numbers (doubles) hold it exactly.
fn fresh_version() -> i64 {
    let bits = uuid::Uuid::new_v4().as_u64_pair().0 & ((1 << 53) - 1);
    i64::try_from(bits).unwrap_or(1).max(1)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn versions_are_positive_and_exact_as_doubles() {
        for _ in 0..1_000 {
            let version = fresh_version();
            assert!(version > 0);
            assert_eq!(version as f64 as i64, version);
        }
    }
}
