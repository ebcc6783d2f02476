//! Timestamps are stored and carried as milliseconds since the Unix epoch and shown as
//! ISO 8601 UTC with milliseconds (`2024-01-15T14:30:00.000Z`), as the hosted API does.

use chrono::{DateTime, SecondsFormat, Utc};

pub fn now_ms() -> i64 {
    Utc::now().timestamp_millis()
}

pub fn iso_ms(ms: i64) -> String {
    DateTime::<Utc>::from_timestamp_millis(ms).unwrap_or_default().to_rfc3339_opts(SecondsFormat::Millis, true)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn formats_with_milliseconds_and_z() {
        assert_eq!(iso_ms(1_705_329_000_123), "2024-01-15T14:30:00.123Z");
        assert_eq!(iso_ms(0), "1970-01-01T00:00:00.000Z");
    }
}
