//! Ids as the API writes and reads them: UUIDs, stored lowercase and hyphenated.

use std::borrow::Cow;

use schemars::{JsonSchema, Schema, SchemaGenerator, json_schema};
use serde::{Deserialize, Deserializer, Serialize};

/// A UUID in the form ids are stored in (lowercase, hyphenated), from any spelling that names
/// the same UUID (uppercase, without hyphens, `urn:uuid:`); `None` when it is not a UUID.
pub fn canonical_uuid(text: &str) -> Option<String> {
    uuid::Uuid::parse_str(text).ok().map(|id| id.to_string())
}

/// A UUID as clients may spell it (any case, without hyphens, `urn:uuid:`), held in the form ids
/// are stored in (lowercase, hyphenated).
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(transparent)]
pub struct Id(String);

impl Id {
    /// An id as a service answers it: already in the stored form.
    pub fn stored(id: String) -> Self {
        Self(id)
    }

    pub fn as_str(&self) -> &str {
        &self.0
    }

    pub fn into_string(self) -> String {
        self.0
    }
}

impl std::fmt::Display for Id {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.0)
    }
}

impl<'de> Deserialize<'de> for Id {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        let text = Cow::<str>::deserialize(deserializer)?;
        canonical_uuid(&text).map(Id).ok_or_else(|| serde::de::Error::custom("must be a UUID"))
    }
}

impl JsonSchema for Id {
    fn inline_schema() -> bool {
        true
    }

    fn schema_name() -> Cow<'static, str> {
        "Id".into()
    }

    fn json_schema(_: &mut SchemaGenerator) -> Schema {
        json_schema!({ "type": "string", "format": "uuid" })
    }
}

/// Ids given as one comma-separated parameter (`tagIds=a,b`), each a UUID in any spelling.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct IdList(Vec<String>);

impl IdList {
    pub fn into_strings(self) -> Vec<String> {
        self.0
    }
}

impl IdList {
    /// The ids of `text` when it is what [`ID_LIST_PATTERN`] admits: 1 to [`ID_LIST_MAX`]
    /// hyphenated UUIDs (any case) separated by commas, without spaces.
    fn parse(text: &str) -> Option<Vec<String>> {
        let hyphenated = |part: &str| part.len() == 36 && part.matches('-').count() == 4;
        let ids: Option<Vec<String>> =
            text.split(',').map(|part| hyphenated(part).then(|| canonical_uuid(part)).flatten()).collect();
        ids.filter(|ids| ids.len() <= ID_LIST_MAX)
    }
}

/// The check of [`ID_LIST_PATTERN`].
pub fn is_id_list(text: &str) -> bool {
    IdList::parse(text).is_some()
}

impl<'de> Deserialize<'de> for IdList {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        let text = Cow::<str>::deserialize(deserializer)?;
        IdList::parse(&text).map(IdList).ok_or_else(|| serde::de::Error::custom(ID_LIST_MESSAGE))
    }
}

impl JsonSchema for IdList {
    fn inline_schema() -> bool {
        true
    }

    fn schema_name() -> Cow<'static, str> {
        "IdList".into()
    }

    fn json_schema(_: &mut SchemaGenerator) -> Schema {
        json_schema!({ "type": "string", "pattern": ID_LIST_PATTERN })
    }
}

const ID_LIST_MAX: usize = 100;

pub const ID_LIST_MESSAGE: &str = "must be 1 to 100 UUIDs separated by commas";

/// One to [`ID_LIST_MAX`] hyphenated UUIDs separated by commas.
pub const ID_LIST_PATTERN: &str = concat!(
    "^[0-9A-Fa-f]{8}-[0-9A-Fa-f]{4}-[0-9A-Fa-f]{4}-[0-9A-Fa-f]{4}-[0-9A-Fa-f]{12}",
    "(,[0-9A-Fa-f]{8}-[0-9A-Fa-f]{4}-[0-9A-Fa-f]{4}-[0-9A-Fa-f]{4}-[0-9A-Fa-f]{12}){0,99}$"
);
