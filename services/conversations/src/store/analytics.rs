//! Calls per UTC day with their outcomes, for `GET /v1/analytics/calls`: one `GROUP BY` over
//! the team's calls of the range, read from the `calls_analytics` index alone (it holds every
//! column counted here). Counted from the history as it is: a deleted call is not counted.

use std::sync::OnceLock;

use sqlx::Row;
use switchboard_kit::db::Engine;
use switchboard_kit::{ServiceError, ServiceResult};
use switchboard_proto::v1::CallAnalyticsDay;

use super::{ConversationStore, DisconnectionReason, Sentiment, check_ids};

const DAY_MS: i64 = 86_400_000;

/// The statement: a count per sentiment and per reason, as columns named after them. Calls
/// without analysis count as `unknown`; calls without a reason in no reason; a call whose
/// success is not known is neither successful nor unsuccessful. The casts keep PostgreSQL's
/// SUM from answering NUMERIC. `$4` is the agent, or '' for every agent.
///
/// SQLite is told to read `calls_analytics`: its planner takes the narrower `calls_started`
/// (the same leading columns) and then reads every call's row, 2.5 times slower at 100,000
/// calls (measured: 250 ms against 95 ms). PostgreSQL's planner, with real statistics, is left
/// to choose.
fn statement(engine: Engine) -> &'static str {
    static SQL: [OnceLock<String>; 2] = [OnceLock::new(), OnceLock::new()];
    let (slot, index) = match engine {
        Engine::Sqlite => (&SQL[0], " INDEXED BY calls_analytics"),
        Engine::Postgres => (&SQL[1], ""),
    };
    slot.get_or_init(|| {
        let count = |condition: String, name: &str| {
            format!("CAST(SUM(CASE WHEN {condition} THEN 1 ELSE 0 END) AS BIGINT) AS {name}")
        };
        let mut columns = vec![
            "started_at / 86400000 AS day".to_owned(),
            "COUNT(*) AS calls".to_owned(),
            "CAST(COALESCE(SUM(duration_seconds), 0) AS BIGINT) AS seconds".to_owned(),
            "CAST(COALESCE(SUM(cost_credits), 0) AS BIGINT) AS cost".to_owned(),
            count("successful = 1".to_owned(), "successful"),
            count("successful = 0".to_owned(), "unsuccessful"),
        ];
        for sentiment in Sentiment::ALL {
            let condition = match sentiment {
                Sentiment::Unknown => "(sentiment = 'unknown' OR sentiment IS NULL)".to_owned(),
                known => format!("sentiment = '{}'", known.as_str()),
            };
            columns.push(count(condition, &format!("s_{}", sentiment.as_str())));
        }
        for reason in DisconnectionReason::ALL {
            let name = reason.as_str();
            columns.push(count(format!("disconnection_reason = '{name}'"), &format!("r_{name}")));
        }
        format!(
            "SELECT {} FROM calls{index} WHERE team_id = $1 AND started_at >= $2 AND started_at < $3 \
             AND ($4 = '' OR agent_id = $4) GROUP BY started_at / 86400000 ORDER BY day",
            columns.join(", ")
        )
    })
}

impl ConversationStore {
    /// The team's calls (by start) in `[from_ms, to_ms)`, of one agent or all, per day; days
    /// without calls are left out.
    pub async fn call_analytics(
        &self,
        team_id: &str,
        (from_ms, to_ms): (i64, i64),
        agent_id: Option<&str>,
    ) -> ServiceResult<Vec<CallAnalyticsDay>> {
        check_ids(&[("teamId", team_id)])?;
        if let Some(agent_id) = agent_id {
            check_ids(&[("agentId", agent_id)])?;
        }
        if from_ms > to_ms {
            return Err(ServiceError::invalid_field("from", "must not be after to"));
        }
        let rows = sqlx::query(statement(self.db.engine()))
            .bind(team_id)
            .bind(from_ms)
            .bind(to_ms)
            .bind(agent_id.unwrap_or_default())
            .fetch_all(self.db.pool())
            .await?;
        rows.iter()
            .map(|row| {
                let get = |name: &str| row.try_get::<i64, _>(name);
                let mut reasons = std::collections::HashMap::new();
                for reason in DisconnectionReason::ALL {
                    reasons.insert(reason.as_str().to_owned(), get(&format!("r_{}", reason.as_str()))?);
                }
                Ok(CallAnalyticsDay {
                    day_ms: get("day")? * DAY_MS,
                    calls: get("calls")?,
                    seconds: get("seconds")?,
                    successful: get("successful")?,
                    unsuccessful: get("unsuccessful")?,
                    positive: get("s_positive")?,
                    neutral: get("s_neutral")?,
                    negative: get("s_negative")?,
                    unknown: get("s_unknown")?,
                    disconnection_reasons: reasons,
                    cost_credits: get("cost")?,
                })
            })
            .collect()
    }
}
