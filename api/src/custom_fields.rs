//! Custom contact fields.

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use switchboard_proto::v1 as proto;

use crate::id::Id;

#[derive(Debug, Clone, Copy, Serialize, Deserialize, JsonSchema, PartialEq, Eq)]
#[serde(rename_all = "lowercase")]
pub enum FieldType {
    Text,
    Number,
    Date,
    Boolean,
    Select,
}

impl FieldType {
    pub fn as_str(self) -> &'static str {
        match self {
            FieldType::Text => "text",
            FieldType::Number => "number",
            FieldType::Date => "date",
            FieldType::Boolean => "boolean",
            FieldType::Select => "select",
        }
    }

    pub fn parse(text: &str) -> Self {
        match text {
            "number" => FieldType::Number,
            "date" => FieldType::Date,
            "boolean" => FieldType::Boolean,
            "select" => FieldType::Select,
            _ => FieldType::Text,
        }
    }
}

/// A custom contact field.
#[derive(Serialize, JsonSchema)]
#[schemars(deny_unknown_fields)]
pub struct CustomField {
    pub id: Id,
    /// The key of its value in a contact's `customFields`.
    pub name: String,
    pub label: String,
    #[serde(rename = "type")]
    pub kind: FieldType,
    pub required: bool,
    /// The choices of a select; empty for other types.
    pub options: Vec<String>,
}

/// A custom field as contact lists describe it.
#[derive(Serialize, JsonSchema)]
#[schemars(deny_unknown_fields)]
pub struct CustomFieldSchema {
    pub id: Id,
    pub name: String,
    pub label: String,
    #[serde(rename = "type")]
    pub kind: FieldType,
    pub required: bool,
}

impl From<&proto::CustomField> for CustomField {
    fn from(field: &proto::CustomField) -> Self {
        Self {
            id: Id::stored(field.id.clone()),
            name: field.name.clone(),
            label: field.label.clone(),
            kind: FieldType::parse(&field.r#type),
            required: field.required,
            options: field.options.clone(),
        }
    }
}

impl From<&proto::CustomFieldSchema> for CustomFieldSchema {
    fn from(field: &proto::CustomFieldSchema) -> Self {
        Self {
            id: Id::stored(field.id.clone()),
            name: field.name.clone(),
            label: field.label.clone(),
            kind: FieldType::parse(&field.r#type),
            required: field.required,
        }
    }
}
