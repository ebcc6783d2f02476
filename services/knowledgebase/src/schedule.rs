//! Webpages that refresh themselves (`refreshInterval` daily or weekly): every replica looks
//! for due pages now and then and starts their refresh by the rules of a manual one, so a page
//! is never refreshed twice within a refresh day nor while a refresh runs, whichever replica
//! looks first. What is due is read from SQL each time: a restart loses nothing.

use std::sync::Arc;
use std::time::Duration;

use tokio::sync::watch;

use crate::knowledge::Knowledge;

/// How often due pages are looked for: a tenth of a refresh day, at most every minute (so a
/// daily page is at most a minute late) and at least every 100 ms (tests use short days).
pub fn period(refresh_day_ms: i64) -> Duration {
    let ms = u64::try_from(refresh_day_ms / 10).unwrap_or(0).clamp(100, 60_000);
    Duration::from_millis(ms)
}

/// Runs until shut down.
pub async fn run(knowledge: Arc<Knowledge>, mut shutdown: watch::Receiver<bool>) {
    let mut ticks = tokio::time::interval(period(knowledge.store.refresh_day_ms()));
    ticks.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    loop {
        tokio::select! {
            _ = shutdown.wait_for(|stop| *stop) => return,
            _ = ticks.tick() => {}
        }
        match knowledge.refresh_due(switchboard_kit::time::now_ms()).await {
            Ok(0) => {}
            Ok(started) => tracing::info!(started, "scheduled webpage refreshes started"),
            // The database may be back at the next tick.
            Err(error) => tracing::warn!(error = %error, "looking for scheduled webpage refreshes failed"),
        }
    }
}
