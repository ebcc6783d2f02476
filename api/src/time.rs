//! Timestamps as the API writes them: ISO 8601 UTC with milliseconds.

use std::borrow::Cow;

use schemars::{JsonSchema, Schema, SchemaGenerator, json_schema};
use serde::Serialize;

/// A moment, e.g. `2024-01-15T14:30:00.123Z`.
#[derive(Debug, Clone, Serialize)]
#[serde(transparent)]
pub struct Timestamp(String);

impl Timestamp {
    pub fn from_ms(ms: i64) -> Self {
        Self(switchboard_kit::time::iso_ms(ms))
    }

    pub fn option(ms: Option<i64>) -> Option<Self> {
        ms.map(Self::from_ms)
    }
}

impl JsonSchema for Timestamp {
    fn inline_schema() -> bool {
        true
    }

    fn schema_name() -> Cow<'static, str> {
        "Timestamp".into()
    }

    fn json_schema(_: &mut SchemaGenerator) -> Schema {
        json_schema!({ "type": "string", "format": "date-time" })
    }
}
