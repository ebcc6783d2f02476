//! How accounts behave, from the environment (see docs/deploy.md, "People and sessions").

use crate::store::accounts::SessionTimes;

const SECOND_MS: i64 = 1_000;
const MINUTE_MS: i64 = 60 * SECOND_MS;
const HOUR_MS: i64 = 60 * MINUTE_MS;
const DAY_MS: i64 = 24 * HOUR_MS;

#[derive(Debug, Clone, Copy)]
pub struct AccountSettings {
    /// `SWITCHBOARD_SESSION_IDLE` (12h), `SWITCHBOARD_SESSION_MAX` (30d) and
    /// `SWITCHBOARD_REAUTH_AFTER` (5m).
    pub sessions: SessionTimes,
    /// `SWITCHBOARD_SIGNUP=open` lets anyone make a team; `closed` (the default) leaves it to
    /// operators and invitations.
    pub signup_open: bool,
    /// Credits a signed-up team starts with (`SWITCHBOARD_SIGNUP_CREDITS`, 0).
    pub signup_credits: i64,
    /// Invitations last 7 days, password-reset links 1 day.
    pub invite_valid_ms: i64,
    pub reset_valid_ms: i64,
    /// A billing period (`SWITCHBOARD_BILLING_PERIOD`, 30d): subscriptions roll over and
    /// subteams are topped up to their allowance once per period.
    pub billing_period_ms: i64,
}

impl Default for AccountSettings {
    fn default() -> Self {
        Self {
            sessions: SessionTimes { idle_ms: 12 * HOUR_MS, max_ms: 30 * DAY_MS, reauth_ms: 5 * MINUTE_MS },
            signup_open: false,
            signup_credits: 0,
            invite_valid_ms: 7 * DAY_MS,
            reset_valid_ms: DAY_MS,
            billing_period_ms: crate::store::DEFAULT_PERIOD_MS,
        }
    }
}

pub use switchboard_kit::time::parse_duration_ms;

impl AccountSettings {
    pub fn from_env() -> anyhow::Result<Self> {
        let mut settings = Self::default();
        let var = |name: &str| std::env::var(name).ok().filter(|v| !v.trim().is_empty());
        let duration = |name: &str| -> anyhow::Result<Option<i64>> {
            var(name)
                .map(|v| {
                    parse_duration_ms(&v).ok_or_else(|| anyhow::anyhow!("{name}={v}: expected e.g. 90s, 15m, 12h, 30d"))
                })
                .transpose()
        };
        if let Some(idle) = duration("SWITCHBOARD_SESSION_IDLE")? {
            settings.sessions.idle_ms = idle;
        }
        if let Some(max) = duration("SWITCHBOARD_SESSION_MAX")? {
            settings.sessions.max_ms = max;
        }
        if let Some(reauth) = duration("SWITCHBOARD_REAUTH_AFTER")? {
            settings.sessions.reauth_ms = reauth;
        }
        if let Some(period) = duration("SWITCHBOARD_BILLING_PERIOD")? {
            settings.billing_period_ms = period;
        }
        match var("SWITCHBOARD_SIGNUP").as_deref().map(str::trim) {
            None | Some("closed") => {}
            Some("open") => settings.signup_open = true,
            Some(other) => anyhow::bail!("SWITCHBOARD_SIGNUP={other}: expected open or closed"),
        }
        if let Some(credits) = var("SWITCHBOARD_SIGNUP_CREDITS") {
            settings.signup_credits =
                credits.trim().parse::<i64>().ok().filter(|c| *c >= 0).ok_or_else(|| {
                    anyhow::anyhow!("SWITCHBOARD_SIGNUP_CREDITS={credits}: expected a whole number >= 0")
                })?;
        }
        Ok(settings)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn durations() {
        assert_eq!(parse_duration_ms("90"), Some(90_000));
        assert_eq!(parse_duration_ms("2s"), Some(2_000));
        assert_eq!(parse_duration_ms("15m"), Some(900_000));
        assert_eq!(parse_duration_ms("12h"), Some(12 * HOUR_MS));
        assert_eq!(parse_duration_ms("30d"), Some(30 * DAY_MS));
        assert_eq!(parse_duration_ms("500ms"), Some(500));
        for bad in ["", "h", "12x", "-5s", "0s"] {
            assert_eq!(parse_duration_ms(bad), None, "{bad}");
        }
    }
}
