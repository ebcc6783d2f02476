//! Custom fields: a team's definitions (name, label, type, required, the options of a
//! select) and the checks a contact's values meet. A value is kept as compact JSON in
//! `contact_field_values`, one row per contact and field; a contact's `customFields` is the
//! object of its values keyed by field name.

use std::collections::HashSet;

use serde_json::{Map, Value};
use sqlx::any::AnyRow;
use sqlx::{AnyConnection, Row};
use switchboard_kit::db::{flag, is_unique_violation};
use switchboard_kit::limits;
use switchboard_kit::time::now_ms;
use switchboard_kit::{FieldViolation, ServiceError, ServiceResult, validate};
use switchboard_proto::v1::{CreateCustomFieldRequest, CustomField, CustomFieldSchema, UpdateCustomFieldRequest};

use super::{CrmStore, check_ids, field_not_found, uuid_violation};

/// The types a custom field may have.
pub const FIELD_TYPES: [&str; 5] = ["text", "number", "date", "boolean", "select"];

const FIELD_COLUMNS: &str = "f.id, f.name, f.label, f.type, f.required, f.options, f.created_at";

fn field_from_row(row: &AnyRow) -> ServiceResult<CustomField> {
    let options: String = row.try_get("options")?;
    let options: Vec<String> = serde_json::from_str(&options)
        .map_err(|error| ServiceError::internal(anyhow::Error::new(error).context("reading a field's options")))?;
    Ok(CustomField {
        id: row.try_get("id")?,
        name: row.try_get("name")?,
        label: row.try_get("label")?,
        r#type: row.try_get("type")?,
        required: row.try_get::<i64, _>("required")? != 0,
        options,
        created_at_ms: row.try_get("created_at")?,
    })
}

pub(super) fn schema(field: &CustomField) -> CustomFieldSchema {
    CustomFieldSchema {
        id: field.id.clone(),
        name: field.name.clone(),
        label: field.label.clone(),
        r#type: field.r#type.clone(),
        required: field.required,
    }
}

/// The team's fields in the order they were created.
pub(super) async fn team_fields(conn: &mut AnyConnection, team_id: &str) -> ServiceResult<Vec<CustomField>> {
    let sql = format!("SELECT {FIELD_COLUMNS} FROM custom_fields f WHERE f.team_id = $1 ORDER BY f.created_at, f.id");
    let rows = sqlx::query(&sql).bind(team_id).fetch_all(conn).await?;
    rows.iter().map(field_from_row).collect()
}

async fn find_field(conn: &mut AnyConnection, team_id: &str, field_id: &str, lock: &str) -> ServiceResult<CustomField> {
    let sql = format!("SELECT {FIELD_COLUMNS} FROM custom_fields f WHERE f.team_id = $1 AND f.id = $2{lock}");
    let row = sqlx::query(&sql).bind(team_id).bind(field_id).fetch_optional(conn).await?;
    row.as_ref().map(field_from_row).transpose()?.ok_or_else(field_not_found)
}

/// Why `value` is not a value of `field`, if it is not.
fn value_problem(field: &CustomField, value: &Value) -> Option<String> {
    match (field.r#type.as_str(), value) {
        ("text", Value::String(text)) => limits::FIELD_TEXT.check("", text).map(|violation| violation.message),
        ("text", _) => Some("must be a string".to_owned()),
        // serde_json numbers are finite: JSON has no NaN or infinity.
        ("number", Value::Number(_)) => None,
        ("number", _) => Some("must be a number".to_owned()),
        ("date", Value::String(text)) if is_date(text) => None,
        ("date", _) => Some("must be a date YYYY-MM-DD".to_owned()),
        ("boolean", Value::Bool(_)) => None,
        ("boolean", _) => Some("must be true or false".to_owned()),
        ("select", Value::String(text)) if field.options.contains(text) => None,
        ("select", _) => Some(format!("must be one of {}", field.options.join(", "))),
        _ => Some("has a type the store does not know".to_owned()),
    }
}

fn is_date(text: &str) -> bool {
    text.len() == 10 && chrono::NaiveDate::parse_from_str(text, "%Y-%m-%d").is_ok()
}

/// A contact's `customFields` as given: empty is `{}`.
pub(super) fn parse_object(text: &str) -> Result<Map<String, Value>, FieldViolation> {
    if text.trim().is_empty() {
        return Ok(Map::new());
    }
    match serde_json::from_str::<Value>(text) {
        Ok(Value::Object(object)) => Ok(object),
        _ => Err(FieldViolation::new("customFields", "must be a JSON object")),
    }
}

/// What a contact's values become: for each named field, its new value (compact JSON) or
/// `None` to remove it.
pub(super) type ValueChanges = Vec<(String, Option<String>)>;

/// Checks `given` against the team's `fields`: an unknown name, a value of the wrong type
/// and (when `creating`) a missing required field are violations of `customFields.<name>`.
/// A JSON null removes a value, which a required field refuses. Returns the changes by
/// field id.
pub(super) fn check_values(
    fields: &[CustomField],
    given: &Map<String, Value>,
    creating: bool,
    violations: &mut Vec<FieldViolation>,
) -> ValueChanges {
    let mut changes = Vec::with_capacity(given.len());
    for (name, value) in given {
        let field_name = format!("customFields.{name}");
        let Some(field) = fields.iter().find(|field| &field.name == name) else {
            violations.push(FieldViolation::new(field_name, "is not a custom field of the team"));
            continue;
        };
        // A blank text is no value: a required field refuses it as it refuses null.
        let blank = value.as_str().is_some_and(|text| text.trim().is_empty());
        if value.is_null() || (blank && field.required) {
            if field.required {
                violations.push(FieldViolation::new(field_name, "is required"));
            } else {
                changes.push((field.id.clone(), None));
            }
            continue;
        }
        match value_problem(field, value) {
            Some(problem) => violations.push(FieldViolation::new(field_name, problem)),
            None => changes.push((field.id.clone(), Some(value.to_string()))),
        }
    }
    if creating {
        for field in fields.iter().filter(|field| field.required && !given.contains_key(&field.name)) {
            violations.push(FieldViolation::new(format!("customFields.{}", field.name), "is required"));
        }
    }
    changes
}

fn options_violations(field_type: &str, options: &[String], violations: &mut Vec<FieldViolation>) {
    if field_type != "select" {
        if !options.is_empty() {
            violations.push(FieldViolation::new("options", "are only for a select"));
        }
        return;
    }
    let count = i64::try_from(options.len()).unwrap_or(i64::MAX);
    if limits::FIELD_OPTIONS.check("options", count).is_some() {
        let (min, max) = (limits::FIELD_OPTIONS.min, limits::FIELD_OPTIONS.max);
        violations.push(FieldViolation::new("options", format!("must list {min} to {max} options")));
    }
    let mut seen = HashSet::new();
    for (index, option) in options.iter().enumerate() {
        let field = format!("options[{index}]");
        violations.extend(limits::FIELD_OPTION.check(&field, option));
        if !seen.insert(option.as_str()) {
            violations.push(FieldViolation::new(field, "is listed twice"));
        }
    }
}

fn name_taken() -> ServiceError {
    ServiceError {
        details: vec![FieldViolation::new("name", "is already the name of another custom field")],
        ..ServiceError::conflict("A custom field with this name already exists")
    }
}

fn options_json(options: &[String]) -> ServiceResult<String> {
    serde_json::to_string(options).map_err(|error| ServiceError::internal(anyhow::Error::new(error)))
}

impl CrmStore {
    /// The team's custom fields in the order they were created.
    pub async fn list_custom_fields(&self, team_id: &str) -> ServiceResult<Vec<CustomField>> {
        check_ids(&[("teamId", team_id)])?;
        let mut conn = self.db.pool().acquire().await?;
        team_fields(&mut conn, team_id).await
    }

    /// A new field. Its name is unique in the team regardless of case; `options` are required
    /// exactly for a select; a team has at most `TEAM_FIELDS` fields (a conflict beyond).
    pub async fn create_custom_field(&self, request: &CreateCustomFieldRequest) -> ServiceResult<CustomField> {
        let mut violations: Vec<FieldViolation> = uuid_violation("teamId", &request.team_id).into_iter().collect();
        violations.extend(limits::FIELD_NAME.check("name", &request.name));
        if !request.name.is_empty() && !limits::is_field_name(&request.name) {
            violations
                .push(FieldViolation::new("name", "must start with a letter and hold only letters, digits and _"));
        }
        violations.extend(limits::FIELD_LABEL.check("label", &request.label));
        if !FIELD_TYPES.contains(&request.r#type.as_str()) {
            violations.push(FieldViolation::new("type", format!("must be one of {}", FIELD_TYPES.join(", "))));
        } else {
            options_violations(&request.r#type, &request.options, &mut violations);
        }
        validate(violations.into_iter().map(Some))?;

        let mut tx = self.db.begin_write().await?;
        let key = request.name.to_lowercase();
        let fields = team_fields(&mut tx, &request.team_id).await?;
        if fields.iter().any(|field| field.name.to_lowercase() == key) {
            return Err(name_taken());
        }
        if i64::try_from(fields.len()).unwrap_or(i64::MAX) >= limits::TEAM_FIELDS {
            return Err(ServiceError::conflict(format!(
                "A team can have at most {} custom fields",
                limits::TEAM_FIELDS
            )));
        }
        let now = now_ms();
        let field = CustomField {
            id: uuid::Uuid::now_v7().to_string(),
            name: request.name.clone(),
            label: request.label.clone(),
            r#type: request.r#type.clone(),
            required: request.required,
            options: request.options.clone(),
            created_at_ms: now,
        };
        sqlx::query(
            "INSERT INTO custom_fields (id, team_id, name, name_key, label, type, required, options, created_at, \
             updated_at) VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $9)",
        )
        .bind(field.id.as_str())
        .bind(request.team_id.as_str())
        .bind(field.name.as_str())
        .bind(key.as_str())
        .bind(field.label.as_str())
        .bind(field.r#type.as_str())
        .bind(flag(field.required))
        .bind(options_json(&field.options)?)
        .bind(now)
        .execute(&mut *tx)
        .await
        .map_err(|error| if is_unique_violation(&error) { name_taken() } else { error.into() })?;
        tx.commit().await?;
        Ok(field)
    }

    /// Changes a field's label, required flag or (for a select) options. Its name and type
    /// cannot change: they are what the values mean. Removing an option that a contact has
    /// is a conflict. Making a field required does not touch the contacts without a value:
    /// it is demanded of new contacts, and no update may remove it.
    pub async fn update_custom_field(&self, request: &UpdateCustomFieldRequest) -> ServiceResult<CustomField> {
        check_ids(&[("teamId", &request.team_id), ("fieldId", &request.field_id)])?;
        let mut tx = self.db.begin_write().await?;
        let mut field = find_field(&mut tx, &request.team_id, &request.field_id, self.db.for_update()).await?;
        let mut violations: Vec<FieldViolation> =
            request.label.as_deref().and_then(|label| limits::FIELD_LABEL.check("label", label)).into_iter().collect();
        if let Some(options) = &request.options {
            options_violations(&field.r#type, &options.options, &mut violations);
        }
        validate(violations.into_iter().map(Some))?;
        if let Some(options) = &request.options {
            let removed = field.options.iter().filter(|option| !options.options.contains(option));
            for option in removed {
                let used =
                    sqlx::query("SELECT COUNT(*) AS n FROM contact_field_values WHERE field_id = $1 AND value = $2")
                        .bind(field.id.as_str())
                        .bind(Value::String(option.clone()).to_string())
                        .fetch_one(&mut *tx)
                        .await?
                        .try_get::<i64, _>("n")?;
                if used > 0 {
                    return Err(ServiceError {
                        details: vec![FieldViolation::new(
                            "options",
                            format!("{option:?} is the value of {used} contacts"),
                        )],
                        ..ServiceError::conflict("An option that contacts have cannot be removed")
                    });
                }
            }
            field.options.clone_from(&options.options);
        }
        if let Some(label) = &request.label {
            field.label.clone_from(label);
        }
        if let Some(required) = request.required {
            field.required = required;
        }
        sqlx::query("UPDATE custom_fields SET label = $1, required = $2, options = $3, updated_at = $4 WHERE id = $5")
            .bind(field.label.as_str())
            .bind(flag(field.required))
            .bind(options_json(&field.options)?)
            .bind(now_ms())
            .bind(field.id.as_str())
            .execute(&mut *tx)
            .await?;
        tx.commit().await?;
        Ok(field)
    }

    /// Deletes the field and its values on every contact. Returns it as it was.
    pub async fn delete_custom_field(&self, team_id: &str, field_id: &str) -> ServiceResult<CustomField> {
        check_ids(&[("teamId", team_id), ("fieldId", field_id)])?;
        let mut tx = self.db.begin_write().await?;
        let field = find_field(&mut tx, team_id, field_id, self.db.for_update()).await?;
        sqlx::query("DELETE FROM contact_field_values WHERE field_id = $1").bind(field_id).execute(&mut *tx).await?;
        sqlx::query("DELETE FROM custom_fields WHERE id = $1 AND team_id = $2")
            .bind(field_id)
            .bind(team_id)
            .execute(&mut *tx)
            .await?;
        tx.commit().await?;
        Ok(field)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn field(kind: &str, options: &[&str]) -> CustomField {
        CustomField {
            id: "f".into(),
            name: "x".into(),
            r#type: kind.into(),
            options: options.iter().map(|o| (*o).to_owned()).collect(),
            ..CustomField::default()
        }
    }

    #[test]
    fn values_are_checked_against_their_type() {
        let ok = |kind: &str, value: Value| value_problem(&field(kind, &["a", "b"]), &value).is_none();
        assert!(ok("text", Value::from("hello")));
        assert!(!ok("text", Value::from(5)));
        assert!(!ok("text", Value::from("x".repeat(5001))));
        assert!(ok("number", serde_json::json!(2.5)));
        assert!(!ok("number", Value::from("2.5")));
        assert!(ok("date", Value::from("2024-02-29")));
        assert!(!ok("date", Value::from("2023-02-29")));
        assert!(!ok("date", Value::from("2024-2-9")));
        assert!(ok("boolean", Value::from(false)));
        assert!(!ok("boolean", Value::from("true")));
        assert!(ok("select", Value::from("b")));
        assert!(!ok("select", Value::from("c")));
    }
}
