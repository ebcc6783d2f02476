//! The hosted list parameters every paged list shares: `page` (from 1), `limit` (1 to 100,
//! default 20), `sortOrder` (`asc` | `desc`, default `desc`); and the date bounds of filters.

use std::borrow::Cow;

use schemars::{JsonSchema, Schema, SchemaGenerator, json_schema};
use serde::{Deserialize, Deserializer};
use switchboard_kit::limits;
use switchboard_proto::v1::PageRequest;

#[derive(Debug, Clone, Copy, Deserialize, JsonSchema, PartialEq, Eq)]
#[serde(rename_all = "lowercase")]
pub enum SortOrder {
    Asc,
    Desc,
}

pub fn first_page() -> u32 {
    1
}

pub fn default_limit() -> u32 {
    u32::try_from(limits::PAGE_LIMIT.default).unwrap_or(20)
}

pub fn descending() -> SortOrder {
    SortOrder::Desc
}

/// The page request a service takes.
pub fn page_request(page: u32, limit: u32, sort_by: &str, order: SortOrder) -> PageRequest {
    PageRequest { page, limit, sort_by: sort_by.to_owned(), ascending: order == SortOrder::Asc }
}

/// A bound of a date filter: an ISO 8601 date-time (`2024-01-15T14:30:00Z`, also without
/// seconds or zone, read as UTC) or a whole day (`2024-01-15`, UTC), which as an upper bound
/// includes the whole day.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum DateBound {
    At(i64),
    Day(chrono::NaiveDate),
}

impl DateBound {
    /// As a lower bound, ms since the epoch.
    pub fn start_ms(self) -> i64 {
        match self {
            DateBound::At(ms) => ms,
            DateBound::Day(day) => day.and_hms_opt(0, 0, 0).map_or(0, |start| start.and_utc().timestamp_millis()),
        }
    }

    /// As an upper bound (inclusive), ms since the epoch.
    pub fn end_ms(self) -> i64 {
        match self {
            DateBound::At(ms) => ms,
            DateBound::Day(day) => DateBound::Day(day).start_ms() + 24 * 60 * 60 * 1000 - 1,
        }
    }
}

impl<'de> Deserialize<'de> for DateBound {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        let text = Cow::<str>::deserialize(deserializer)?;
        if let Some(at) = switchboard_kit::time::parse_date_time_ms(&text) {
            return Ok(DateBound::At(at));
        }
        chrono::NaiveDate::parse_from_str(&text, "%Y-%m-%d")
            .map(DateBound::Day)
            .map_err(|_| serde::de::Error::custom("must be an ISO 8601 date or date-time"))
    }
}

impl JsonSchema for DateBound {
    fn inline_schema() -> bool {
        true
    }

    fn schema_name() -> Cow<'static, str> {
        "DateBound".into()
    }

    fn json_schema(_: &mut SchemaGenerator) -> Schema {
        json_schema!({ "type": "string", "anyOf": [{ "format": "date-time" }, { "format": "date" }] })
    }
}
