//! The rate-limit fields of every response: the `X-RateLimit-*` trio the hosted API sends,
//! and the IETF `RateLimit` / `RateLimit-Policy` structured fields
//! (draft-ietf-httpapi-ratelimit-headers).

use http::{HeaderName, HeaderValue};
use switchboard_kit::ErrorKind;

use super::{Decision, RateClass};
use switchboard_api::errors::{Code, RateLimitBody};

/// The fields that change only with the configuration, made once per class: `X-RateLimit-Limit`
/// and `RateLimit-Policy`.
pub struct PolicyFields {
    limit: u32,
    window_ms: i64,
    x_limit: HeaderValue,
    policy: HeaderValue,
}

impl PolicyFields {
    pub fn new(class: RateClass, limit: u32, window_ms: i64) -> Self {
        let mut policy = quoted(class);
        policy.push_str(";q=");
        push_decimal(&mut policy, i64::from(limit));
        policy.push_str(";w=");
        push_decimal(&mut policy, window_ms / 1000);
        Self { limit, window_ms, x_limit: HeaderValue::from(limit), policy: header_value(policy) }
    }
}

// Parsed once: a name given as text is parsed again for every response.
const X_RATELIMIT_LIMIT: HeaderName = HeaderName::from_static("x-ratelimit-limit");
const X_RATELIMIT_REMAINING: HeaderName = HeaderName::from_static("x-ratelimit-remaining");
const X_RATELIMIT_RESET: HeaderName = HeaderName::from_static("x-ratelimit-reset");
const RATELIMIT_POLICY: HeaderName = HeaderName::from_static("ratelimit-policy");
const RATELIMIT: HeaderName = HeaderName::from_static("ratelimit");

/// The five fields of a response that `decision` admitted or refused; `made` are its class's.
pub fn rate_limit_headers(decision: &Decision, made: &PolicyFields) -> [(HeaderName, HeaderValue); 5] {
    let (x_limit, policy) = if (made.limit, made.window_ms) == (decision.limit, decision.window_ms) {
        (made.x_limit.clone(), made.policy.clone())
    } else {
        let fresh = PolicyFields::new(decision.class, decision.limit, decision.window_ms);
        (fresh.x_limit, fresh.policy)
    };
    let mut current = quoted(decision.class);
    current.push_str(";r=");
    push_decimal(&mut current, i64::from(decision.remaining));
    current.push_str(";t=");
    push_decimal(&mut current, decision.seconds_to_reset());
    [
        (X_RATELIMIT_LIMIT, x_limit),
        (X_RATELIMIT_REMAINING, HeaderValue::from(decision.remaining)),
        (X_RATELIMIT_RESET, HeaderValue::from((decision.reset_at_ms + 999) / 1000)),
        (RATELIMIT_POLICY, policy),
        (RATELIMIT, header_value(current)),
    ]
}

/// `"<class>"`, the policy's name as the structured fields quote it, with room for the rest.
fn quoted(class: RateClass) -> String {
    let mut text = String::with_capacity(40);
    text.push('"');
    text.push_str(class.name());
    text.push('"');
    text
}

/// Written by hand: these fields are made for every response, and `format!` costs more than
/// the rest of them.
fn push_decimal(text: &mut String, value: i64) {
    if value < 0 {
        text.push('-');
    }
    let mut digits = [0_u8; 20];
    let mut at = digits.len();
    let mut rest = value.unsigned_abs();
    loop {
        at -= 1;
        digits[at] = b'0' + (rest % 10) as u8;
        rest /= 10;
        if rest == 0 {
            break;
        }
    }
    text.extend(digits[at..].iter().map(|&digit| char::from(digit)));
}

/// Fields made of a class name and numbers are always valid values.
fn header_value(text: String) -> HeaderValue {
    HeaderValue::try_from(text).unwrap_or_else(|_| HeaderValue::from_static(""))
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

#[cfg(test)]
mod tests {
    use super::*;

    fn decision(limit: u32, remaining: u32, window_ms: i64) -> Decision {
        Decision {
            class: RateClass::Search,
            allowed: true,
            limit,
            remaining,
            reset_at_ms: 1_700_000_042_500,
            now_ms: 1_700_000_000_000,
            window_ms,
            team_version: None,
        }
    }

    #[test]
    fn fields_say_the_decision_whether_or_not_the_policy_was_made_for_it() {
        let made = PolicyFields::new(RateClass::Search, 30, 60_000);
        for (limit, window_ms, policy) in [(30, 60_000, "\"search\";q=30;w=60"), (7, 1_000, "\"search\";q=7;w=1")] {
            let fields = rate_limit_headers(&decision(limit, 0, window_ms), &made);
            let value =
                |name: &str| fields.iter().find(|(n, _)| n == name).map(|(_, v)| v.to_str().unwrap().to_owned());
            assert_eq!(value("X-RateLimit-Limit").as_deref(), Some(limit.to_string().as_str()));
            assert_eq!(value("RateLimit-Policy").as_deref(), Some(policy));
            assert_eq!(value("RateLimit").as_deref(), Some("\"search\";r=0;t=43"));
            assert_eq!(value("X-RateLimit-Reset").as_deref(), Some("1700000043"));
        }
        let fields = rate_limit_headers(&decision(30, 1_234_567_890, 60_000), &made);
        assert_eq!(fields[1].1, "1234567890");
        assert_eq!(fields[4].1, "\"search\";r=1234567890;t=43");
    }

    #[test]
    fn decimals_are_written_as_format_writes_them() {
        for value in [0, 7, 10, 99, 1_000_000_007, -42, i64::MAX, i64::MIN] {
            let mut text = String::new();
            push_decimal(&mut text, value);
            assert_eq!(text, value.to_string());
        }
    }
}
