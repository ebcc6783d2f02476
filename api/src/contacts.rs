//! CRM contacts, their notes and the answer of a bulk create.

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};
use switchboard_proto::v1 as proto;

use crate::custom_fields::CustomFieldSchema;
use crate::envelope::Pagination;
use crate::errors::FieldError;
use crate::id::Id;
use crate::tags::Tag;
use crate::time::Timestamp;

#[derive(Debug, Clone, Copy, Serialize, Deserialize, JsonSchema, PartialEq, Eq)]
#[serde(rename_all = "lowercase")]
pub enum NoteKind {
    General,
    Info,
    Warning,
    Danger,
}

impl NoteKind {
    pub fn as_str(self) -> &'static str {
        match self {
            NoteKind::General => "general",
            NoteKind::Info => "info",
            NoteKind::Warning => "warning",
            NoteKind::Danger => "danger",
        }
    }

    /// A stored kind; anything unknown reads as `general`.
    pub fn parse(text: &str) -> Self {
        match text {
            "info" => NoteKind::Info,
            "warning" => NoteKind::Warning,
            "danger" => NoteKind::Danger,
            _ => NoteKind::General,
        }
    }
}

/// The stage a contact was last placed in.
#[derive(Serialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
#[schemars(deny_unknown_fields)]
pub struct CrmStage {
    pub id: Id,
    pub name: String,
    /// The board the stage belongs to.
    pub board_id: Id,
}

/// A CRM contact.
#[derive(Serialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
#[schemars(deny_unknown_fields)]
pub struct Contact {
    pub id: Id,
    pub first_name: Option<String>,
    pub last_name: Option<String>,
    /// Lower-case.
    pub email: Option<String>,
    /// E.164.
    pub number: String,
    pub carrier: Option<String>,
    /// Values keyed by custom field `name`.
    pub custom_fields: Map<String, Value>,
    /// By name.
    pub tags: Vec<Tag>,
    /// The stage the contact was last placed in, on any board; null when on none.
    pub crm_stage: Option<CrmStage>,
    /// The boards the contact is on.
    pub board_ids: Vec<Id>,
    pub created_at: Timestamp,
    pub updated_at: Timestamp,
}

impl From<&proto::Contact> for Contact {
    fn from(contact: &proto::Contact) -> Self {
        Self {
            id: Id::stored(contact.id.clone()),
            first_name: contact.first_name.clone(),
            last_name: contact.last_name.clone(),
            email: contact.email.clone(),
            number: contact.number.clone(),
            carrier: contact.carrier.clone(),
            custom_fields: serde_json::from_str(&contact.custom_fields).unwrap_or_default(),
            tags: contact.tags.iter().map(Tag::from).collect(),
            crm_stage: contact.crm_stage.as_ref().map(|stage| CrmStage {
                id: Id::stored(stage.id.clone()),
                name: stage.name.clone(),
                board_id: Id::stored(stage.board_id.clone()),
            }),
            board_ids: contact.board_ids.iter().cloned().map(Id::stored).collect(),
            created_at: Timestamp::from_ms(contact.created_at_ms),
            updated_at: Timestamp::from_ms(contact.updated_at_ms),
        }
    }
}

/// One page of contacts, with what a client needs to show them.
#[derive(Serialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
#[schemars(deny_unknown_fields)]
pub struct ContactPage {
    pub data: Vec<Contact>,
    pub pagination: Pagination,
    /// The team's custom fields.
    pub custom_field_schemas: Vec<CustomFieldSchema>,
    /// Every tag of the team, by name.
    pub available_tags: Vec<Tag>,
}

/// An item of a bulk create that was not written.
#[derive(Serialize, JsonSchema)]
#[schemars(deny_unknown_fields)]
pub struct BulkFailure {
    /// Its position in the request's list (`contacts`, `references`), from 0.
    pub index: u32,
    /// The code the single create would answer, e.g. `VALIDATION_ERROR`, `CONTACT_EXISTS`.
    pub code: String,
    pub error: String,
    /// The violated fields of the item, or the existing contact for `CONTACT_EXISTS`.
    pub details: Vec<FieldError>,
}

/// What a bulk create did.
#[derive(Serialize, JsonSchema)]
#[schemars(deny_unknown_fields)]
pub struct BulkResult {
    /// The contacts written, in request order.
    pub created: Vec<Contact>,
    /// The items not written, in request order.
    pub failed: Vec<BulkFailure>,
}

/// A note on a contact.
#[derive(Serialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
#[schemars(deny_unknown_fields)]
pub struct Note {
    pub id: Id,
    pub note: String,
    #[serde(rename = "type")]
    pub kind: NoteKind,
    pub created_at: Timestamp,
    /// The name of the API key that wrote it.
    pub created_by: String,
}

impl From<&proto::Note> for Note {
    fn from(note: &proto::Note) -> Self {
        Self {
            id: Id::stored(note.id.clone()),
            note: note.note.clone(),
            kind: NoteKind::parse(&note.r#type),
            created_at: Timestamp::from_ms(note.created_at_ms),
            created_by: note.created_by.clone(),
        }
    }
}
