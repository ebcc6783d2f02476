//! Validation from the schema: a request's path, query and body are checked against the JSON
//! Schema derived from their Rust types (the schema the OpenAPI description publishes), and
//! every violation is reported at once as `{field, message}`.
//!
//! It reads the keywords schemars emits for our types: `type` (one or several), `enum`,
//! `const`, `format` (`uuid`, `email`, `date-time`), `minLength`/`maxLength`, `minimum`/
//! `maximum`, `properties`/`required`/`additionalProperties`, `items`/`minItems`/`maxItems` and
//! `anyOf`/`oneOf`. Two rules hold for every string whatever its schema says, and the schema
//! says them too as a `pattern` (see [`super::schema`]): a string with a minimum length must not
//! be blank, and no string may hold NUL (PostgreSQL cannot store it). The only other pattern is
//! the e-mail, colour, custom-field-name and tool-name rules of `switchboard_kit::limits`, checked by the
//! functions beside them.

use serde_json::{Map, Value};
use switchboard_kit::FieldViolation;
use switchboard_kit::limits::{Count, Fraction, Length, NUL_MESSAGE};

use switchboard_kit::limits::{
    COLOR_PATTERN, EMAIL_PATTERN, FIELD_NAME_PATTERN, TOOL_NAME_MESSAGE, TOOL_NAME_PATTERN, is_color, is_email,
    is_field_name, is_tool_name,
};

use switchboard_api::id::{ID_LIST_MESSAGE, ID_LIST_PATTERN, canonical_uuid, is_id_list};

/// Checks `value` against `schema`, naming fields from `path` (`""` for the root).
pub fn check(schema: &Value, value: &Value, path: &str, out: &mut Vec<FieldViolation>) {
    let Some(schema) = schema.as_object() else {
        // `true` admits anything; `false` nothing.
        if schema == &Value::Bool(false) {
            out.push(FieldViolation::new(field(path), "is not allowed"));
        }
        return;
    };
    if let Some(branches) = schema.get("anyOf").or_else(|| schema.get("oneOf")).and_then(Value::as_array) {
        check_branches(branches, value, path, out);
    }
    let types = types_of(schema);
    if !types.is_empty() && !types.iter().any(|kind| is_kind(value, kind)) {
        out.push(FieldViolation::new(field(path), type_message(schema, &types)));
        return;
    }
    if let Some(allowed) = schema.get("enum").and_then(Value::as_array)
        && !allowed.contains(value)
    {
        out.push(FieldViolation::new(field(path), one_of_message(allowed)));
        return;
    }
    if let Some(expected) = schema.get("const")
        && expected != value
    {
        out.push(FieldViolation::new(field(path), one_of_message(std::slice::from_ref(expected))));
        return;
    }
    match value {
        Value::String(text) => check_string(schema, text, path, out),
        Value::Number(_) => check_number(schema, value, path, out),
        Value::Object(members) => check_object(schema, members, path, out),
        Value::Array(items) => check_array(schema, items, path, out),
        Value::Bool(_) | Value::Null => {}
    }
}

/// A value is valid when one branch admits it; otherwise the problems of the branch that
/// matches its JSON type (or the first) are reported. Branches that only name formats (a date-time or a date) are reported together.
fn check_branches(branches: &[Value], value: &Value, path: &str, out: &mut Vec<FieldViolation>) {
    if let Some(tag) = tag_of(branches) {
        return check_tagged(branches, tag, value, path, out);
    }
    let mut first = None;
    let mut formats = Vec::new();
    for branch in branches {
        let mut found = Vec::new();
        check(branch, value, path, &mut found);
        if found.is_empty() {
            return;
        }
        let format_only = branch.as_object().is_some_and(|b| b.len() == 1 && b.contains_key("format"));
        if let [violation] = found.as_slice()
            && format_only
        {
            formats.push(violation.message.clone());
        }
        let typed = branch.as_object().map(types_of).is_some_and(|types| types.iter().any(|t| is_kind(value, t)));
        if typed || first.is_none() {
            first = Some(found);
        }
    }
    if formats.len() == branches.len() && formats.len() > 1 {
        let alternatives: Vec<&str> = formats.iter().map(|m| m.strip_prefix("must be ").unwrap_or(m)).collect();
        out.push(FieldViolation::new(field(path), format!("must be {}", alternatives.join(", or "))));
        return;
    }
    out.extend(first.unwrap_or_default());
}

/// The member that tells the branches of a tagged union apart (`{"type": "function", ...}`):
/// one every branch requires and gives a constant.
fn tag_of(branches: &[Value]) -> Option<&str> {
    let first = branches.first()?;
    let candidates = first.get("properties")?.as_object()?;
    candidates.keys().map(String::as_str).find(|name| branches.iter().all(|branch| constant(branch, name).is_some()))
}

fn constant<'a>(branch: &'a Value, member: &str) -> Option<&'a Value> {
    let required = branch.get("required")?.as_array()?;
    required.iter().any(|r| r == member).then(|| branch.get("properties")?.get(member)?.get("const"))?
}

/// The branch the value's tag names is checked alone, so that its problems are the ones told;
/// a missing or unknown tag is told with the tags there are.
fn check_tagged(branches: &[Value], tag: &str, value: &Value, path: &str, out: &mut Vec<FieldViolation>) {
    let Some(members) = value.as_object() else {
        out.push(FieldViolation::new(field(path), "must be an object"));
        return;
    };
    let given = members.get(tag);
    match branches.iter().find(|branch| constant(branch, tag) == given) {
        Some(branch) => check(branch, value, path, out),
        None => {
            let tags: Vec<Value> = branches.iter().filter_map(|branch| constant(branch, tag).cloned()).collect();
            out.push(FieldViolation::new(join(path, tag), one_of_message(&tags)));
        }
    }
}

fn field(path: &str) -> String {
    path.to_owned()
}

fn join(path: &str, name: &str) -> String {
    if path.is_empty() { name.to_owned() } else { format!("{path}.{name}") }
}

fn types_of(schema: &Map<String, Value>) -> Vec<&str> {
    match schema.get("type") {
        Some(Value::String(kind)) => vec![kind.as_str()],
        Some(Value::Array(kinds)) => kinds.iter().filter_map(Value::as_str).collect(),
        _ => Vec::new(),
    }
}

fn is_kind(value: &Value, kind: &str) -> bool {
    match kind {
        "string" => value.is_string(),
        "integer" => value.is_i64() || value.is_u64(),
        "number" => value.is_number(),
        "boolean" => value.is_boolean(),
        "object" => value.is_object(),
        "array" => value.is_array(),
        "null" => value.is_null(),
        _ => true,
    }
}

fn number(schema: &Map<String, Value>, keyword: &str) -> Option<f64> {
    schema.get(keyword).and_then(Value::as_f64)
}

/// What a value of the wrong type is told, with the bounds it must meet.
fn type_message(schema: &Map<String, Value>, types: &[&str]) -> String {
    let (min, max) = (number(schema, "minimum"), number(schema, "maximum"));
    if types.contains(&"integer") {
        return integer_message(min, max);
    }
    if types.contains(&"number") {
        return match (min, max) {
            (Some(min), Some(max)) => Fraction { min, max, default: min }.message(),
            _ => "must be a number".to_owned(),
        };
    }
    if schema.get("format").and_then(Value::as_str) == Some("uuid") {
        return "must be a UUID".to_owned();
    }
    match types.iter().find(|kind| **kind != "null") {
        Some(&"string") => "must be a string".to_owned(),
        Some(&"boolean") => "must be a boolean".to_owned(),
        Some(&"object") => "must be an object".to_owned(),
        Some(&"array") => "must be an array".to_owned(),
        _ => "has the wrong type".to_owned(),
    }
}

fn integer_message(min: Option<f64>, max: Option<f64>) -> String {
    // Bounds of our integers are whole numbers well inside i64.
    #[allow(clippy::cast_possible_truncation)]
    match (min, max) {
        (Some(min), Some(max)) => Count { min: min as i64, max: max as i64, default: min as i64 }.message(),
        (Some(1.0), None) => "must be a positive integer".to_owned(),
        (Some(min), None) => format!("must be an integer of at least {min}"),
        _ => "must be an integer".to_owned(),
    }
}

fn one_of_message(allowed: &[Value]) -> String {
    let names: Vec<String> = allowed
        .iter()
        .filter(|v| !v.is_null())
        .map(|v| v.as_str().map_or_else(|| v.to_string(), str::to_owned))
        .collect();
    match names.as_slice() {
        [only] => format!("must be {only}"),
        [first, second] => format!("must be {first} or {second}"),
        _ => format!("must be one of {}", names.join(", ")),
    }
}

fn check_string(schema: &Map<String, Value>, text: &str, path: &str, out: &mut Vec<FieldViolation>) {
    let min = schema.get("minLength").and_then(Value::as_u64);
    let max = schema.get("maxLength").and_then(Value::as_u64);
    if min.is_some() || max.is_some() {
        let length = Length::new(
            usize::try_from(min.unwrap_or(0)).unwrap_or(usize::MAX),
            usize::try_from(max.unwrap_or(u64::MAX)).unwrap_or(usize::MAX),
        );
        if let Some(violation) = length.check(&field(path), text) {
            out.push(violation);
            return;
        }
    } else if text.contains('\0') {
        out.push(FieldViolation::new(field(path), NUL_MESSAGE));
        return;
    }
    let pattern = schema.get("pattern").and_then(Value::as_str).and_then(known_pattern);
    let problem = match schema.get("format").and_then(Value::as_str) {
        _ if pattern.is_some_and(|(admits, _)| !admits(text)) => pattern.map(|(_, message)| message),
        Some("uuid") if canonical_uuid(text).is_none() => Some("must be a UUID"),
        Some("date") if chrono::NaiveDate::parse_from_str(text, "%Y-%m-%d").is_err() => {
            Some("must be an ISO 8601 date, e.g. 2024-01-15")
        }
        Some("email") if !is_email(text) => Some("must be a valid e-mail address"),
        Some("date-time") if switchboard_kit::time::parse_date_time_ms(text).is_none() => {
            Some("must be an ISO 8601 date-time, e.g. 2024-01-15T14:30:00Z")
        }
        _ => None,
    };
    if let Some(message) = problem {
        out.push(FieldViolation::new(field(path), message));
    }
}

/// Whether a text meets a pattern.
type TextRule = fn(&str) -> bool;

/// The check and message of a pattern of `switchboard_kit::limits`: the only patterns request
/// schemas carry besides the text rules, each checked by the same function the services use.
fn known_pattern(pattern: &str) -> Option<(TextRule, &'static str)> {
    match pattern {
        EMAIL_PATTERN => Some((is_email, "must be a valid e-mail address")),
        COLOR_PATTERN => Some((is_color, "must be a colour written #RRGGBB, e.g. #10B981")),
        FIELD_NAME_PATTERN => Some((is_field_name, "must start with a letter and hold only letters, digits and _")),
        ID_LIST_PATTERN => Some((is_id_list, ID_LIST_MESSAGE)),
        TOOL_NAME_PATTERN => Some((is_tool_name, TOOL_NAME_MESSAGE)),
        _ => None,
    }
}

fn check_number(schema: &Map<String, Value>, value: &Value, path: &str, out: &mut Vec<FieldViolation>) {
    let Some(n) = value.as_f64() else {
        return;
    };
    let (min, max) = (number(schema, "minimum"), number(schema, "maximum"));
    if min.is_some_and(|min| n < min) || max.is_some_and(|max| n > max) {
        let types = types_of(schema);
        let message = if types.contains(&"integer") { integer_message(min, max) } else { type_message(schema, &types) };
        out.push(FieldViolation::new(field(path), message));
    }
}

fn check_object(schema: &Map<String, Value>, members: &Map<String, Value>, path: &str, out: &mut Vec<FieldViolation>) {
    let properties = schema.get("properties").and_then(Value::as_object);
    let required: Vec<&str> =
        schema.get("required").and_then(Value::as_array).into_iter().flatten().filter_map(Value::as_str).collect();
    for (name, property) in properties.into_iter().flatten() {
        let member = members.get(name);
        match member {
            None | Some(Value::Null) if required.contains(&name.as_str()) => {
                out.push(FieldViolation::new(join(path, name), "is required"));
            }
            None => {}
            Some(value) => check(property, value, &join(path, name), out),
        }
    }
    match schema.get("additionalProperties") {
        Some(Value::Bool(false)) => {
            let known: Vec<&str> = properties.into_iter().flatten().map(|(name, _)| name.as_str()).collect();
            for name in members.keys().filter(|name| !known.contains(&name.as_str())) {
                out.push(FieldViolation::new(join(path, name), format!("is not one of {}", known.join(", "))));
            }
        }
        Some(extra @ Value::Object(_)) => {
            for (name, value) in members.iter().filter(|(name, _)| !properties.is_some_and(|p| p.contains_key(*name))) {
                check(extra, value, &join(path, name), out);
            }
        }
        _ => {}
    }
}

fn check_array(schema: &Map<String, Value>, items: &[Value], path: &str, out: &mut Vec<FieldViolation>) {
    let count = items.len() as u64;
    let min = schema.get("minItems").and_then(Value::as_u64);
    let max = schema.get("maxItems").and_then(Value::as_u64);
    if min.is_some_and(|min| count < min) || max.is_some_and(|max| count > max) {
        let message = match (min, max) {
            (Some(min), Some(max)) => format!("must have {min} to {max} items"),
            (Some(min), None) => format!("must have at least {min} items"),
            (None, _) => format!("must have at most {} items", max.unwrap_or_default()),
        };
        out.push(FieldViolation::new(field(path), message));
        return;
    }
    if let Some(item) = schema.get("items") {
        for (index, value) in items.iter().enumerate() {
            check(item, value, &format!("{path}[{index}]"), out);
        }
    }
}

/// JSON Schema counts `5.0` as an integer: where the schema wants an integer, a whole number
/// written with a fraction is rewritten as the integer, so that the check and serde agree.
pub fn whole_numbers(schema: &Value, value: &mut Value) {
    let Some(schema) = schema.as_object() else {
        return;
    };
    for branch in schema.get("anyOf").or_else(|| schema.get("oneOf")).and_then(Value::as_array).into_iter().flatten() {
        whole_numbers(branch, value);
    }
    match value {
        Value::Number(number) if number.is_f64() && types_of(schema).contains(&"integer") => {
            let n = number.as_f64().unwrap_or(f64::NAN);
            // i64::MAX as f64 rounds up to 2^63, itself out of range: compare strictly.
            #[allow(clippy::cast_possible_truncation, clippy::cast_precision_loss)]
            if n.fract() == 0.0 && n >= i64::MIN as f64 && n < i64::MAX as f64 {
                *value = Value::from(n as i64);
            }
        }
        Value::Object(members) => {
            let properties = schema.get("properties").and_then(Value::as_object);
            for (name, member) in members.iter_mut() {
                let property = properties.and_then(|properties| properties.get(name));
                if let Some(property) = property.or_else(|| schema.get("additionalProperties")) {
                    whole_numbers(property, member);
                }
            }
        }
        Value::Array(items) => {
            if let Some(item) = schema.get("items") {
                items.iter_mut().for_each(|value| whole_numbers(item, value));
            }
        }
        _ => {}
    }
}

/// A path or query parameter arrives as text: it is read as the JSON value its schema wants
/// (a number, a boolean), or kept as text so that the check names the problem.
pub fn coerce(schema: Option<&Value>, text: &str) -> Value {
    let types = schema.and_then(Value::as_object).map(types_of).unwrap_or_default();
    let trimmed = text.trim();
    if types.contains(&"integer")
        && let Ok(n) = trimmed.parse::<i64>()
    {
        return Value::from(n);
    }
    if types.contains(&"number")
        && let Ok(n) = trimmed.parse::<f64>()
        && let Some(number) = serde_json::Number::from_f64(n)
    {
        return Value::Number(number);
    }
    if types.contains(&"boolean") && matches!(trimmed, "true" | "false") {
        return Value::Bool(trimmed == "true");
    }
    Value::String(text.to_owned())
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn problems(schema: Value, value: Value) -> Vec<(String, String)> {
        let mut out = Vec::new();
        check(&schema, &value, "", &mut out);
        out.into_iter().map(|v| (v.field, v.message)).collect()
    }

    fn body_schema() -> Value {
        json!({
            "type": "object",
            "properties": {
                "name": { "type": "string", "minLength": 1, "maxLength": 5 },
                "notes": { "type": ["string", "null"], "maxLength": 3 },
                "type": { "type": "string", "enum": ["phone", "chat"] },
                "id": { "type": ["string", "null"], "format": "uuid" },
                "limit": { "type": "integer", "minimum": 1, "maximum": 50 },
                "flags": {
                    "type": "object",
                    "properties": { "users": { "type": "boolean" } },
                    "additionalProperties": false,
                },
            },
            "required": ["name", "type"],
        })
    }

    #[test]
    fn a_tagged_union_is_checked_by_the_branch_its_tag_names() {
        let tool = super::super::schema::inlined::<Vec<crate::api::agent_settings::ToolInput>>();
        let found = problems(
            tool,
            json!([
                { "type": "transfer_call", "number": 5 },
                { "type": "teleport" },
                { "type": "end_call", "description": null },
                "end_call",
            ]),
        );
        assert_eq!(
            found,
            [
                ("[0].number".to_owned(), "must be a string".to_owned()),
                ("[1].type".to_owned(), "must be one of function, transfer_call, end_call".to_owned()),
                ("[3]".to_owned(), "must be an object".to_owned()),
            ]
        );
    }

    #[test]
    fn every_problem_is_reported_with_its_field() {
        let found = problems(
            body_schema(),
            json!({ "name": "  ", "notes": "long", "type": "fax", "id": "x", "limit": 51, "flags": { "users": 1, "admin": true } }),
        );
        assert_eq!(
            found,
            [
                ("name".to_owned(), "must not be blank".to_owned()),
                ("notes".to_owned(), "must be at most 3 characters".to_owned()),
                ("type".to_owned(), "must be phone or chat".to_owned()),
                ("id".to_owned(), "must be a UUID".to_owned()),
                ("limit".to_owned(), "must be an integer from 1 to 50".to_owned()),
                ("flags.users".to_owned(), "must be a boolean".to_owned()),
                ("flags.admin".to_owned(), "is not one of users".to_owned()),
            ]
        );
    }

    #[test]
    fn missing_and_null_required_fields_are_required_and_extra_members_pass() {
        let found = problems(body_schema(), json!({ "name": null, "extra": 1 }));
        assert_eq!(
            found,
            [("name".to_owned(), "is required".to_owned()), ("type".to_owned(), "is required".to_owned())]
        );
        assert!(problems(body_schema(), json!({ "name": "ü".repeat(5), "type": "chat", "notes": null })).is_empty());
    }

    #[test]
    fn nul_is_refused_in_any_string_and_lengths_count_characters() {
        let found = problems(json!({ "type": "string" }), json!("a\u{0}b"));
        assert_eq!(found, [(String::new(), NUL_MESSAGE.to_owned())]);
        assert_eq!(problems(json!({ "type": "string", "maxLength": 2 }), json!("éé")), []);
    }

    #[test]
    fn whole_numbers_written_with_a_fraction_are_integers() {
        let schema = json!({ "type": "object", "properties": { "n": { "type": ["integer", "null"], "maximum": 10 } } });
        let mut value = json!({ "n": 7.0 });
        whole_numbers(&schema, &mut value);
        assert_eq!(value, json!({ "n": 7 }));
        let mut value = json!({ "n": 7.5 });
        whole_numbers(&schema, &mut value);
        assert_eq!(problems(schema, value), [("n".to_owned(), "must be an integer".to_owned())]);
    }

    #[test]
    fn text_parameters_become_the_values_their_schema_wants() {
        let integer = json!({ "type": "integer" });
        assert_eq!(coerce(Some(&integer), "10"), json!(10));
        assert_eq!(coerce(Some(&integer), "ten"), json!("ten"));
        assert_eq!(coerce(Some(&json!({ "type": "number" })), "0.5"), json!(0.5));
        assert_eq!(coerce(Some(&json!({ "type": "string" })), "10"), json!("10"));
        let found = problems(json!({ "type": "integer", "minimum": 1, "maximum": 50 }), coerce(Some(&integer), "ten"));
        assert_eq!(found, [(String::new(), "must be an integer from 1 to 50".to_owned())]);
    }
}
