//! The log of changes to agents that `WatchAgents` replays: one row per change, written in the
//! change's transaction. Its `seq` is the watch version. Writers take a lock on the log before
//! they append (PostgreSQL: an advisory lock; SQLite has one writer anyway), so rows become
//! visible in `seq` order and a reader that has seen `seq` n never later finds a row below n.

use sqlx::Row;
use switchboard_kit::ServiceResult;
use switchboard_kit::time::now_ms;

use super::AgentStore;

pub const UPDATED: &str = "updated";
pub const DELETED: &str = "deleted";
/// Rows are kept this long; the newest is always kept, so that versions stay comparable.
pub const RETENTION_MS: i64 = 7 * 24 * 60 * 60 * 1000;

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ChangeRow {
    pub seq: i64,
    pub team_id: String,
    pub agent_id: String,
    pub kind: String,
    pub at_ms: i64,
}

/// Why a watch cannot start where it asked to.
#[derive(Debug, PartialEq, Eq)]
pub enum WatchError {
    /// Older than the oldest kept change, or newer than the newest: read the configs again.
    OutOfRange { oldest: i64, newest: i64 },
}

impl AgentStore {
    /// Appends a change; call it last in the transaction of the change.
    pub(super) async fn record_change(
        &self,
        tx: &mut sqlx::AnyConnection,
        team_id: &str,
        agent_id: &str,
        kind: &str,
    ) -> ServiceResult<()> {
        self.db.lock_scope(tx, "agent_changes").await?;
        sqlx::query("INSERT INTO agent_changes (team_id, agent_id, kind, at) VALUES ($1, $2, $3, $4)")
            .bind(team_id)
            .bind(agent_id)
            .bind(kind)
            .bind(now_ms())
            .execute(tx)
            .await?;
        Ok(())
    }

    /// The newest version (0 before the first change).
    pub async fn watch_version(&self) -> ServiceResult<i64> {
        let newest: Option<i64> =
            sqlx::query_scalar("SELECT MAX(seq) FROM agent_changes").fetch_one(self.db.pool()).await?;
        Ok(newest.unwrap_or(0))
    }

    /// Whether the changes after `from` are all still kept.
    pub async fn check_watch_start(&self, from: i64) -> ServiceResult<Result<(), WatchError>> {
        let row = sqlx::query("SELECT MIN(seq) AS oldest, MAX(seq) AS newest FROM agent_changes")
            .fetch_one(self.db.pool())
            .await?;
        let oldest: Option<i64> = row.try_get("oldest")?;
        let newest: Option<i64> = row.try_get("newest")?;
        let (oldest, newest) = (oldest.unwrap_or(1), newest.unwrap_or(0));
        Ok(if from + 1 < oldest || from > newest { Err(WatchError::OutOfRange { oldest, newest }) } else { Ok(()) })
    }

    /// At most `limit` changes after `after`, oldest first; of one team, or of all when `None`.
    pub async fn changes_after(&self, team_id: Option<&str>, after: i64, limit: i64) -> ServiceResult<Vec<ChangeRow>> {
        let query = match team_id {
            Some(_) => {
                "SELECT seq, team_id, agent_id, kind, at FROM agent_changes WHERE seq > $1 AND team_id = $2 \
                        ORDER BY seq LIMIT $3"
            }
            None => "SELECT seq, team_id, agent_id, kind, at FROM agent_changes WHERE seq > $1 ORDER BY seq LIMIT $2",
        };
        let mut query = sqlx::query(query).bind(after);
        if let Some(team_id) = team_id {
            query = query.bind(team_id);
        }
        let rows = query.bind(limit).fetch_all(self.db.pool()).await?;
        rows.iter()
            .map(|row| {
                Ok(ChangeRow {
                    seq: row.try_get("seq")?,
                    team_id: row.try_get("team_id")?,
                    agent_id: row.try_get("agent_id")?,
                    kind: row.try_get("kind")?,
                    at_ms: row.try_get("at")?,
                })
            })
            .collect()
    }

    /// Drops changes older than [`RETENTION_MS`], all but the newest.
    pub async fn prune_changes(&self) -> ServiceResult<u64> {
        let result =
            sqlx::query("DELETE FROM agent_changes WHERE at < $1 AND seq < (SELECT MAX(seq) FROM agent_changes)")
                .bind(now_ms() - RETENTION_MS)
                .execute(self.db.pool())
                .await?;
        Ok(result.rows_affected())
    }
}
