//! A call's custom analysis, checked against its agent's post-call analysis fields
//! (`AgentSettings.post_call_analysis`): every name must be declared, and every value of the
//! declared type (a string, a number, a boolean, or a string among an enum's choices). A
//! declared field may be left out (the runtime could not tell); `null` is not a value of any
//! type, so leaving the field out is how "not known" is said. An agent without settings, or a
//! call without an agent, declares nothing: only `{}` passes.

use serde_json::{Map, Value};
use switchboard_kit::FieldViolation;
use switchboard_proto::v1::AnalysisField;

/// The custom values as a JSON object; empty text is `{}`.
pub fn parse(text: &str) -> Result<Map<String, Value>, FieldViolation> {
    if text.trim().is_empty() {
        return Ok(Map::new());
    }
    match serde_json::from_str::<Value>(text) {
        Ok(Value::Object(object)) => Ok(object),
        _ => Err(FieldViolation::new("analysis.custom", "must be a JSON object")),
    }
}

/// Every violation of `custom` against `fields`, each naming `analysis.custom.<name>`.
pub fn check(custom: &Map<String, Value>, fields: &[AnalysisField]) -> Vec<FieldViolation> {
    custom
        .iter()
        .filter_map(|(name, value)| {
            let field = format!("analysis.custom.{name}");
            let Some(declared) = fields.iter().find(|declared| declared.name == *name) else {
                return Some(FieldViolation::new(field, "is not a post-call analysis field of the call's agent"));
            };
            let fits = match declared.r#type.as_str() {
                "string" => value.is_string(),
                "number" => value.is_number(),
                "boolean" => value.is_boolean(),
                "enum" => value.as_str().is_some_and(|text| declared.choices.iter().any(|choice| choice == text)),
                // A type this service does not know cannot be checked: refuse rather than guess.
                _ => false,
            };
            (!fits).then(|| FieldViolation::new(field, expected(declared)))
        })
        .collect()
}

fn expected(field: &AnalysisField) -> String {
    match field.r#type.as_str() {
        "string" => "must be a string".to_owned(),
        "number" => "must be a number".to_owned(),
        "boolean" => "must be true or false".to_owned(),
        "enum" => format!("must be one of {}", field.choices.join(", ")),
        other => format!("has a type this service cannot check ({other})"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn field(name: &str, kind: &str, choices: &[&str]) -> AnalysisField {
        AnalysisField {
            name: name.into(),
            r#type: kind.into(),
            description: None,
            choices: choices.iter().map(|choice| (*choice).to_owned()).collect(),
        }
    }

    fn violations(text: &str, fields: &[AnalysisField]) -> Vec<(String, String)> {
        check(&parse(text).unwrap_or_default(), fields).into_iter().map(|v| (v.field, v.message)).collect()
    }

    #[test]
    fn values_of_the_declared_types_pass_and_fields_may_be_left_out() {
        let fields = [
            field("name", "string", &[]),
            field("age", "number", &[]),
            field("booked", "boolean", &[]),
            field("tier", "enum", &["gold", "silver"]),
        ];
        assert!(violations(r#"{"name": "Ada", "age": 36.5, "booked": true, "tier": "gold"}"#, &fields).is_empty());
        assert!(violations(r#"{"tier": "silver"}"#, &fields).is_empty());
        assert!(violations("", &[]).is_empty());
    }

    #[test]
    fn wrong_types_unknown_names_and_nulls_are_named() {
        let fields = [field("age", "number", &[]), field("tier", "enum", &["gold"])];
        let found = violations(r#"{"age": "36", "tier": "bronze", "mood": "ok", "x": null}"#, &fields);
        let names: Vec<&str> = found.iter().map(|(field, _)| field.as_str()).collect();
        assert_eq!(names, ["analysis.custom.age", "analysis.custom.tier", "analysis.custom.mood", "analysis.custom.x"]);
        assert_eq!(found[1].1, "must be one of gold");
    }

    #[test]
    fn only_objects_are_custom_values() {
        for text in ["[]", "3", "\"a\"", "{"] {
            assert_eq!(parse(text).unwrap_err().field, "analysis.custom");
        }
    }
}
