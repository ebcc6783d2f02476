//! Timestamps are stored and carried as milliseconds since the Unix epoch and shown as
//! ISO 8601 UTC with milliseconds (`2024-01-15T14:30:00.000Z`), as the hosted API does.

use chrono::{DateTime, FixedOffset, NaiveDateTime, SecondsFormat, Utc};

pub fn now_ms() -> i64 {
    Utc::now().timestamp_millis()
}

pub fn iso_ms(ms: i64) -> String {
    DateTime::<Utc>::from_timestamp_millis(ms).unwrap_or_default().to_rfc3339_opts(SecondsFormat::Millis, true)
}

/// Milliseconds since the epoch of an ISO 8601 date-time in extended format: RFC 3339
/// (`2024-01-15T14:30:00.123Z`, `+02:00`), and also without seconds (`2024-01-15T14:30Z`),
/// with a `+0200` offset, or without a zone, which is read as UTC.
pub fn parse_date_time_ms(text: &str) -> Option<i64> {
    if let Ok(at) = DateTime::parse_from_rfc3339(text) {
        return Some(at.timestamp_millis());
    }
    let (local, offset) = split_zone(text)?;
    let naive = ["%Y-%m-%dT%H:%M:%S%.f", "%Y-%m-%dT%H:%M"]
        .iter()
        .find_map(|format| NaiveDateTime::parse_from_str(local, format).ok())?;
    Some(naive.and_utc().timestamp_millis() - i64::from(offset.local_minus_utc()) * 1000)
}

/// The local part of a date-time and its zone: `Z`, `±HH:MM`, `±HHMM`, `±HH` or none (UTC).
fn split_zone(text: &str) -> Option<(&str, FixedOffset)> {
    let utc = FixedOffset::east_opt(0)?;
    if let Some(local) = text.strip_suffix('Z').or_else(|| text.strip_suffix('z')) {
        return Some((local, utc));
    }
    let time_start = text.find('T')?;
    let Some(sign_at) = text[time_start..].rfind(['+', '-']).map(|at| at + time_start) else {
        return Some((text, utc));
    };
    let (local, zone) = text.split_at(sign_at);
    let digits: String = zone[1..].chars().filter(|c| *c != ':').collect();
    let valid = matches!(zone.len(), 3 | 5 | 6) && digits.chars().all(|c| c.is_ascii_digit());
    if !valid {
        return None;
    }
    let hours: i32 = digits.get(0..2)?.parse().ok()?;
    let minutes: i32 = digits.get(2..4).map_or(Some(0), |m| m.parse().ok())?;
    let seconds = (hours * 60 + minutes) * 60;
    let offset = if zone.starts_with('-') { FixedOffset::west_opt(seconds) } else { FixedOffset::east_opt(seconds) };
    Some((local, offset?))
}

/// `90`, `90s`, `15m`, `12h` or `30d`, in milliseconds.
pub fn parse_duration_ms(value: &str) -> Option<i64> {
    let value = value.trim();
    let (number, unit) = match value.find(|c: char| !c.is_ascii_digit()) {
        Some(at) => value.split_at(at),
        None => (value, "s"),
    };
    let number: i64 = number.parse().ok()?;
    let unit = match unit {
        "ms" => 1,
        "s" => 1_000,
        "m" => 60 * 1_000,
        "h" => 3_600_000,
        "d" => 86_400_000,
        _ => return None,
    };
    number.checked_mul(unit).filter(|ms| *ms > 0)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn iso_8601_date_times_are_read_in_their_extended_forms() {
        let at = 1_705_329_000_000;
        for text in [
            "2024-01-15T14:30:00Z",
            "2024-01-15T14:30:00.000Z",
            "2024-01-15T14:30Z",
            "2024-01-15T14:30",
            "2024-01-15T14:30:00",
            "2024-01-15T16:30+02:00",
            "2024-01-15T16:30:00+0200",
            "2024-01-15T12:30-02",
        ] {
            assert_eq!(parse_date_time_ms(text), Some(at), "{text}");
        }
        for text in ["2024-01-15", "2024-01-15T25:00Z", "2024-01-15T14:30+2", "nope", "2024-01-15T14:30+02:0x", ""] {
            assert_eq!(parse_date_time_ms(text), None, "{text}");
        }
    }

    #[test]
    fn formats_with_milliseconds_and_z() {
        assert_eq!(iso_ms(1_705_329_000_123), "2024-01-15T14:30:00.123Z");
        assert_eq!(iso_ms(0), "1970-01-01T00:00:00.000Z");
    }
}
