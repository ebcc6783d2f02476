//! Calls and chats per UTC day, for `GET /v1/usage`. Counted from the history as it is: a
//! deleted call or chat is no longer counted.

use std::collections::BTreeMap;

use sqlx::Row;
use switchboard_kit::ServiceResult;
use switchboard_proto::v1::UsageDay;

use super::{ConversationStore, check_ids};

const DAY_MS: i64 = 86_400_000;

impl ConversationStore {
    /// Calls (by start) with their seconds, and chats (by creation), per day in
    /// `[from_ms, to_ms)`; days with neither are left out.
    pub async fn usage(&self, team_id: &str, from_ms: i64, to_ms: i64) -> ServiceResult<Vec<UsageDay>> {
        check_ids(&[("teamId", team_id)])?;
        let mut days: BTreeMap<i64, UsageDay> = BTreeMap::new();
        // Integer division gives the UTC day on both engines; the casts keep PostgreSQL's SUM
        // from answering NUMERIC. Both read the (team_id, time, ...) indexes.
        let calls = sqlx::query(
            "SELECT started_at / 86400000 AS day, COUNT(*) AS calls, \
                CAST(COALESCE(SUM(duration_seconds), 0) AS BIGINT) AS seconds \
             FROM calls WHERE team_id = $1 AND started_at >= $2 AND started_at < $3 \
             GROUP BY started_at / 86400000",
        )
        .bind(team_id)
        .bind(from_ms)
        .bind(to_ms)
        .fetch_all(self.db.pool())
        .await?;
        for row in &calls {
            let day = days.entry(row.try_get::<i64, _>("day")?).or_default();
            day.calls = row.try_get("calls")?;
            day.call_seconds = row.try_get("seconds")?;
        }
        let chats = sqlx::query(
            "SELECT created_at / 86400000 AS day, COUNT(*) AS chats \
             FROM chats WHERE team_id = $1 AND created_at >= $2 AND created_at < $3 \
             GROUP BY created_at / 86400000",
        )
        .bind(team_id)
        .bind(from_ms)
        .bind(to_ms)
        .fetch_all(self.db.pool())
        .await?;
        for row in &chats {
            days.entry(row.try_get::<i64, _>("day")?).or_default().chats = row.try_get("chats")?;
        }
        Ok(days.into_iter().map(|(day, usage)| UsageDay { day_ms: day * DAY_MS, ..usage }).collect())
    }
}
