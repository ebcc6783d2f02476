//! JSON Schemas from the Rust types of requests and answers (schemars, draft 2020-12, which is
//! OpenAPI 3.1's dialect). Requests are described as they are read (deserialisation), answers as
//! they are written (serialisation: every member that is always present is required).

use schemars::generate::{SchemaGenerator, SchemaSettings};
use schemars::transform::RecursiveTransform;
use schemars::{JsonSchema, Schema};
use serde_json::{Map, Value};
use switchboard_kit::limits;

/// Where named schemas live in the OpenAPI document.
pub const COMPONENTS: &str = "#/components/schemas/";

/// The rules every request text meets, said in its schema: no NUL anywhere, and not blank when
/// it has a minimum length (see `switchboard_kit::limits`). Texts with a format, an enumeration
/// or a pattern of their own say enough already.
fn text_rules(schema: &mut Schema) {
    let is_text = match schema.get("type") {
        Some(Value::String(kind)) => kind == "string",
        Some(Value::Array(kinds)) => kinds.iter().any(|kind| kind == "string"),
        _ => false,
    };
    let said = ["format", "enum", "const", "pattern"].into_iter().any(|keyword| schema.get(keyword).is_some());
    if !is_text || said {
        return;
    }
    let required = schema.get("minLength").and_then(Value::as_u64).is_some_and(|min| min > 0);
    let pattern = if required { limits::NOT_BLANK_PATTERN } else { limits::NO_NUL_PATTERN };
    schema.insert("pattern".to_owned(), Value::from(pattern));
}

/// The schema of `T` with every subschema written in place: what validation reads and what an
/// MCP tool's `inputSchema` must be (it has to stand alone).
pub fn inlined<T: JsonSchema>() -> Value {
    let generator = SchemaSettings::draft2020_12()
        .with(|settings| {
            settings.inline_subschemas = true;
            settings.meta_schema = None;
        })
        .with_transform(RecursiveTransform(text_rules))
        .into_generator();
    let mut schema = Value::from(generator.into_root_schema_for::<T>());
    if let Some(object) = schema.as_object_mut() {
        object.remove("title");
    }
    schema
}

/// The two generators of the OpenAPI document: one for what clients send, one for what they get.
pub struct Generators {
    pub requests: SchemaGenerator,
    pub answers: SchemaGenerator,
}

impl Default for Generators {
    fn default() -> Self {
        let settings = || {
            SchemaSettings::draft2020_12().with(|settings| {
                settings.definitions_path = COMPONENTS.into();
                settings.meta_schema = None;
            })
        };
        Self {
            requests: settings().with_transform(RecursiveTransform(text_rules)).into_generator(),
            answers: settings().for_serialize().into_generator(),
        }
    }
}

impl Generators {
    pub fn request<T: JsonSchema>(&mut self) -> Schema {
        self.requests.subschema_for::<T>()
    }

    pub fn answer<T: JsonSchema>(&mut self) -> Schema {
        self.answers.subschema_for::<T>()
    }

    /// Every named schema. A name that the two sides describe differently is an error: a type
    /// must not be both read and written unless it reads as it writes.
    pub fn into_components(mut self) -> anyhow::Result<Map<String, Value>> {
        let mut all = self.answers.take_definitions(true);
        for (name, schema) in self.requests.take_definitions(true) {
            match all.get(&name) {
                Some(existing) if existing != &schema => {
                    anyhow::bail!("the schema {name} differs between requests and answers: give them two types")
                }
                Some(_) => {}
                None => {
                    all.insert(name, schema);
                }
            }
        }
        Ok(all)
    }
}

/// The properties of an object schema, in the order its type declares them.
pub fn properties(schema: &Value) -> impl Iterator<Item = (&String, &Value)> {
    schema.get("properties").and_then(Value::as_object).into_iter().flatten()
}

/// Whether `name` is required by an object schema.
pub fn is_required(schema: &Value, name: &str) -> bool {
    schema.get("required").and_then(Value::as_array).is_some_and(|required| required.iter().any(|r| r == name))
}
