//! The rules a contact's own values follow, shared by create, update and the list's filters,
//! so that a value refused by one is refused by all, with the same public field names.

use switchboard_kit::FieldViolation;
use switchboard_kit::limits::{self, Length};

use crate::store::{CrmStore, count_violation, id_list_violations};

/// A name or carrier as given: trimmed, and empty is none.
pub(super) fn text_value(
    field: &str,
    value: &str,
    length: Length,
    violations: &mut Vec<FieldViolation>,
) -> Option<String> {
    let value = value.trim();
    if value.is_empty() {
        return None;
    }
    match length.check(field, value) {
        Some(violation) => {
            violations.push(violation);
            None
        }
        None => Some(value.to_owned()),
    }
}

/// An e-mail as given: trimmed and lowercased, and empty is none.
pub(super) fn email_value(value: &str, violations: &mut Vec<FieldViolation>) -> Option<String> {
    let value = value.trim().to_lowercase();
    if value.is_empty() {
        return None;
    }
    if !limits::is_email(&value) || value.contains('\0') {
        violations.push(FieldViolation::new("email", "must be an e-mail address"));
        return None;
    }
    Some(value)
}

/// Checks a tag selection (ids and names, of a create or an update) for violations.
pub(super) fn tag_violations(tag_ids: &[String], tag_names: &[String], violations: &mut Vec<FieldViolation>) {
    violations.extend(id_list_violations("tagIds", tag_ids));
    violations.extend(count_violation("tagNames", tag_names.len()));
    for (index, name) in tag_names.iter().enumerate() {
        violations.extend(limits::TAG_NAME.check(&format!("tagNames[{index}]"), name.trim()));
    }
}

impl CrmStore {
    /// A number as given, in E.164; a missing one is a violation.
    pub(super) fn number_value(&self, value: &str, violations: &mut Vec<FieldViolation>) -> Option<String> {
        if value.trim().is_empty() {
            violations.push(FieldViolation::new("number", "is required"));
            return None;
        }
        match self.phone.normalise(value) {
            Ok(number) => Some(number),
            Err(message) => {
                violations.push(FieldViolation::new("number", message));
                None
            }
        }
    }
}
