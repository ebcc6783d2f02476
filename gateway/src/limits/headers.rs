//! The rate-limit fields of every response: the `X-RateLimit-*` trio the hosted API sends,
//! and the IETF `RateLimit` / `RateLimit-Policy` structured fields
//! (draft-ietf-httpapi-ratelimit-headers).

use switchboard_kit::ErrorKind;

use super::Decision;
use crate::endpoint::errors::{Code, RateLimitBody};

pub fn rate_limit_headers(decision: &Decision) -> Vec<(&'static str, String)> {
    let reset_seconds = decision.seconds_to_reset();
    let policy = decision.class.name();
    vec![
        ("X-RateLimit-Limit", decision.limit.to_string()),
        ("X-RateLimit-Remaining", decision.remaining.to_string()),
        ("X-RateLimit-Reset", ((decision.reset_at_ms + 999) / 1000).to_string()),
        ("RateLimit-Policy", format!("\"{policy}\";q={};w={}", decision.limit, decision.window_ms / 1000)),
        ("RateLimit", format!("\"{policy}\";r={};t={reset_seconds}", decision.remaining)),
    ]
}

/// The 429 body and its `Retry-After`.
pub fn too_many_requests(decision: &Decision) -> (serde_json::Value, (&'static str, String)) {
    let retry_after = decision.seconds_to_reset();
    let body = RateLimitBody {
        error: "Rate limit exceeded",
        code: Code(ErrorKind::RateLimited.code()),
        retry_after,
        reset_at: switchboard_kit::time::iso_ms(decision.reset_at_ms),
        hint: format!("The {} limit is {} requests per minute for this team.", decision.class.name(), decision.limit),
    };
    (serde_json::to_value(&body).unwrap_or_default(), ("Retry-After", retry_after.to_string()))
}
