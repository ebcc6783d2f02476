//! The loop that tops client subteams up to their monthly allowance when their billing period
//! ends (`IdentityStore::top_up_due`). Every identity replica runs it; the store makes each
//! top-up happen once.

use std::time::Duration;

use switchboard_kit::team_versions::{TeamVersions, announce};
use tokio::sync::watch;

use crate::store::IdentityStore;

/// How often due periods are looked for: a twentieth of a period, between half a second (for
/// tests with periods of seconds) and a minute.
pub fn interval(period_ms: i64) -> Duration {
    Duration::from_millis(u64::try_from(period_ms / 20).unwrap_or(0).clamp(500, 60_000))
}

/// Each top-up gives the agency and the subteam new versions (`versions`, when the platform
/// has a Redis), as every other change of credits does, so that gateways show it at once.
pub async fn run(
    store: IdentityStore,
    versions: Option<TeamVersions>,
    every: Duration,
    mut stop: watch::Receiver<bool>,
) {
    while !*stop.borrow() {
        match store.top_up_due().await {
            Ok(done) => {
                // One announcement for the pass: two Redis calls, not two per top-up.
                let teams: Vec<&str> =
                    done.iter().flat_map(|t| [t.agency_team_id.as_str(), t.subteam_id.as_str()]).collect();
                announce(versions.as_ref(), &teams).await;
                for top_up in done {
                    tracing::info!(
                        agency = %top_up.agency_team_id,
                        subteam = %top_up.subteam_id,
                        moved = top_up.moved,
                        short = top_up.short,
                        "a subteam's monthly allowance was topped up"
                    );
                }
            }
            Err(error) => tracing::warn!(%error, "topping subteams up failed; trying again"),
        }
        tokio::select! {
            () = tokio::time::sleep(every) => {}
            _ = stop.changed() => {}
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_interval_follows_the_period_within_bounds() {
        assert_eq!(interval(30 * 24 * 3_600_000), Duration::from_secs(60));
        assert_eq!(interval(4_000), Duration::from_millis(500));
        assert_eq!(interval(200_000), Duration::from_secs(10));
    }
}
