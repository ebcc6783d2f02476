//! A tool's `parameters` is the JSON Schema a model fills the call's arguments in by. It is
//! checked here for the keywords function-calling APIs read (types, properties, required,
//! enum, items, combinators, bounds): each must have the shape the JSON Schema specification
//! gives it, so that a typo such as `"type": "text"` or `"required": "city"` is refused when
//! it is saved rather than when a runtime hands it to a model. Unknown keywords are allowed, as
//! the specification allows them. The choice against a metaschema validator crate is in
//! docs/api-decisions.md.

use serde_json::{Map, Value};

const TYPES: [&str; 7] = ["null", "boolean", "object", "array", "number", "string", "integer"];
/// Deeper schemas than this are refused: no function takes arguments nested so far.
const MAX_DEPTH: usize = 32;

/// Why `text` is not the JSON Schema of a function's arguments, if it is not.
pub fn parameters_problem(text: &str) -> Option<String> {
    let value: Value = match serde_json::from_str(text) {
        Ok(value) => value,
        Err(error) => return Some(format!("must be JSON: {error}")),
    };
    let Some(root) = value.as_object() else {
        return Some("must be a JSON Schema object".to_owned());
    };
    if root.get("type").and_then(Value::as_str) != Some("object") {
        return Some("must be a schema of type \"object\" (the function's named arguments)".to_owned());
    }
    schema_problem(&value, "", 0).map(|problem| format!("is not a valid JSON Schema: {problem}"))
}

fn schema_problem(schema: &Value, path: &str, depth: usize) -> Option<String> {
    if depth > MAX_DEPTH {
        return Some(format!("{} nests deeper than {MAX_DEPTH} levels", at(path)));
    }
    let schema = match schema {
        Value::Bool(_) => return None,
        Value::Object(schema) => schema,
        _ => return Some(format!("{} must be a schema (an object or a boolean)", at(path))),
    };
    for (keyword, value) in schema {
        let here = join(path, keyword);
        if let Some(problem) = keyword_problem(keyword, value, &here, depth) {
            return Some(problem);
        }
    }
    None
}

fn keyword_problem(keyword: &str, value: &Value, here: &str, depth: usize) -> Option<String> {
    match keyword {
        "type" => type_problem(value, here),
        "properties" | "patternProperties" | "$defs" | "definitions" => {
            let Some(members) = value.as_object() else {
                return Some(format!("{here} must be an object of schemas"));
            };
            members.iter().find_map(|(name, schema)| schema_problem(schema, &join(here, name), depth + 1))
        }
        "items" => match value {
            Value::Array(schemas) => schemas_problem(schemas, here, depth),
            schema => schema_problem(schema, here, depth + 1),
        },
        "additionalProperties" | "additionalItems" | "not" | "contains" | "propertyNames" | "if" | "then" | "else" => {
            schema_problem(value, here, depth + 1)
        }
        "anyOf" | "oneOf" | "allOf" | "prefixItems" => match value.as_array() {
            Some(schemas) if !schemas.is_empty() => schemas_problem(schemas, here, depth),
            _ => Some(format!("{here} must be a non-empty array of schemas")),
        },
        "required" => names_problem(value, here),
        "enum" => match value.as_array() {
            Some(values) if !values.is_empty() => None,
            _ => Some(format!("{here} must be a non-empty array")),
        },
        "minimum" | "maximum" | "exclusiveMinimum" | "exclusiveMaximum" => {
            (!value.is_number() && !value.is_boolean()).then(|| format!("{here} must be a number"))
        }
        "multipleOf" => (!value.as_f64().is_some_and(|n| n > 0.0)).then(|| format!("{here} must be a number above 0")),
        "minLength" | "maxLength" | "minItems" | "maxItems" | "minProperties" | "maxProperties" => {
            value.as_u64().is_none().then(|| format!("{here} must be a non-negative integer"))
        }
        "uniqueItems" => (!value.is_boolean()).then(|| format!("{here} must be true or false")),
        "title" | "description" | "format" | "pattern" | "$ref" | "$schema" | "$id" => {
            (!value.is_string()).then(|| format!("{here} must be a string"))
        }
        _ => None,
    }
}

fn type_problem(value: &Value, here: &str) -> Option<String> {
    let known = |kind: &Value| kind.as_str().is_some_and(|kind| TYPES.contains(&kind));
    let fine = match value {
        Value::Array(kinds) => !kinds.is_empty() && kinds.iter().all(known) && unique(kinds),
        kind => known(kind),
    };
    (!fine).then(|| format!("{here} must be one of {} (or a list of them)", TYPES.join(", ")))
}

fn names_problem(value: &Value, here: &str) -> Option<String> {
    match value.as_array() {
        Some(names) if names.iter().all(Value::is_string) && unique(names) => None,
        _ => Some(format!("{here} must be an array of distinct property names")),
    }
}

fn schemas_problem(schemas: &[Value], here: &str, depth: usize) -> Option<String> {
    schemas
        .iter()
        .enumerate()
        .find_map(|(index, schema)| schema_problem(schema, &format!("{here}[{index}]"), depth + 1))
}

fn unique(values: &[Value]) -> bool {
    values.iter().enumerate().all(|(index, value)| !values[..index].contains(value))
}

fn join(path: &str, name: &str) -> String {
    if path.is_empty() { name.to_owned() } else { format!("{path}.{name}") }
}

fn at(path: &str) -> &str {
    if path.is_empty() { "the schema" } else { path }
}

/// The schema as compact JSON text, members in the order given.
pub fn compact(text: &str) -> String {
    serde_json::from_str::<Map<String, Value>>(text)
        .ok()
        .and_then(|value| serde_json::to_string(&value).ok())
        .unwrap_or_else(|| text.to_owned())
}

#[cfg(test)]
mod tests {
    use super::parameters_problem;

    #[test]
    fn a_function_schema_passes() {
        let schema = r#"{"type":"object","properties":{"city":{"type":"string","description":"City"},
            "days":{"type":"integer","minimum":1,"maximum":14},"units":{"enum":["c","f"]},
            "stops":{"type":"array","items":{"type":"string"}}},"required":["city"],"additionalProperties":false}"#;
        assert_eq!(parameters_problem(schema), None);
    }

    #[test]
    fn mistakes_are_named() {
        let cases = [
            ("[]", "must be a JSON Schema object"),
            ("{\"type\":\"string\"}", "of type \"object\""),
            (
                "{\"type\":\"object\",\"properties\":{\"city\":{\"type\":\"text\"}}}",
                "properties.city.type must be one of",
            ),
            ("{\"type\":\"object\",\"required\":\"city\"}", "required must be an array"),
            (
                "{\"type\":\"object\",\"properties\":{\"a\":{\"enum\":[]}}}",
                "properties.a.enum must be a non-empty array",
            ),
            ("{\"type\":\"object\",\"properties\":{\"a\":{\"minLength\":-1}}}", "properties.a.minLength must be"),
            ("{\"type\":", "must be JSON"),
        ];
        for (schema, expected) in cases {
            let problem = parameters_problem(schema).unwrap_or_default();
            assert!(problem.contains(expected), "{schema}: {problem}");
        }
    }
}
