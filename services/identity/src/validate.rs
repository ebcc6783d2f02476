//! Checks on what internal callers send; the gateway checks public input before it gets here,
//! but other gRPC consumers reach the service directly.

use switchboard_kit::FieldViolation;

pub fn email(field: &str, value: &str) -> Option<FieldViolation> {
    if is_email(value) { None } else { Some(FieldViolation::new(field, "must be a valid e-mail address")) }
}

pub use switchboard_kit::limits::is_email;

pub fn positive(field: &str, value: i64) -> Option<FieldViolation> {
    (value <= 0).then(|| FieldViolation::new(field, "must be a positive integer"))
}

pub fn uuid(field: &str, value: &str) -> Option<FieldViolation> {
    uuid::Uuid::parse_str(value).is_err().then(|| FieldViolation::new(field, "must be a UUID"))
}

pub use switchboard_kit::validate as all;

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
}
