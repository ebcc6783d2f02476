//! `GET /v1/analytics/calls`: a team's calls per day with their outcomes, for the portal's
//! analytics page and for reports.

use schemars::JsonSchema;
use serde::Serialize;
use switchboard_proto::v1 as proto;

/// Calls per sentiment; a call without analysis counts as `unknown`.
#[derive(Debug, Clone, Default, Serialize, JsonSchema, PartialEq, Eq)]
#[schemars(deny_unknown_fields)]
pub struct SentimentCounts {
    pub positive: i64,
    pub neutral: i64,
    pub negative: i64,
    pub unknown: i64,
}

/// Calls per disconnection reason, every reason present; a call without a reason is in none.
#[derive(Debug, Clone, Default, Serialize, JsonSchema, PartialEq, Eq)]
#[schemars(deny_unknown_fields)]
pub struct ReasonCounts {
    pub customer_hangup: i64,
    pub agent_hangup: i64,
    pub transfer: i64,
    pub voicemail: i64,
    pub no_answer: i64,
    pub busy: i64,
    pub error: i64,
    pub other: i64,
}

/// One UTC day of a team's calls.
#[derive(Debug, Clone, Serialize, JsonSchema, PartialEq)]
#[serde(rename_all = "camelCase")]
#[schemars(deny_unknown_fields)]
pub struct CallAnalyticsDay {
    /// The day (UTC), `YYYY-MM-DD`.
    pub date: String,
    /// Calls that started that day.
    pub calls: i64,
    /// Their length in minutes, to a tenth (calls in progress count 0 until they end).
    pub minutes: f64,
    /// Calls whose analysis says they reached their goal.
    pub successful: i64,
    /// Calls whose analysis says they did not; calls whose success is not known are in neither.
    pub unsuccessful: i64,
    pub sentiment: SentimentCounts,
    pub disconnection_reasons: ReasonCounts,
    /// Credits the day's calls cost (what was reported, paid or not).
    pub cost: i64,
}

impl CallAnalyticsDay {
    /// The day starting at `day_ms` (midnight UTC), from the service's count of it (`None`: no
    /// call that day).
    pub fn of(day_ms: i64, counted: Option<&proto::CallAnalyticsDay>) -> Self {
        let date = chrono::DateTime::from_timestamp_millis(day_ms)
            .map(|at| at.format("%Y-%m-%d").to_string())
            .unwrap_or_default();
        let Some(day) = counted else {
            return Self {
                date,
                calls: 0,
                minutes: 0.0,
                successful: 0,
                unsuccessful: 0,
                sentiment: SentimentCounts::default(),
                disconnection_reasons: ReasonCounts::default(),
                cost: 0,
            };
        };
        let reason = |name: &str| day.disconnection_reasons.get(name).copied().unwrap_or_default();
        Self {
            date,
            calls: day.calls,
            #[allow(clippy::cast_precision_loss)] // seconds of a day's calls fit an f64 exactly
            minutes: (day.seconds as f64 / 6.0).round() / 10.0,
            successful: day.successful,
            unsuccessful: day.unsuccessful,
            sentiment: SentimentCounts {
                positive: day.positive,
                neutral: day.neutral,
                negative: day.negative,
                unknown: day.unknown,
            },
            disconnection_reasons: ReasonCounts {
                customer_hangup: reason("customer_hangup"),
                agent_hangup: reason("agent_hangup"),
                transfer: reason("transfer"),
                voicemail: reason("voicemail"),
                no_answer: reason("no_answer"),
                busy: reason("busy"),
                error: reason("error"),
                other: reason("other"),
            },
            cost: day.cost_credits,
        }
    }
}
