//! `GET /v1/usage`: searches and credits (identity service) and calls and chats
//! (conversations service) per UTC day, both asked at once and put together here; and
//! `GET /v1/credits/prices`: what each metered operation costs, read from the route table.

use std::collections::HashMap;
use std::sync::OnceLock;

use schemars::JsonSchema;
use serde::Deserialize;
use switchboard_api::paging::DateBound;
use switchboard_api::usage::{CreditPrice, UsageDay};
use switchboard_kit::time::now_ms;
use switchboard_kit::{FieldViolation, ServiceError, ServiceResult};
use switchboard_proto::v1::UsageRequest;

use super::groups::IDENTITY;
use crate::call::Call;
use crate::endpoint::{Endpoint, Input, List, Nothing};

pub const DAY_MS: i64 = 86_400_000;
/// The default range: today and the 29 days before it.
const DEFAULT_DAYS: i64 = 30;
/// The longest range one request may ask for.
const MAX_DAYS: i64 = 366;

pub fn endpoints() -> Vec<Endpoint> {
    vec![
        Endpoint::get("/v1/usage", usage)
            .doc("getUsage", IDENTITY, "The team's searches, credits, calls and chats per day")
            .about(
                "One entry per UTC day from `from` to `to`, both included, oldest first, days without \
                 activity included with zeros. By default the last 30 days up to today. At most 366 days. \
                 `creditsUsed` is what searches and calls took, less refunds; calls and chats are counted on the day \
                 they started, from the history as it is now (a deleted call is no longer counted). An \
                 agency reads a subteam's with `teamId`.",
            ),
        Endpoint::get("/v1/credits/prices", prices)
            .doc("listCreditPrices", IDENTITY, "What each operation that spends credits costs")
            .about(
                "Every metered operation, with the credits it takes from the team acted on each time it succeeds \
                 (a failed one is given back). Operations not listed cost nothing. The same for every team.",
            ),
    ]
}

/// The metered operations of the route table, in its order; made once (the table is fixed).
fn price_list() -> &'static [CreditPrice] {
    static PRICES: OnceLock<Vec<CreditPrice>> = OnceLock::new();
    PRICES.get_or_init(|| {
        super::endpoints()
            .iter()
            .filter(|endpoint| endpoint.spends_credits)
            .map(|endpoint| CreditPrice {
                operation_id: endpoint.operation_id.to_owned(),
                method: endpoint.method.as_str().to_owned(),
                path: endpoint.path.to_owned(),
                summary: endpoint.summary.to_owned(),
                credits: endpoint.price,
            })
            .collect()
    })
}

async fn prices(_: Call, _: Input) -> ServiceResult<List<CreditPrice>> {
    Ok(List::new(price_list().to_vec()))
}

#[derive(Debug, Clone, Copy, Deserialize, JsonSchema, PartialEq, Eq, Default)]
#[serde(rename_all = "lowercase")]
pub enum Interval {
    /// One entry per UTC day (the only interval today).
    #[default]
    Day,
}

#[derive(Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct UsageQuery {
    /// The first day (a date, or a date-time: its day), UTC. Default: 29 days before `to`.
    pub from: Option<DateBound>,
    /// The last day (a date, or a date-time: its day), UTC. Default: today.
    pub to: Option<DateBound>,
    /// The length of one entry.
    #[serde(default)]
    pub interval: Interval,
}

/// The first and last day (days since the epoch, UTC) of a `from`/`to` range, with the
/// defaults and bounds that `/v1/usage` documents; `/v1/analytics/calls` keeps the same rules.
pub fn day_range(from: Option<DateBound>, to: Option<DateBound>) -> ServiceResult<(i64, i64)> {
    let last_day = to.map_or_else(now_ms, DateBound::start_ms).div_euclid(DAY_MS);
    let first_day = from.map_or(last_day - (DEFAULT_DAYS - 1), |from| from.start_ms().div_euclid(DAY_MS));
    let invalid = |field: &str, message: &str| Err(ServiceError::validation(vec![FieldViolation::new(field, message)]));
    if first_day > last_day {
        return invalid("from", "must not be after to");
    }
    if last_day - first_day >= MAX_DAYS {
        return invalid("from", "must be at most 366 days before to");
    }
    Ok((first_day, last_day))
}

async fn usage(call: Call, input: Input<Nothing, UsageQuery>) -> ServiceResult<List<UsageDay>> {
    let query = input.query;
    // Days are the only interval: a new one is a new arm here.
    let Interval::Day = query.interval;
    let (first_day, last_day) = day_range(query.from, query.to)?;
    let request = UsageRequest {
        team_id: call.team_id().to_owned(),
        from_ms: first_day * DAY_MS,
        to_ms: (last_day + 1) * DAY_MS,
    };
    let (mut identity, mut conversations) = (call.services.identity.clone(), call.services.conversations.clone());
    let (credits, conversations) =
        tokio::try_join!(identity.get_usage(request.clone()), conversations.get_usage(request))?;
    let mut parts: HashMap<i64, Vec<_>> = HashMap::new();
    for day in credits.get_ref().days.iter().chain(&conversations.get_ref().days) {
        parts.entry(day.day_ms).or_default().push(day);
    }
    let days = (first_day..=last_day)
        .map(|day| {
            let day_ms = day * DAY_MS;
            UsageDay::of(day_ms, parts.get(&day_ms).map_or(&[][..], Vec::as_slice))
        })
        .collect();
    Ok(List::new(days))
}
