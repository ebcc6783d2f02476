//! How deliveries are made, from the environment.

use std::time::Duration;

#[derive(Debug, Clone)]
pub struct Settings {
    /// Receivers on private, loopback or link-local addresses are allowed
    /// (`SWITCHBOARD_WEBHOOK_ALLOW_PRIVATE=true`): for receivers inside the operator's network.
    pub allow_private: bool,
    /// How long a receiver has to answer (`SWITCHBOARD_WEBHOOK_TIMEOUT_MS`, 10 s).
    pub timeout: Duration,
    /// The wait before the first retry; each next one waits twice as long, at most `max_backoff`
    /// (`SWITCHBOARD_WEBHOOK_RETRY_BASE_MS`, 5 s).
    pub backoff: Duration,
    pub max_backoff: Duration,
    /// How long a delivery is retried before it is given up and its endpoint marked failing
    /// (`SWITCHBOARD_WEBHOOK_RETRY_FOR_MS`, 24 h).
    pub retry_for: Duration,
    /// Deliveries in flight at once (`SWITCHBOARD_WEBHOOK_CONCURRENCY`, 64).
    pub concurrency: usize,
}

impl Default for Settings {
    fn default() -> Self {
        Self {
            allow_private: false,
            timeout: Duration::from_secs(10),
            backoff: Duration::from_secs(5),
            max_backoff: Duration::from_secs(3600),
            retry_for: Duration::from_secs(24 * 3600),
            concurrency: 64,
        }
    }
}

impl Settings {
    pub fn from_env() -> Self {
        let ms = |name: &str| {
            std::env::var(name).ok().and_then(|value| value.trim().parse::<u64>().ok()).map(Duration::from_millis)
        };
        let mut settings = Self {
            allow_private: std::env::var("SWITCHBOARD_WEBHOOK_ALLOW_PRIVATE").is_ok_and(|v| v.trim() == "true"),
            ..Self::default()
        };
        if let Some(timeout) = ms("SWITCHBOARD_WEBHOOK_TIMEOUT_MS") {
            settings.timeout = timeout.max(Duration::from_millis(100));
        }
        if let Some(backoff) = ms("SWITCHBOARD_WEBHOOK_RETRY_BASE_MS") {
            settings.backoff = backoff.max(Duration::from_millis(10));
        }
        if let Some(retry_for) = ms("SWITCHBOARD_WEBHOOK_RETRY_FOR_MS") {
            settings.retry_for = retry_for;
        }
        if let Some(concurrency) = std::env::var("SWITCHBOARD_WEBHOOK_CONCURRENCY").ok().and_then(|v| v.parse().ok()) {
            settings.concurrency = usize::max(concurrency, 1);
        }
        settings
    }

    /// The wait after the `attempts`-th failed attempt.
    pub fn backoff_after(&self, attempts: u32) -> Duration {
        let exponent = attempts.saturating_sub(1).min(20);
        self.backoff.saturating_mul(2u32.saturating_pow(exponent)).min(self.max_backoff)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn backoff_doubles_up_to_the_cap() {
        let settings = Settings::default();
        let waits: Vec<u64> = [1, 2, 3, 10, 40].iter().map(|n| settings.backoff_after(*n).as_secs()).collect();
        assert_eq!(waits, vec![5, 10, 20, 2560, 3600]);
    }
}
