//! `WatchAgents`: runtimes follow changes to agents as a stream.
//!
//! One feed task per process reads new rows of the change log (`store::changes`) as soon as
//! this process commits one, and every [`POLL`] for rows other replicas wrote. It loads each
//! changed agent's config once and broadcasts it to the streams. A stream first replays the log
//! after the version its runtime gives, then follows the broadcast; a stream that falls behind
//! the broadcast goes back to the log, so a slow runtime is caught up rather than dropped or
//! buffered without bound.

use std::sync::Arc;
use std::time::Duration;

use switchboard_kit::ServiceResult;
use switchboard_proto::v1::{AgentChange, AgentChangeKind};
use tokio::sync::{broadcast, mpsc, watch};
use tonic::Status;

use crate::store::{AgentStore, ChangeRow, WatchError};

/// How often the log is read for changes this process did not commit itself.
pub const POLL: Duration = Duration::from_millis(200);
/// Changes the broadcast holds for streams that are busy sending; one behind by more reads
/// the log instead.
const BROADCAST_CAPACITY: usize = 1024;
/// Rows read from the log at once.
const PAGE: i64 = 200;
/// Changes queued for one stream's client.
const STREAM_BUFFER: usize = 64;
const PRUNE_EVERY: Duration = Duration::from_secs(600);

pub struct Feed {
    store: AgentStore,
    sender: broadcast::Sender<Arc<AgentChange>>,
    /// Where the feed starts: changes up to it are for replays to find. Read before any stream
    /// can start, so that no stream waits for a change the feed will never broadcast.
    start: i64,
}

impl Feed {
    pub async fn new(store: AgentStore) -> ServiceResult<Arc<Self>> {
        let (sender, _) = broadcast::channel(BROADCAST_CAPACITY);
        let start = store.watch_version().await?;
        Ok(Arc::new(Self { store, sender, start }))
    }

    /// Reads and broadcasts new changes until `stop`, and prunes the log now and then.
    pub async fn run(self: Arc<Self>, mut stop: watch::Receiver<bool>) {
        let committed = self.store.changes_committed();
        let mut last = self.start;
        let mut pruned = tokio::time::Instant::now();
        while !*stop.borrow() {
            match self.pass(&mut last).await {
                Ok(true) => continue,
                Ok(false) => {}
                Err(error) => tracing::warn!(error = %error, "reading the agent change log"),
            }
            if pruned.elapsed() >= PRUNE_EVERY {
                pruned = tokio::time::Instant::now();
                if let Err(error) = self.store.prune_changes().await {
                    tracing::warn!(error = %error, "pruning the agent change log");
                }
            }
            tokio::select! {
                () = committed.notified() => {}
                () = tokio::time::sleep(POLL) => {}
                _ = stop.changed() => {}
            }
        }
    }

    /// Broadcasts the changes after `last`; true when there may be more.
    async fn pass(&self, last: &mut i64) -> ServiceResult<bool> {
        let rows = self.store.changes_after(None, *last, PAGE).await?;
        for row in &rows {
            let change = change(&self.store, row).await?;
            *last = row.seq;
            // No receiver is not an error: no runtime is watching.
            let _ = self.sender.send(Arc::new(change));
        }
        Ok(i64::try_from(rows.len()).is_ok_and(|n| n == PAGE))
    }

    /// Starts a stream of the changes after `from` (0: from now) of `team_id` (`None`: all).
    pub async fn watch(
        self: &Arc<Self>,
        team_id: Option<String>,
        from: i64,
    ) -> Result<mpsc::Receiver<Result<AgentChange, Status>>, Status> {
        let live = self.sender.subscribe();
        let last = if from == 0 {
            self.store.watch_version().await?
        } else {
            match self.store.check_watch_start(from).await? {
                Ok(()) => from,
                Err(WatchError::OutOfRange { oldest, newest }) => {
                    return Err(Status::out_of_range(format!(
                        "version {from} is not in the kept changes ({} to {newest}): read the agents' configs \
                         with GetRuntimeConfig and watch from the watch_version they give",
                        oldest.saturating_sub(1)
                    )));
                }
            }
        };
        let (sender, receiver) = mpsc::channel(STREAM_BUFFER);
        let stream = Stream { store: self.store.clone(), team_id, last, sender };
        tokio::spawn(stream.run(live));
        Ok(receiver)
    }
}

/// One runtime's stream.
struct Stream {
    store: AgentStore,
    team_id: Option<String>,
    last: i64,
    sender: mpsc::Sender<Result<AgentChange, Status>>,
}

impl Stream {
    async fn run(mut self, mut live: broadcast::Receiver<Arc<AgentChange>>) {
        loop {
            match self.replay().await {
                Ok(true) => {}
                Ok(false) => return,
                Err(error) => {
                    let _ = self.sender.send(Err(Status::from(error))).await;
                    return;
                }
            }
            loop {
                let received = tokio::select! {
                    received = live.recv() => received,
                    () = self.sender.closed() => return,
                };
                match received {
                    Ok(change) => {
                        if change.version <= self.last {
                            continue;
                        }
                        let ours = self.team_id.as_ref().is_none_or(|team| *team == change.team_id);
                        if ours && self.sender.send(Ok(AgentChange::clone(&change))).await.is_err() {
                            return;
                        }
                        // Another team's change is passed over: the replay would skip it too.
                        self.last = change.version;
                    }
                    Err(broadcast::error::RecvError::Lagged(_)) => break,
                    Err(broadcast::error::RecvError::Closed) => {
                        let _ = self.sender.send(Err(Status::unavailable("the agents service is stopping"))).await;
                        return;
                    }
                }
            }
        }
    }

    /// Sends the logged changes after `last`; false when the client has gone.
    async fn replay(&mut self) -> ServiceResult<bool> {
        loop {
            let rows = self.store.changes_after(self.team_id.as_deref(), self.last, PAGE).await?;
            if rows.is_empty() {
                return Ok(true);
            }
            for row in &rows {
                let change = change(&self.store, row).await?;
                if self.sender.send(Ok(change)).await.is_err() {
                    return Ok(false);
                }
                self.last = row.seq;
            }
        }
    }
}

/// A logged change with the agent's config as it is now.
async fn change(store: &AgentStore, row: &ChangeRow) -> ServiceResult<AgentChange> {
    let deleted = row.kind == crate::store::DELETED;
    let config = if deleted { None } else { store.runtime_config_if_any(&row.team_id, &row.agent_id).await? };
    let kind = if deleted { AgentChangeKind::Deleted } else { AgentChangeKind::Updated };
    Ok(AgentChange {
        version: row.seq,
        team_id: row.team_id.clone(),
        agent_id: row.agent_id.clone(),
        kind: kind.into(),
        at_ms: row.at_ms,
        config,
    })
}
