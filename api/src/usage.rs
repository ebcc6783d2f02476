//! `GET /v1/usage`: a team's activity per day, for the portal's charts and for billing reports.

use schemars::JsonSchema;
use serde::Serialize;
use switchboard_proto::v1 as proto;

/// One UTC day of a team's activity.
#[derive(Debug, Clone, Serialize, JsonSchema, PartialEq)]
#[serde(rename_all = "camelCase")]
#[schemars(deny_unknown_fields)]
pub struct UsageDay {
    /// The day (UTC), `YYYY-MM-DD`.
    pub date: String,
    /// Knowledge searches charged that day (a refunded, failed search is not counted).
    pub searches: i64,
    /// Credits taken that day, less refunds.
    pub credits_used: i64,
    /// Calls that started that day.
    pub calls: i64,
    /// Their length in minutes, to a tenth (calls in progress count 0 until they end).
    pub call_minutes: f64,
    /// Chats that started that day.
    pub chats: i64,
}

impl UsageDay {
    /// The day starting at `day_ms` (midnight UTC), from what each service counted that day.
    pub fn of(day_ms: i64, parts: &[&proto::UsageDay]) -> Self {
        let sum = |field: fn(&proto::UsageDay) -> i64| parts.iter().map(|part| field(part)).sum::<i64>();
        let seconds = sum(|part| part.call_seconds);
        Self {
            date: chrono::DateTime::from_timestamp_millis(day_ms)
                .map(|at| at.format("%Y-%m-%d").to_string())
                .unwrap_or_default(),
            searches: sum(|part| part.searches),
            credits_used: sum(|part| part.credits_used),
            calls: sum(|part| part.calls),
            #[allow(clippy::cast_precision_loss)] // seconds of a day's calls fit an f64 exactly
            call_minutes: (seconds as f64 / 6.0).round() / 10.0,
            chats: sum(|part| part.chats),
        }
    }
}

/// What one metered operation costs (`GET /v1/credits/prices`): the operations declared as
/// spending credits, with the amount their service debits.
#[derive(Clone, Serialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
#[schemars(deny_unknown_fields)]
pub struct CreditPrice {
    /// The OpenAPI operation id.
    pub operation_id: String,
    /// `GET`, `POST`, ...
    pub method: String,
    pub path: String,
    /// What it does, in a line.
    pub summary: String,
    /// Credits taken from the team acted on each time it succeeds.
    pub credits: i64,
}
