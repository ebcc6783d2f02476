//! How deliveries are made, from the environment.

use std::time::Duration;

use switchboard_kit::backoff::Backoff;

#[derive(Debug, Clone)]
pub struct Settings {
    /// Receivers on private, loopback or link-local addresses are allowed
    /// (`SWITCHBOARD_WEBHOOK_ALLOW_PRIVATE=true`): for receivers inside the operator's network.
    pub allow_private: bool,
    /// How long a receiver has to answer (`SWITCHBOARD_WEBHOOK_TIMEOUT_MS`, 10 s).
    pub timeout: Duration,
    /// The ceiling of the wait before the first retry; each next ceiling is twice as long, at
    /// most `max_backoff` (`SWITCHBOARD_WEBHOOK_RETRY_BASE_MS`, 5 s). The wait itself is drawn
    /// below the ceiling (full jitter: `switchboard_kit::backoff`).
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
        Backoff::new(self.backoff, self.max_backoff).after(attempts)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn retries_wait_below_a_ceiling_that_doubles_up_to_an_hour() {
        let settings = Settings::default();
        for (attempts, ceiling) in [(1, 5), (2, 10), (3, 20), (10, 2560), (40, 3600)] {
            let wait = settings.backoff_after(attempts);
            assert!(wait <= Duration::from_secs(ceiling), "after {attempts} attempts: {wait:?}");
        }
    }
}
