//! Checks on what internal callers send; the gateway checks public input before it gets here,
//! but other gRPC consumers reach the service directly.

use switchboard_kit::{FieldViolation, ServiceError, ServiceResult};

pub fn text(field: &str, value: &str, max_chars: usize) -> Option<FieldViolation> {
    let chars = value.trim().chars().count();
    if chars == 0 || value.chars().count() > max_chars {
        Some(FieldViolation::new(field, format!("must be 1 to {max_chars} characters")))
    } else {
        None
    }
}

pub fn email(field: &str, value: &str) -> Option<FieldViolation> {
    if is_email(value) { None } else { Some(FieldViolation::new(field, "must be a valid e-mail address")) }
}

/// Deliberately simple: one `@`, a non-empty local part, a dotted domain, no spaces.
pub fn is_email(value: &str) -> bool {
    let Some((local, domain)) = value.split_once('@') else {
        return false;
    };
    value.len() <= 254
        && !local.is_empty()
        && !domain.contains('@')
        && domain.contains('.')
        && !domain.starts_with('.')
        && !domain.ends_with('.')
        && !value.chars().any(char::is_whitespace)
}

pub fn positive(field: &str, value: i64) -> Option<FieldViolation> {
    (value <= 0).then(|| FieldViolation::new(field, "must be a positive integer"))
}

pub fn uuid(field: &str, value: &str) -> Option<FieldViolation> {
    uuid::Uuid::parse_str(value).is_err().then(|| FieldViolation::new(field, "must be a UUID"))
}

/// Fails with every violation found, or passes when there are none.
pub fn all(violations: impl IntoIterator<Item = Option<FieldViolation>>) -> ServiceResult<()> {
    let found: Vec<FieldViolation> = violations.into_iter().flatten().collect();
    if found.is_empty() { Ok(()) } else { Err(ServiceError::validation(found)) }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn emails() {
        assert!(is_email("ada@example.com"));
        for bad in ["", "ada", "ada@", "@example.com", "ada@example", "a da@example.com", "a@b@c.d"] {
            assert!(!is_email(bad), "{bad}");
        }
    }

    #[test]
    fn text_counts_characters_not_bytes() {
        assert!(text("name", "ééé", 3).is_none());
        assert!(text("name", "éééé", 3).is_some());
        assert!(text("name", "   ", 3).is_some());
    }
}
