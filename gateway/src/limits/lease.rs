//! Token leases: tokens a replica took from a Redis bucket ahead of need, admitted from memory.
//!
//! The script that takes a request's tokens also hands over a lease of `floor(left / 8)`
//! tokens (at most [`MOST`]) from what the bucket has left. Leased tokens have left the
//! bucket, so admissions never exceed the limit however many replicas lease. The size shrinks
//! with what is left, and below [`SMALLEST`] there is no lease: a bucket with fewer than 32
//! tokens left (every bucket of a limit of 32 or less, such as the default search, bulk and
//! sign-in limits) is taken from one request at a time, as before leases, so its last tokens
//! are never held by one replica while another is refused. A lease ends with its window;
//! tokens a replica still holds then, or when it dies or its traffic stops, are lost to that
//! window only (at most the lease sizes: `floor(left / 8)` of what was left).
//!
//! Each token keeps the number it had in the bucket: a lease taken when `left` tokens stayed
//! behind holds the numbers `left + lease - 1` down to `left`, handed out highest first, and
//! that number is the request's `X-RateLimit-Remaining`. With one replica it is exact; with
//! several, each number is still given once, but a replica does not see what the others took
//! since its last lease (docs/api-decisions.md, "Rate limits").

use std::collections::HashMap;
use std::time::Instant;

use parking_lot::Mutex;

use super::bucket::Decision;
use crate::config::RateClass;

/// The largest lease: at 256 tokens a script call serves 257 requests.
pub const MOST: u32 = 256;
/// A lease is what is left divided by this.
pub const DIVISOR: u32 = 8;
/// Smaller leases are not taken: they would save a few script calls and strand as many tokens.
pub const SMALLEST: u32 = 4;
/// Above this many leases, ended ones are dropped on the next write.
const SWEEP_ABOVE: usize = 10_000;

#[derive(Debug, Clone, Copy)]
struct Lease {
    tokens: u32,
    /// What the bucket kept when the lease was taken: the lowest number the lease holds.
    left: u32,
    limit: u32,
    reset_at_ms: i64,
    /// Redis's clock when the lease was taken, and this process's at the answer: the lease's
    /// end is measured on Redis's clock, as every other decision is.
    redis_now_ms: i64,
    taken: Instant,
    window_ms: i64,
}

impl Lease {
    fn now_ms(&self) -> i64 {
        self.redis_now_ms + i64::try_from(self.taken.elapsed().as_millis()).unwrap_or(i64::MAX / 2)
    }

    fn live(&self) -> bool {
        self.tokens > 0 && self.now_ms() < self.reset_at_ms
    }
}

/// What a script call gave a bucket beyond the tokens its requests took.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Granted {
    pub tokens: u32,
    pub left: u32,
    pub limit: u32,
    pub reset_at_ms: i64,
    pub redis_now_ms: i64,
    pub window_ms: i64,
}

/// The leases this replica holds, per class and team.
#[derive(Default)]
pub struct Leases {
    held: Mutex<[HashMap<String, Lease>; RateClass::ALL.len()]>,
}

impl Leases {
    /// A token from the team's lease of this class, if it holds one for this limit and window.
    pub fn take(&self, team_id: &str, class: RateClass, limit: u32, team_version: i64) -> Option<Decision> {
        let mut held = self.held.lock();
        let lease = held[class.index()].get_mut(team_id).filter(|lease| lease.limit == limit && lease.live())?;
        lease.tokens -= 1;
        Some(Decision {
            class,
            allowed: true,
            limit,
            remaining: lease.left + lease.tokens,
            reset_at_ms: lease.reset_at_ms,
            now_ms: lease.now_ms(),
            window_ms: lease.window_ms,
            team_version: Some(team_version),
        })
    }

    /// Whether the team holds live tokens of this class: a script call then asks for no
    /// further lease (two leases of one bucket would number their tokens apart).
    pub fn holds(&self, team_id: &str, class: RateClass) -> bool {
        self.held.lock()[class.index()].get(team_id).is_some_and(Lease::live)
    }

    /// Keeps a lease a script call gave.
    pub fn keep(&self, team_id: &str, class: RateClass, granted: Granted) {
        if granted.tokens == 0 {
            return;
        }
        let lease = Lease {
            tokens: granted.tokens,
            left: granted.left,
            limit: granted.limit,
            reset_at_ms: granted.reset_at_ms,
            redis_now_ms: granted.redis_now_ms,
            taken: Instant::now(),
            window_ms: granted.window_ms,
        };
        let mut held = self.held.lock();
        let leases = &mut held[class.index()];
        if leases.len() > SWEEP_ABOVE {
            leases.retain(|_, lease| lease.live());
        }
        leases.insert(team_id.to_owned(), lease);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn granted(tokens: u32, left: u32) -> Granted {
        Granted { tokens, left, limit: 100, reset_at_ms: 60_000, redis_now_ms: 1_000, window_ms: 60_000 }
    }

    #[test]
    fn a_lease_hands_out_its_numbers_highest_first_then_ends() {
        let leases = Leases::default();
        leases.keep("a", RateClass::Standard, granted(3, 80));
        assert!(leases.holds("a", RateClass::Standard));
        let remaining: Vec<u32> =
            (0..3).filter_map(|_| leases.take("a", RateClass::Standard, 100, 7)).map(|d| d.remaining).collect();
        assert_eq!(remaining, [82, 81, 80]);
        assert!(leases.take("a", RateClass::Standard, 100, 7).is_none());
        assert!(!leases.holds("a", RateClass::Standard));
    }

    #[test]
    fn leases_are_per_team_class_and_limit() {
        let leases = Leases::default();
        leases.keep("a", RateClass::Standard, granted(5, 0));
        assert!(leases.take("b", RateClass::Standard, 100, 0).is_none());
        assert!(leases.take("a", RateClass::Write, 100, 0).is_none());
        assert!(leases.take("a", RateClass::Standard, 50, 0).is_none(), "a changed limit ignores the lease");
        let decision = leases.take("a", RateClass::Standard, 100, 9).expect("a token");
        assert_eq!((decision.team_version, decision.reset_at_ms, decision.window_ms), (Some(9), 60_000, 60_000));
    }

    #[test]
    fn a_lease_ends_with_its_window() {
        let leases = Leases::default();
        let ended = Granted { redis_now_ms: 60_000, ..granted(5, 0) };
        leases.keep("a", RateClass::Standard, ended);
        assert!(leases.take("a", RateClass::Standard, 100, 0).is_none());
    }
}
