//! The wait before a retry, for everything that retries (jobs, the outbox relay, webhook
//! deliveries): exponential in the number of failures in a row, capped, with full jitter.
//!
//! Full jitter (a uniformly random wait between zero and the exponential ceiling) spreads the
//! retries of many workers that failed together, say when a database or a receiver came back,
//! instead of sending them back in step; of the usual variants it does the least total work
//! for the same spread (Marc Brooker, "Exponential Backoff And Jitter", AWS Architecture Blog).

use std::time::Duration;

use rand::Rng;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Backoff {
    /// The ceiling after the first failure; it doubles with each further one.
    pub base: Duration,
    /// The largest ceiling.
    pub max: Duration,
}

impl Backoff {
    pub const fn new(base: Duration, max: Duration) -> Self {
        Self { base, max }
    }

    /// The most that the wait after `failures` failures in a row (from 1) may be:
    /// `base · 2^(failures − 1)`, at most `max`.
    pub fn ceiling(&self, failures: u32) -> Duration {
        let exponent = failures.saturating_sub(1).min(31);
        self.base.saturating_mul(2u32.saturating_pow(exponent)).min(self.max)
    }

    /// A wait drawn uniformly from zero to [`Backoff::ceiling`], to the millisecond.
    pub fn after(&self, failures: u32) -> Duration {
        let ceiling = u64::try_from(self.ceiling(failures).as_millis()).unwrap_or(u64::MAX);
        Duration::from_millis(rand::rng().random_range(0..=ceiling))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_ceiling_doubles_up_to_the_cap() {
        let backoff = Backoff::new(Duration::from_secs(5), Duration::from_secs(3600));
        let ceilings: Vec<u64> = [0, 1, 2, 3, 10, 40, u32::MAX].map(|n| backoff.ceiling(n).as_secs()).to_vec();
        assert_eq!(ceilings, vec![5, 5, 10, 20, 2560, 3600, 3600]);
    }

    #[test]
    fn waits_are_spread_below_the_ceiling() {
        let backoff = Backoff::new(Duration::from_millis(100), Duration::from_secs(10));
        let waits: Vec<Duration> = (0..200).map(|_| backoff.after(4)).collect();
        assert!(waits.iter().all(|wait| *wait <= Duration::from_millis(800)));
        let (least, most) = (waits.iter().min().unwrap(), waits.iter().max().unwrap());
        assert!(*most - *least > Duration::from_millis(400), "spread out, not in step: {least:?}..{most:?}");
    }
}
