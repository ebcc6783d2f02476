//! The error envelope as types: what `Reply::error` and the rate limiter send is what the
//! OpenAPI description publishes.

use std::borrow::Cow;

use schemars::{JsonSchema, Schema, SchemaGenerator, json_schema};
use serde::Serialize;
use switchboard_kit::ErrorKind;

/// A stable machine-readable code.
#[derive(Debug, Clone, Copy, Serialize)]
#[serde(transparent)]
pub struct Code(pub &'static str);

impl JsonSchema for Code {
    fn inline_schema() -> bool {
        true
    }

    fn schema_name() -> Cow<'static, str> {
        "ErrorCode".into()
    }

    fn json_schema(_: &mut SchemaGenerator) -> Schema {
        let codes: Vec<&str> = ErrorKind::ALL.iter().map(|kind| kind.code()).collect();
        let statuses: Vec<String> =
            ErrorKind::ALL.iter().map(|kind| format!("{} {}", kind.code(), kind.http_status())).collect();
        json_schema!({
            "type": "string",
            "enum": codes,
            "description": format!("Stable machine-readable code; always present. With its HTTP status: {}.", statuses.join(", ")),
        })
    }
}

/// One invalid input.
#[derive(Debug, Serialize, JsonSchema)]
#[schemars(deny_unknown_fields)]
pub struct FieldError {
    /// The body member, query parameter or path parameter at fault (nested members as
    /// `accessConfig.users`, items as `contacts[2].number`).
    pub field: String,
    /// What is wrong, e.g. "is required", "must be 1 to 255 characters", "must be a UUID".
    pub message: String,
    /// What to do about it, when there is advice, e.g. how to make a password harder to guess.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub hint: Option<String>,
}

impl From<&switchboard_kit::FieldViolation> for FieldError {
    fn from(violation: &switchboard_kit::FieldViolation) -> Self {
        Self { field: violation.field.clone(), message: violation.message.clone(), hint: violation.hint.clone() }
    }
}

impl From<switchboard_proto::v1::FieldViolation> for FieldError {
    fn from(violation: switchboard_proto::v1::FieldViolation) -> Self {
        Self { field: violation.field, message: violation.message, hint: None }
    }
}

/// The body of every error: `error` and `code` always, `hint` when there is one. Internal errors
/// (500) say only "Internal server error"; the cause is logged with the request id
/// (`X-Request-Id`).
#[derive(Debug, Serialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
#[schemars(rename = "Error", deny_unknown_fields)]
pub struct ErrorBody {
    /// A human-readable message, e.g. "Agent not found" or "Missing X-API-Key header".
    pub error: String,
    pub code: Code,
    /// What to do about it, when the gateway or a service has advice (the supported file types
    /// of a 415, the reason a file cannot be read on a 422).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub hint: Option<String>,
    /// A 400 with code VALIDATION_ERROR: every invalid input at once (the request is checked
    /// completely before answering).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub details: Option<Vec<FieldError>>,
    /// A 429 of a per-resource rule (a webpage refresh): seconds until it is allowed again.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub retry_after: Option<i64>,
    /// A 429 of a per-resource rule: when it is allowed again.
    #[serde(skip_serializing_if = "Option::is_none")]
    #[schemars(extend("format" = "date-time"))]
    pub reset_at: Option<String>,
    /// A 429 of the per-webpage refresh rule: the earliest time the webpage may be refreshed
    /// again (the last accepted refresh plus 24 hours), as the spec names it.
    #[serde(skip_serializing_if = "Option::is_none")]
    #[schemars(extend("format" = "date-time"))]
    pub next_available_at: Option<String>,
}

/// A 429 of the request rate limit, counted per key-owning team and rate class (standard 100,
/// write 60, search 30, bulk 10 requests per minute by default).
#[derive(Debug, Serialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
#[schemars(rename = "RateLimitError", deny_unknown_fields)]
pub struct RateLimitBody {
    /// "Rate limit exceeded"
    pub error: &'static str,
    /// RATE_LIMITED
    pub code: Code,
    /// Seconds until the team's bucket of this rate class is refilled (also in `Retry-After`).
    #[schemars(range(min = 1))]
    pub retry_after: i64,
    /// When the bucket is refilled.
    #[schemars(extend("format" = "date-time"))]
    pub reset_at: String,
    /// The class and its limit, e.g. "The search limit is 30 requests per minute for this team."
    pub hint: String,
}
