//! Contact tags.

use schemars::JsonSchema;
use serde::Serialize;
use switchboard_proto::v1 as proto;

use crate::id::Id;

/// A tag.
#[derive(Serialize, JsonSchema)]
#[schemars(deny_unknown_fields)]
pub struct Tag {
    pub id: Id,
    pub name: String,
    /// `#RRGGBB`.
    pub color: String,
}

impl From<&proto::Tag> for Tag {
    fn from(tag: &proto::Tag) -> Self {
        Self { id: Id::stored(tag.id.clone()), name: tag.name.clone(), color: tag.color.clone() }
    }
}
