//! Whether a service can do its work: its databases answer. A replica cut off from its
//! database says so through its gRPC health (NOT_SERVING), and the callers' balanced channels
//! leave it within a round, instead of sending it calls that wait on the database until they
//! time out (docs/deploy.md, "Replicas and restarts").

use std::time::Duration;

use switchboard_kit::db::Db;
use tokio::sync::watch;

/// How often each database is asked.
const EVERY: Duration = Duration::from_secs(1);
/// How long a database may take to answer `SELECT 1` before the service counts as not ready.
const TIMEOUT: Duration = Duration::from_secs(1);

/// Keeps `ready` true while every database answers, until `stop` turns true.
pub async fn follow_databases(
    component: &'static str,
    databases: Vec<Db>,
    ready: watch::Sender<bool>,
    mut stop: watch::Receiver<bool>,
) {
    loop {
        let mut answering = true;
        for db in &databases {
            if !db.answers(TIMEOUT).await {
                answering = false;
                break;
            }
        }
        ready.send_if_modified(|ready| {
            if *ready == answering {
                return false;
            }
            if answering {
                tracing::info!(component, "the database answers again: ready");
            } else {
                tracing::warn!(component, "the database does not answer within 1 s: not ready");
            }
            *ready = answering;
            true
        });
        tokio::select! {
            () = tokio::time::sleep(EVERY) => {}
            _ = stop.wait_for(|stop| *stop) => return,
        }
    }
}
