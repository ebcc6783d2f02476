//! `GET /v1/analytics/calls`: the team's calls per UTC day with their outcomes, counted by the
//! conversations service in one query, with `/v1/usage`'s rules for the range.

use std::collections::HashMap;

use schemars::JsonSchema;
use serde::Deserialize;
use switchboard_api::analytics::CallAnalyticsDay;
use switchboard_kit::ServiceResult;
use switchboard_proto::v1::CallAnalyticsRequest;

use super::groups::CALLS;
use super::usage::{DAY_MS, Interval, UsageQuery, day_range};
use crate::call::Call;
use crate::endpoint::{Endpoint, Id, Input, List, Nothing};

pub fn endpoints() -> Vec<Endpoint> {
    vec![
        Endpoint::get("/v1/analytics/calls", calls)
            .doc("getCallAnalytics", CALLS, "The team's calls per day: outcomes, sentiments, reasons, minutes, cost")
            .about(
                "One entry per UTC day from `from` to `to`, both included, oldest first, days without calls \
                 included with zeros. By default the last 30 days up to today; at most 366 days (the rules of \
                 `/v1/usage`). Calls are counted on the day they started, from the history as it is now (a \
                 deleted call is no longer counted). `successful` and `unsuccessful` count the calls whose \
                 analysis says so; a call whose success is not known (no analysis, or `successful` null) is \
                 in neither. A call without analysis counts as sentiment `unknown`. A call without a \
                 disconnection reason is in none of `disconnectionReasons`, which lists every reason. `cost` \
                 is the credits the calls cost as reported, paid or not. `agentId` keeps one agent's calls. An \
                 agency reads a subteam's with `teamId`.",
            )
            .tool(
                "get_call_analytics",
                "Reads the team's calls per day: outcomes, sentiments, reasons, minutes, cost.",
            ),
    ]
}

#[derive(Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct CallAnalyticsQuery {
    /// `from`, `to` and `interval`, as `/v1/usage` reads them.
    #[serde(flatten)]
    pub range: UsageQuery,
    /// Only this agent's calls.
    pub agent_id: Option<Id>,
}

async fn calls(call: Call, input: Input<Nothing, CallAnalyticsQuery>) -> ServiceResult<List<CallAnalyticsDay>> {
    let query = input.query;
    // Days are the only interval: a new one is a new arm here.
    let Interval::Day = query.range.interval;
    let (first_day, last_day) = day_range(query.range.from, query.range.to)?;
    let request = CallAnalyticsRequest {
        team_id: call.team_id().to_owned(),
        from_ms: first_day * DAY_MS,
        to_ms: (last_day + 1) * DAY_MS,
        agent_id: query.agent_id.map(Id::into_string),
    };
    let counted = call.services.conversations.clone().get_call_analytics(request).await?.into_inner().days;
    let by_day: HashMap<i64, _> = counted.iter().map(|day| (day.day_ms, day)).collect();
    let days = (first_day..=last_day)
        .map(|day| CallAnalyticsDay::of(day * DAY_MS, by_day.get(&(day * DAY_MS)).copied()))
        .collect();
    Ok(List::new(days))
}
