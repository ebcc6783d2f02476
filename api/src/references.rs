//! Q&A entries (references): written by hand, or extracted from a webpage or document.

use schemars::JsonSchema;
use serde::Serialize;
use switchboard_kit::limits;
use switchboard_proto::v1 as proto;

use crate::id::Id;
use crate::time::Timestamp;

/// Always `QA`, the hosted product's value for a question-and-answer entry.
#[derive(Serialize, JsonSchema)]
pub enum EntryType {
    #[serde(rename = "QA")]
    Qa,
}

/// Where an entry comes from: `{type: "manual"}`, or `{type: "webpage" | "document", id, name}`.
#[derive(Serialize, JsonSchema)]
#[schemars(deny_unknown_fields)]
pub struct ReferenceSource {
    #[serde(rename = "type")]
    #[schemars(extend("enum" = ["manual", "webpage", "document"]))]
    pub kind: String,
    /// The webpage or document it was extracted from; absent for manual references.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub id: Option<Id>,
    /// That source's name; absent for manual references.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub name: Option<Option<String>>,
}

impl From<Option<proto::Source>> for ReferenceSource {
    fn from(source: Option<proto::Source>) -> Self {
        let source = source.unwrap_or_default();
        let kind = if source.r#type.is_empty() { "manual".to_owned() } else { source.r#type };
        let name = source.id.as_ref().map(|_| source.name.clone());
        Self { kind, id: source.id.map(Id::stored), name }
    }
}

/// What a bulk create of references did.
#[derive(Serialize, JsonSchema)]
#[schemars(deny_unknown_fields)]
pub struct BulkReferences {
    /// The references written, in request order.
    pub created: Vec<Reference>,
    /// The items not written, in request order.
    pub failed: Vec<crate::contacts::BulkFailure>,
}

/// A Q&A entry: a manual reference, or one extracted from a webpage or document.
#[derive(Serialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
#[schemars(deny_unknown_fields)]
pub struct Reference {
    pub id: Id,
    #[schemars(length(max = limits::QUESTION.max))]
    pub question: String,
    #[schemars(length(max = limits::ANSWER.max))]
    pub answer: String,
    #[serde(rename = "type")]
    pub kind: EntryType,
    pub source: ReferenceSource,
    pub created_at: Timestamp,
    pub updated_at: Timestamp,
}

impl From<&proto::Reference> for Reference {
    fn from(reference: &proto::Reference) -> Self {
        Self {
            id: Id::stored(reference.id.clone()),
            question: reference.question.clone(),
            answer: reference.answer.clone(),
            kind: EntryType::Qa,
            source: ReferenceSource::from(reference.source.clone()),
            created_at: Timestamp::from_ms(reference.created_at_ms),
            updated_at: Timestamp::from_ms(reference.updated_at_ms),
        }
    }
}
