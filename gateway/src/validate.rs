//! Checks of client input that collect every problem before answering, so that one 400
//! lists all fields at fault as `details: [{field, message}]`.

use serde_json::{Map, Value};
use switchboard_kit::{ErrorKind, FieldViolation, ServiceError, ServiceResult};
use switchboard_proto::v1::PageRequest;

/// A field that may be absent (keep the current value), `null` (clear it) or set.
#[derive(Debug, Clone, PartialEq)]
pub enum Patch<T> {
    Absent,
    Null,
    Value(T),
}

pub struct Fields<'a> {
    map: &'a Map<String, Value>,
    violations: Vec<FieldViolation>,
}

/// A UUID in the form ids are stored in (lowercase, hyphenated), from any spelling that names
/// the same UUID (uppercase, without hyphens, `urn:uuid:`); `None` when it is not a UUID.
pub fn canonical_uuid(text: &str) -> Option<String> {
    uuid::Uuid::parse_str(text).ok().map(|id| id.to_string())
}

fn length_message(min: usize, max: usize) -> String {
    if min == 0 { format!("must be at most {max} characters") } else { format!("must be {min} to {max} characters") }
}

/// Length in Unicode characters, as the spec counts, not bytes.
fn check_length(value: &str, min: usize, max: usize) -> Option<String> {
    let chars = value.chars().count();
    if chars < min || chars > max {
        Some(length_message(min, max))
    } else if min > 0 && value.trim().is_empty() {
        Some("must not be blank".to_owned())
    } else if value.contains('\0') {
        // PostgreSQL text cannot hold NUL; refusing it on both engines keeps them alike.
        Some("must not contain NUL characters".to_owned())
    } else {
        None
    }
}

impl<'a> Fields<'a> {
    pub fn of(body: &'a Value) -> ServiceResult<Self> {
        match body {
            Value::Object(map) => Ok(Self { map, violations: Vec::new() }),
            _ => Err(ServiceError::new(ErrorKind::MalformedJson, "Request body must be a JSON object")),
        }
    }

    pub fn violation(&mut self, field: &str, message: impl Into<String>) {
        self.violations.push(FieldViolation::new(field, message));
    }

    pub fn has(&self, name: &str) -> bool {
        self.map.contains_key(name)
    }

    /// A string that must be present, `min..=max` characters long.
    pub fn required_text(&mut self, name: &str, min: usize, max: usize) -> String {
        match self.map.get(name) {
            None | Some(Value::Null) => {
                self.violation(name, "is required");
                String::new()
            }
            Some(value) => self.text_value(name, value, min, max).unwrap_or_default(),
        }
    }

    /// A string that may be absent (or `null`); when present, `min..=max` characters.
    pub fn optional_text(&mut self, name: &str, min: usize, max: usize) -> Option<String> {
        match self.nullable_text(name, min, max) {
            Patch::Value(value) => Some(value),
            Patch::Absent | Patch::Null => None,
        }
    }

    pub fn nullable_text(&mut self, name: &str, min: usize, max: usize) -> Patch<String> {
        match self.map.get(name) {
            None => Patch::Absent,
            Some(Value::Null) => Patch::Null,
            Some(value) => match self.text_value(name, value, min, max) {
                Some(text) => Patch::Value(text),
                None => Patch::Absent,
            },
        }
    }

    fn text_value(&mut self, name: &str, value: &Value, min: usize, max: usize) -> Option<String> {
        let Value::String(text) = value else {
            self.violation(name, "must be a string");
            return None;
        };
        if let Some(message) = check_length(text, min, max) {
            self.violation(name, message);
            return None;
        }
        Some(text.clone())
    }

    /// A UUID string that may be absent or `null`.
    pub fn nullable_uuid(&mut self, name: &str) -> Patch<String> {
        match self.nullable_text(name, 1, 64) {
            Patch::Value(id) => match canonical_uuid(&id) {
                Some(id) => Patch::Value(id),
                None => {
                    self.violation(name, "must be a UUID");
                    Patch::Absent
                }
            },
            other => other,
        }
    }

    pub fn optional_email(&mut self, name: &str) -> Option<String> {
        let value = self.optional_text(name, 1, 254)?;
        if is_email(&value) {
            Some(value)
        } else {
            self.violation(name, "must be a valid e-mail address");
            None
        }
    }

    pub fn required_email(&mut self, name: &str) -> String {
        if !self.has(name) || self.map.get(name).is_some_and(Value::is_null) {
            self.violation(name, "is required");
            return String::new();
        }
        self.optional_email(name).unwrap_or_default()
    }

    /// A whole number in `min..=max`; JSON numbers with a fraction are refused.
    pub fn optional_int(&mut self, name: &str, min: i64, max: i64) -> Option<i64> {
        match self.map.get(name) {
            None | Some(Value::Null) => None,
            Some(value) => match value.as_i64() {
                Some(n) if (min..=max).contains(&n) => Some(n),
                _ => {
                    self.violation(name, format!("must be an integer from {min} to {max}"));
                    None
                }
            },
        }
    }

    pub fn optional_bool(&mut self, name: &str) -> Option<bool> {
        match self.map.get(name) {
            None | Some(Value::Null) => None,
            Some(Value::Bool(b)) => Some(*b),
            Some(_) => {
                self.violation(name, "must be a boolean");
                None
            }
        }
    }

    /// An object whose members must all be booleans and belong to `allowed`.
    pub fn optional_flags(&mut self, name: &str, allowed: &[&str]) -> Option<Vec<(String, bool)>> {
        let object = match self.map.get(name) {
            None | Some(Value::Null) => return None,
            Some(Value::Object(object)) => object,
            Some(_) => {
                self.violation(name, "must be an object of booleans");
                return None;
            }
        };
        let mut flags = Vec::new();
        for (key, value) in object {
            let field = format!("{name}.{key}");
            if !allowed.contains(&key.as_str()) {
                self.violation(&field, format!("is not one of {}", allowed.join(", ")));
            } else if let Value::Bool(flag) = value {
                flags.push((key.clone(), *flag));
            } else {
                self.violation(&field, "must be a boolean");
            }
        }
        Some(flags)
    }

    pub fn finish(self) -> ServiceResult<()> {
        if self.violations.is_empty() { Ok(()) } else { Err(ServiceError::validation(self.violations)) }
    }
}

pub fn is_email(value: &str) -> bool {
    let Some((local, domain)) = value.split_once('@') else {
        return false;
    };
    !local.is_empty()
        && !domain.contains('@')
        && domain.contains('.')
        && !domain.starts_with('.')
        && !domain.ends_with('.')
        && !value.chars().any(char::is_whitespace)
}

/// Query-string parameters, checked the same way.
pub struct Query<'a> {
    pairs: &'a [(String, String)],
    violations: Vec<FieldViolation>,
}

impl<'a> Query<'a> {
    pub fn new(pairs: &'a [(String, String)]) -> Self {
        Self { pairs, violations: Vec::new() }
    }

    pub fn raw(&self, name: &str) -> Option<&'a str> {
        self.pairs.iter().find(|(key, _)| key == name).map(|(_, value)| value.as_str())
    }

    fn violation(&mut self, field: &str, message: impl Into<String>) {
        self.violations.push(FieldViolation::new(field, message));
    }

    pub fn required_text(&mut self, name: &str, min: usize, max: usize) -> String {
        match self.raw(name) {
            None => {
                self.violation(name, "is required");
                String::new()
            }
            Some(value) => match check_length(value, min, max) {
                Some(message) => {
                    self.violation(name, message);
                    String::new()
                }
                None => value.to_owned(),
            },
        }
    }

    pub fn optional_text(&mut self, name: &str, max: usize) -> Option<String> {
        let value = self.raw(name).filter(|v| !v.is_empty())?;
        match check_length(value, 1, max) {
            Some(message) => {
                self.violation(name, message);
                None
            }
            None => Some(value.to_owned()),
        }
    }

    pub fn int(&mut self, name: &str, min: i64, max: i64, default: i64) -> i64 {
        let Some(raw) = self.raw(name) else {
            return default;
        };
        match raw.trim().parse::<i64>() {
            Ok(n) if (min..=max).contains(&n) => n,
            _ => {
                self.violation(name, format!("must be an integer from {min} to {max}"));
                default
            }
        }
    }

    pub fn number(&mut self, name: &str, min: f64, max: f64, default: f64) -> f64 {
        let Some(raw) = self.raw(name) else {
            return default;
        };
        match raw.trim().parse::<f64>() {
            Ok(n) if n.is_finite() && (min..=max).contains(&n) => n,
            _ => {
                self.violation(name, format!("must be a number from {min} to {max}"));
                default
            }
        }
    }

    pub fn one_of(&mut self, name: &str, allowed: &[&str], default: &'static str) -> String {
        match self.raw(name) {
            None => default.to_owned(),
            Some(value) if allowed.contains(&value) => value.to_owned(),
            Some(_) => {
                self.violation(name, format!("must be one of {}", allowed.join(", ")));
                default.to_owned()
            }
        }
    }

    /// The hosted list parameters: `page` (from 1), `limit` (1 to 100, default 20),
    /// `sortBy` (one of `sort_fields`, the first by default), `sortOrder` (`asc` | `desc`,
    /// default `desc`).
    pub fn pagination(&mut self, sort_fields: &[&'static str]) -> PageRequest {
        let page = self.int("page", 1, 1_000_000, 1);
        let limit = self.int("limit", 1, 100, 20);
        let sort_by = self.one_of("sortBy", sort_fields, sort_fields.first().copied().unwrap_or("createdAt"));
        let order = self.one_of("sortOrder", &["asc", "desc"], "desc");
        PageRequest {
            page: u32::try_from(page).unwrap_or(1),
            limit: u32::try_from(limit).unwrap_or(20),
            sort_by,
            ascending: order == "asc",
        }
    }

    pub fn finish(self) -> ServiceResult<()> {
        if self.violations.is_empty() { Ok(()) } else { Err(ServiceError::validation(self.violations)) }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn every_problem_is_reported_at_once() {
        let body = json!({ "question": "", "answer": 5, "extra": true });
        let mut fields = Fields::of(&body).unwrap();
        fields.required_text("question", 1, 5000);
        fields.required_text("answer", 1, 50000);
        fields.required_text("missing", 1, 10);
        let error = fields.finish().unwrap_err();
        let fields: Vec<_> = error.details.iter().map(|d| d.field.as_str()).collect();
        assert_eq!(fields, ["question", "answer", "missing"]);
    }

    #[test]
    fn lengths_are_unicode_characters() {
        let body = json!({ "name": "ü".repeat(255) });
        let mut fields = Fields::of(&body).unwrap();
        assert_eq!(fields.required_text("name", 1, 255).chars().count(), 255);
        assert!(fields.finish().is_ok());
        let body = json!({ "name": "ü".repeat(256) });
        let mut fields = Fields::of(&body).unwrap();
        fields.required_text("name", 1, 255);
        assert!(fields.finish().is_err());
    }

    #[test]
    fn null_is_distinct_from_absent() {
        let body = json!({ "knowledgebaseId": null });
        let mut fields = Fields::of(&body).unwrap();
        assert_eq!(fields.nullable_uuid("knowledgebaseId"), Patch::Null);
        assert_eq!(fields.nullable_uuid("other"), Patch::Absent);
    }

    #[test]
    fn query_numbers_are_bounded() {
        let pairs = vec![("limit".to_owned(), "51".to_owned()), ("threshold".to_owned(), "0.5".to_owned())];
        let mut query = Query::new(&pairs);
        assert_eq!(query.int("limit", 1, 50, 10), 10);
        assert!((query.number("threshold", 0.0, 1.0, 0.1) - 0.5).abs() < f64::EPSILON);
        assert_eq!(query.finish().unwrap_err().details[0].field, "limit");
    }

    #[test]
    fn non_objects_are_refused() {
        assert!(Fields::of(&json!([1, 2])).is_err());
    }
}
