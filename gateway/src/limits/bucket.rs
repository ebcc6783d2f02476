//! The bucket algorithm, as a pure function so that the in-process limiter and its tests
//! share it; `redis.rs` holds the same steps in Lua.

use crate::config::RateClass;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct State {
    pub tokens: u32,
    /// When the bucket is refilled, in ms since the epoch.
    pub reset_at_ms: i64,
}

/// The outcome of one request against its bucket, with what the rate-limit headers need.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Decision {
    pub class: RateClass,
    pub allowed: bool,
    pub limit: u32,
    pub remaining: u32,
    pub reset_at_ms: i64,
    /// The clock the decision was taken on (Redis's when Redis decided).
    pub now_ms: i64,
    /// The length of the bucket's window.
    pub window_ms: i64,
    /// The team's version (`switchboard_kit::team_versions`) read with the token when Redis
    /// decided; `None` from the in-process limiter.
    pub team_version: Option<i64>,
}

impl Decision {
    /// Whole seconds until the bucket refills, at least 1 when refused.
    pub fn seconds_to_reset(&self) -> i64 {
        let ms = (self.reset_at_ms - self.now_ms).max(0);
        let seconds = (ms + 999) / 1000;
        if self.allowed { seconds } else { seconds.max(1) }
    }
}

pub fn take(state: Option<State>, class: RateClass, limit: u32, window_ms: i64, now_ms: i64) -> (State, Decision) {
    let mut state = match state {
        Some(state) if now_ms < state.reset_at_ms => State { tokens: state.tokens.min(limit), ..state },
        _ => State { tokens: limit, reset_at_ms: now_ms + window_ms },
    };
    let allowed = state.tokens > 0;
    if allowed {
        state.tokens -= 1;
    }
    let decision = Decision {
        class,
        allowed,
        limit,
        remaining: state.tokens,
        reset_at_ms: state.reset_at_ms,
        now_ms,
        window_ms,
        team_version: None,
    };
    (state, decision)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::WINDOW_MS;

    #[test]
    fn the_request_after_the_limit_is_refused_until_the_window_ends() {
        let mut state = None;
        for i in 0..100 {
            let (next, decision) = take(state, RateClass::Standard, 100, WINDOW_MS, 1_000 + i);
            assert!(decision.allowed);
            assert_eq!(decision.remaining, 99 - u32::try_from(i).unwrap());
            state = Some(next);
        }
        let (next, refused) = take(state, RateClass::Standard, 100, WINDOW_MS, 30_000);
        assert!(!refused.allowed);
        assert_eq!(refused.remaining, 0);
        assert_eq!(refused.reset_at_ms, 61_000);
        assert_eq!(refused.seconds_to_reset(), 31);
        let (_, later) = take(Some(next), RateClass::Standard, 100, WINDOW_MS, 61_000);
        assert!(later.allowed);
        assert_eq!(later.remaining, 99);
    }

    #[test]
    fn a_lowered_limit_applies_at_once() {
        let (state, _) = take(None, RateClass::Write, 60, WINDOW_MS, 0);
        let (_, decision) = take(Some(state), RateClass::Write, 10, WINDOW_MS, 1);
        assert_eq!(decision.remaining, 9);
    }
}
