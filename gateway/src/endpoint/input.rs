//! What a handler receives from the client, typed: its path parameters `P`, its query `Q` and
//! its body `B`, each checked against the schema of its type before the handler runs.

use std::borrow::Cow;
use std::future::Future;

use bytes::Bytes;
use schemars::{JsonSchema, Schema, SchemaGenerator};
use serde::de::DeserializeOwned;
use serde::{Deserialize, Deserializer};
use serde_json::{Map, Value};
pub use switchboard_api::id::{Id, IdList};
use switchboard_kit::{ErrorKind, FieldViolation, ServiceError, ServiceResult};

use super::check::{check, coerce, whole_numbers};
use super::schema::{Generators, inlined, properties};
use crate::body::{Upload, body_required};

/// What the client sent, before it is checked: path and query parameters (text from a URL,
/// values from an MCP tool call) and the body.
#[derive(Default)]
pub struct RawInput {
    pub path: Map<String, Value>,
    pub query: Map<String, Value>,
    /// Query parameters whose name or value is not percent-encoded UTF-8: refused with the
    /// query's other problems rather than read as some other text.
    pub malformed_query: Vec<String>,
    pub body: Option<Value>,
    pub upload: Option<Upload>,
}

impl RawInput {
    /// Reads a URL's query string. The first of repeated parameters counts.
    pub fn with_query(query: Option<&str>) -> RawInput {
        let mut raw = RawInput::default();
        for pair in query.unwrap_or_default().split('&').filter(|pair| !pair.is_empty()) {
            let Some((name, value)) = url::form_urlencoded::parse(pair.as_bytes()).next() else { continue };
            if !well_encoded(pair) {
                raw.malformed_query.push(name.into_owned());
                continue;
            }
            raw.query.entry(name.into_owned()).or_insert_with(|| Value::String(value.into_owned()));
        }
        raw
    }
}

/// Every `%` starts an escape of two hex digits, and the escaped bytes are UTF-8.
fn well_encoded(text: &str) -> bool {
    let bytes = text.as_bytes();
    let mut decoded = Vec::with_capacity(bytes.len());
    let mut at = 0;
    while at < bytes.len() {
        if bytes[at] == b'%' {
            let hex = bytes.get(at + 1..at + 3).and_then(|digits| std::str::from_utf8(digits).ok());
            let Some(byte) = hex.and_then(|digits| u8::from_str_radix(digits, 16).ok()) else { return false };
            decoded.push(byte);
            at += 3;
        } else {
            decoded.push(bytes[at]);
            at += 1;
        }
    }
    std::str::from_utf8(&decoded).is_ok()
}

pub struct Input<P = Nothing, Q = Nothing, B = NoBody> {
    pub path: P,
    pub query: Q,
    pub body: B,
}

/// The schemas an endpoint's input is checked against, written in place.
pub struct InputSchemas {
    pub path: Value,
    pub query: Value,
    pub body: Option<Value>,
    /// Whether no parameters at all pass `path` / `query`, decided once: most requests send
    /// none, and then there is nothing to check.
    path_takes_none: bool,
    query_takes_none: bool,
}

impl InputSchemas {
    fn new(path: Value, query: Value, body: Option<Value>) -> Self {
        let takes_none = |schema: &Value| {
            let mut violations = Vec::new();
            check(schema, &Value::Object(Map::new()), "", &mut violations);
            violations.is_empty()
        };
        Self { path_takes_none: takes_none(&path), query_takes_none: takes_none(&query), path, query, body }
    }
}

/// Path or query parameters: a struct whose members are the parameters.
pub trait Params: DeserializeOwned + JsonSchema + Send + 'static {}
impl<T: DeserializeOwned + JsonSchema + Send + 'static> Params for T {}

/// No path parameters, or no query parameters.
#[derive(Debug, Default, Deserialize, JsonSchema)]
pub struct Nothing {}

/// How the gateway reads an endpoint's body.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum BodyKind {
    /// None is read. A POST or PUT without one may still carry one: it is read as JSON (a
    /// non-JSON body is refused as everywhere else) and dropped.
    None,
    Json,
    /// `multipart/form-data`, up to the upload limit.
    Multipart,
}

/// A request body type.
pub trait RequestBody: Sized + Send + 'static {
    const KIND: BodyKind;
    /// Its schema written in place, for validation and MCP tools.
    fn inlined() -> Option<Value>;
    /// Its schema for the OpenAPI document: a reference to a named schema.
    fn describe(generators: &mut Generators) -> Option<Schema>;
    fn extract(
        schema: Option<&Value>,
        raw: &mut RawInput,
        max_upload_bytes: usize,
        violations: &mut Vec<FieldViolation>,
    ) -> impl Future<Output = ServiceResult<Option<Self>>> + Send;
}

/// An endpoint without a body.
pub struct NoBody;

impl RequestBody for NoBody {
    const KIND: BodyKind = BodyKind::None;

    fn inlined() -> Option<Value> {
        None
    }

    fn describe(_: &mut Generators) -> Option<Schema> {
        None
    }

    async fn extract(
        _: Option<&Value>,
        _: &mut RawInput,
        _: usize,
        _: &mut Vec<FieldViolation>,
    ) -> ServiceResult<Option<Self>> {
        Ok(Some(NoBody))
    }
}

/// A JSON object body of type `T`; members it does not name are ignored.
pub struct Json<T>(pub T);

impl<T: DeserializeOwned + JsonSchema + Send + 'static> RequestBody for Json<T> {
    const KIND: BodyKind = BodyKind::Json;

    fn inlined() -> Option<Value> {
        Some(inlined::<T>())
    }

    fn describe(generators: &mut Generators) -> Option<Schema> {
        Some(generators.request::<T>())
    }

    async fn extract(
        schema: Option<&Value>,
        raw: &mut RawInput,
        _: usize,
        violations: &mut Vec<FieldViolation>,
    ) -> ServiceResult<Option<Self>> {
        let body = raw.body.take().ok_or_else(body_required)?;
        if !body.is_object() {
            return Err(ServiceError::new(ErrorKind::MalformedJson, "Request body must be a JSON object"));
        }
        Ok(parse::<T>(schema, body, "", violations).map(Json))
    }
}

/// The multipart form of an upload: `file`, `name?`, `notes?`.
pub struct Form {
    pub file_name: String,
    /// The file part's own Content-Type, if it had one.
    pub content_type: Option<String>,
    pub content: Bytes,
    pub name: Option<String>,
    pub notes: Option<String>,
}

/// The Content-Types the `file` part of an upload may have: those naming a format (what a file
/// whose name has no known extension needs), and `application/octet-stream` for one whose
/// extension says it.
pub const UPLOAD_CONTENT_TYPES: &str = "text/plain, text/markdown, text/html, text/csv, application/pdf, \
    application/vnd.openxmlformats-officedocument.wordprocessingml.document, application/octet-stream";

/// What the form's schema describes (its text parts are checked by it).
#[derive(JsonSchema)]
#[allow(dead_code)]
pub struct UploadForm {
    /// The file. Its format comes from the file name's extension, one of .txt/.text,
    /// .md/.markdown, .html/.htm, .pdf, .docx, .csv; for a name without one of these, from the
    /// part's Content-Type (text/plain, text/markdown, text/html, application/pdf, the .docx
    /// type, text/csv).
    #[schemars(extend("contentMediaType" = "application/octet-stream"))]
    file: String,
    /// Display name; the file name when left out.
    #[schemars(length(min = switchboard_kit::limits::NAME.min, max = switchboard_kit::limits::NAME.max))]
    name: Option<String>,
    /// Shown to the AI alongside the document.
    #[schemars(length(max = switchboard_kit::limits::NOTES.max))]
    notes: Option<String>,
}

fn malformed(error: impl std::fmt::Display) -> ServiceError {
    ServiceError::invalid_field("file", format!("the multipart body cannot be read: {error}"))
}

impl RequestBody for Form {
    const KIND: BodyKind = BodyKind::Multipart;

    fn inlined() -> Option<Value> {
        Some(inlined::<UploadForm>())
    }

    fn describe(generators: &mut Generators) -> Option<Schema> {
        Some(generators.request::<UploadForm>())
    }

    async fn extract(
        schema: Option<&Value>,
        raw: &mut RawInput,
        max_upload_bytes: usize,
        violations: &mut Vec<FieldViolation>,
    ) -> ServiceResult<Option<Self>> {
        let Upload { boundary, body } =
            raw.upload.take().ok_or_else(|| ServiceError::invalid_field("file", "is required"))?;
        let stream = futures::stream::once(async move { Ok::<Bytes, std::io::Error>(body) });
        let mut multipart = multer::Multipart::new(stream, boundary);
        let (mut file, mut name, mut notes) = (None, None, None);
        while let Some(part) = multipart.next_field().await.map_err(malformed)? {
            match part.name().unwrap_or_default() {
                "file" => {
                    let file_name = part.file_name().unwrap_or_default().to_owned();
                    let content_type = part.content_type().map(ToString::to_string);
                    file = Some((file_name, content_type, part.bytes().await.map_err(malformed)?));
                }
                "name" => name = Some(part.text().await.map_err(malformed)?),
                "notes" => notes = Some(part.text().await.map_err(malformed)?),
                _ => {}
            }
        }
        if let Some((_, _, content)) = &file
            && content.len() > max_upload_bytes
        {
            return Err(ServiceError::new(
                ErrorKind::PayloadTooLarge,
                format!("The file is larger than {max_upload_bytes} bytes"),
            ));
        }
        let mut parts = Map::new();
        if let Some((file_name, _, _)) = &file {
            parts.insert("file".to_owned(), Value::from(file_name.as_str()));
        }
        for (key, value) in [("name", &name), ("notes", &notes)] {
            if let Some(value) = value {
                parts.insert(key.to_owned(), Value::from(value.as_str()));
            }
        }
        let before = violations.len();
        if let Some(schema) = schema {
            check(schema, &Value::Object(parts), "", violations);
        }
        Ok(match file {
            Some((file_name, content_type, content)) if violations.len() == before => {
                Some(Form { file_name, content_type, content, name, notes })
            }
            _ => None,
        })
    }
}

/// Reads `T` from `value` after checking it against `schema`; its violations (named under
/// `prefix`) go to `violations` and the result is `None`.
fn parse<T: DeserializeOwned>(
    schema: Option<&Value>,
    mut value: Value,
    prefix: &str,
    violations: &mut Vec<FieldViolation>,
) -> Option<T> {
    let before = violations.len();
    if let Some(schema) = schema {
        whole_numbers(schema, &mut value);
        check(schema, &value, prefix, violations);
    }
    if violations.len() > before {
        return None;
    }
    match serde_json::from_value(value) {
        Ok(parsed) => Some(parsed),
        Err(error) => {
            // The schema admitted what the type does not: say what serde says.
            violations.push(FieldViolation::new(prefix, error.to_string()));
            None
        }
    }
}

/// Checks and reads one item of a batch alone, against `schema` (the item type's
/// [`inlined`] schema): every violation, named within the item, when it is not a `T`.
pub fn read_item<T: DeserializeOwned>(schema: &Value, value: Value) -> Result<T, Vec<FieldViolation>> {
    let mut violations = Vec::new();
    parse(Some(schema), value, "", &mut violations).ok_or(violations)
}

/// Reads path or query parameters `T` after checking them against `schema`.
fn read_parameters<T: DeserializeOwned>(
    schema: &Value,
    takes_none: bool,
    given: Map<String, Value>,
    violations: &mut Vec<FieldViolation>,
) -> Option<T> {
    if given.is_empty() && takes_none {
        return parse::<T>(None, Value::Object(given), "", violations);
    }
    parse::<T>(Some(schema), parameters(schema, given), "", violations)
}

/// Parameters as their schema wants them: text read as numbers or booleans where it says so.
fn parameters(schema: &Value, mut given: Map<String, Value>) -> Value {
    for (name, property) in properties(schema) {
        if let Some(Value::String(text)) = given.get(name) {
            let value = coerce(Some(property), text);
            given.insert(name.clone(), value);
        }
    }
    Value::Object(given)
}

impl<P: Params, Q: Params, B: RequestBody> Input<P, Q, B> {
    pub fn schemas() -> InputSchemas {
        InputSchemas::new(inlined::<P>(), inlined::<Q>(), B::inlined())
    }

    /// Checks and reads the input: bad path parameters answer at once (the resource cannot be
    /// named); the query's and the body's problems are reported together.
    pub async fn extract(schemas: &InputSchemas, mut raw: RawInput, max_upload_bytes: usize) -> ServiceResult<Self> {
        let mut violations = Vec::new();
        let path = read_parameters::<P>(
            &schemas.path,
            schemas.path_takes_none,
            std::mem::take(&mut raw.path),
            &mut violations,
        );
        let Some(path) = path else {
            return Err(ServiceError::validation(violations));
        };
        for name in std::mem::take(&mut raw.malformed_query) {
            violations.push(FieldViolation::new(name, "is not valid percent-encoded UTF-8"));
        }
        let query = read_parameters::<Q>(
            &schemas.query,
            schemas.query_takes_none,
            std::mem::take(&mut raw.query),
            &mut violations,
        );
        let body = B::extract(schemas.body.as_ref(), &mut raw, max_upload_bytes, &mut violations).await?;
        match (query, body) {
            (Some(query), Some(body)) if violations.is_empty() => Ok(Input { path, query, body }),
            _ => Err(ServiceError::validation(violations)),
        }
    }
}

/// A member of a partial update: left out (keep), `null` (clear) or a value (set). The member
/// needs `#[serde(default)]`.
#[derive(Debug, Clone, Default, PartialEq)]
pub enum Patch<T> {
    #[default]
    Absent,
    Null,
    Value(T),
}

impl<T> Patch<T> {
    /// The value when one was given; `null` and left out are both `None`.
    pub fn value(self) -> Option<T> {
        match self {
            Patch::Value(value) => Some(value),
            Patch::Absent | Patch::Null => None,
        }
    }
}

impl<'de, T: Deserialize<'de>> Deserialize<'de> for Patch<T> {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        Ok(Option::<T>::deserialize(deserializer)?.map_or(Patch::Null, Patch::Value))
    }
}

impl<T: JsonSchema> JsonSchema for Patch<T> {
    fn inline_schema() -> bool {
        true
    }

    fn schema_name() -> Cow<'static, str> {
        format!("Patch_{}", T::schema_name()).into()
    }

    fn json_schema(generator: &mut SchemaGenerator) -> Schema {
        Option::<T>::json_schema(generator)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use switchboard_api::id::{ID_LIST_PATTERN, is_id_list};

    #[test]
    fn query_strings_must_be_percent_encoded_utf8() {
        let raw = RawInput::with_query(Some("query=caf%C3%A9+au+lait&limit=5&limit=9&bad=%zz&worse=%ff%fe&&x=%4"));
        assert_eq!(raw.query["query"], "café au lait");
        assert_eq!(raw.query["limit"], "5");
        assert_eq!(raw.malformed_query, ["bad", "worse", "x"]);
        assert!(RawInput::with_query(None).query.is_empty());
    }

    #[derive(Debug, Deserialize, JsonSchema)]
    #[allow(dead_code)]
    struct Needs {
        limit: u32,
    }

    #[derive(Debug, Deserialize, JsonSchema)]
    #[allow(dead_code)]
    struct Optional {
        limit: Option<u32>,
    }

    /// Parameters that are left out are still checked when the schema wants some.
    #[tokio::test]
    async fn no_parameters_pass_only_where_none_are_required() {
        let schemas = Input::<Nothing, Needs, NoBody>::schemas();
        assert!(!schemas.query_takes_none && schemas.path_takes_none);
        let refused = Input::<Nothing, Needs, NoBody>::extract(&schemas, RawInput::default(), 0).await.err();
        let fields: Vec<String> = refused.expect("limit is required").details.iter().map(|v| v.field.clone()).collect();
        assert_eq!(fields, ["limit"]);

        let schemas = Input::<Nothing, Optional, NoBody>::schemas();
        assert!(schemas.query_takes_none);
        let input = Input::<Nothing, Optional, NoBody>::extract(&schemas, RawInput::default(), 0).await.unwrap();
        assert_eq!(input.query.limit, None);
        let given = RawInput::with_query(Some("limit=abc"));
        let refused = Input::<Nothing, Optional, NoBody>::extract(&schemas, given, 0).await.err();
        assert!(refused.is_some(), "a parameter that is sent is checked");
    }

    /// The published pattern and the check agree on every kind of input.
    #[test]
    fn the_id_list_pattern_says_what_the_check_admits() {
        let pattern = regex::Regex::new(ID_LIST_PATTERN).unwrap();
        let id = "0f8fad5b-d9cb-469f-a165-70867728950e";
        let many = |n: usize| vec![id; n].join(",");
        let cases = [
            id.to_owned(),
            id.to_uppercase(),
            format!("{id},{id}"),
            many(100),
            many(101),
            String::new(),
            format!("{id},"),
            format!(",{id}"),
            format!("{id}, {id}"),
            format!(" {id}"),
            "0f8fad5bd9cb469fa16570867728950e".to_owned(),
            "{0f8fad5b-d9cb-469f-a165-70867728950e}".to_owned(),
            "0f8fad5b-d9cb-469f-a165-70867728950g".to_owned(),
            "0f8fad5-bd9cb-469f-a165-70867728950e".to_owned(),
        ];
        for case in cases {
            assert_eq!(pattern.is_match(&case), is_id_list(&case), "{case:?}");
        }
        assert!(is_id_list(&many(100)) && !is_id_list(&many(101)));
    }
}
