//! Every bound on what clients send, written once. The gateway's request types take their
//! JSON Schema (and so their validation and the OpenAPI description) from these constants, and
//! the services check the same constants, so an internal gRPC caller meets the same rules.

use crate::FieldViolation;

/// A text length in Unicode characters (what the spec counts, not bytes). A text with a
/// minimum of 1 must also not be blank; no text may hold NUL, which PostgreSQL cannot store.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Length {
    pub min: usize,
    pub max: usize,
}

impl Length {
    pub const fn new(min: usize, max: usize) -> Self {
        Self { min, max }
    }

    /// What a violation says, e.g. "must be 1 to 255 characters".
    pub fn message(self) -> String {
        if self.min == 0 {
            format!("must be at most {} characters", self.max)
        } else {
            format!("must be {} to {} characters", self.min, self.max)
        }
    }

    /// The violation of `value`, if any.
    pub fn check(self, field: &str, value: &str) -> Option<FieldViolation> {
        let chars = value.chars().count();
        if chars < self.min || chars > self.max {
            Some(FieldViolation::new(field, self.message()))
        } else if self.min > 0 && value.trim().is_empty() {
            Some(FieldViolation::new(field, "must not be blank"))
        } else if value.contains('\0') {
            Some(FieldViolation::new(field, NUL_MESSAGE))
        } else {
            None
        }
    }
}

pub const NUL_MESSAGE: &str = "must not contain NUL characters";

/// Deliberately simple: one `@`, a non-empty local part, a dotted domain, no spaces, at most
/// [`EMAIL`] long.
pub fn is_email(value: &str) -> bool {
    let Some((local, domain)) = value.split_once('@') else {
        return false;
    };
    value.chars().count() <= EMAIL.max
        && !local.is_empty()
        && !domain.contains('@')
        && domain.contains('.')
        && !domain.starts_with('.')
        && !domain.ends_with('.')
        && !value.chars().any(char::is_whitespace)
}

/// A whole number in `min..=max`, `default` when not given.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Count {
    pub min: i64,
    pub max: i64,
    pub default: i64,
}

impl Count {
    pub fn message(self) -> String {
        format!("must be an integer from {} to {}", self.min, self.max)
    }

    pub fn check(self, field: &str, value: i64) -> Option<FieldViolation> {
        (!(self.min..=self.max).contains(&value)).then(|| FieldViolation::new(field, self.message()))
    }
}

/// A number in `min..=max`, `default` when not given.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Fraction {
    pub min: f64,
    pub max: f64,
    pub default: f64,
}

impl Fraction {
    pub fn message(self) -> String {
        format!("must be a number from {} to {}", self.min, self.max)
    }

    pub fn check(self, field: &str, value: f64) -> Option<FieldViolation> {
        (!value.is_finite() || !(self.min..=self.max).contains(&value))
            .then(|| FieldViolation::new(field, self.message()))
    }
}

/// Names of agents, knowledge bases, documents and webpages.
pub const NAME: Length = Length::new(1, 255);
/// Descriptions of agents and knowledge bases.
pub const DESCRIPTION: Length = Length::new(0, 5000);
/// An agent's instructions (its system prompt).
pub const INSTRUCTIONS: Length = Length::new(1, 100_000);
pub const QUESTION: Length = Length::new(1, 5000);
pub const ANSWER: Length = Length::new(1, 50_000);
/// Notes of documents and webpages, shown to the AI beside them.
pub const NOTES: Length = Length::new(0, 5000);
pub const URL: Length = Length::new(1, 2048);
pub const SEARCH_QUERY: Length = Length::new(1, 2000);
pub const SEARCH_LIMIT: Count = Count { min: 1, max: 50, default: 10 };
/// The least cosine similarity a search result must reach.
pub const SEARCH_THRESHOLD: Fraction = Fraction { min: 0.0, max: 1.0, default: 0.1 };
/// What one search costs.
pub const SEARCH_CREDITS: i64 = 1;
/// A subteam's name and its first user's names (the hosted product's rule).
pub const SUBTEAM_NAME: Length = Length::new(1, 50);
pub const PERSON_NAME: Length = Length::new(1, 50);
pub const EMAIL: Length = Length::new(3, 254);
/// Credits a subteam receives each month, drawn from its agency.
pub const MONTHLY_CREDITS: Count = Count { min: 0, max: 1_000_000_000, default: 1000 };
/// An API key's label.
pub const KEY_NAME: Length = Length::new(1, 100);
/// A team's name, as operators create teams.
pub const TEAM_NAME: Length = Length::new(1, 100);
/// Paged lists: `page` from 1, `limit` 1 to 100 (default 20).
pub const PAGE: Count = Count { min: 1, max: 1_000_000, default: 1 };
pub const PAGE_LIMIT: Count = Count { min: 1, max: 100, default: 20 };

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lengths_count_characters_and_refuse_blank_and_nul() {
        assert!(NAME.check("name", &"ü".repeat(255)).is_none());
        assert_eq!(NAME.check("name", &"ü".repeat(256)).unwrap().message, "must be 1 to 255 characters");
        assert_eq!(NAME.check("name", "   ").unwrap().message, "must not be blank");
        assert_eq!(NOTES.check("notes", "a\0b").unwrap().message, NUL_MESSAGE);
        assert!(NOTES.check("notes", "").is_none());
        assert_eq!(NOTES.message(), "must be at most 5000 characters");
    }

    #[test]
    fn numbers_are_bounded() {
        assert!(SEARCH_LIMIT.check("limit", 50).is_none());
        assert_eq!(SEARCH_LIMIT.check("limit", 51).unwrap().message, "must be an integer from 1 to 50");
        assert!(SEARCH_THRESHOLD.check("threshold", f64::NAN).is_some());
        assert!(SEARCH_THRESHOLD.check("threshold", 1.0).is_none());
    }
}
