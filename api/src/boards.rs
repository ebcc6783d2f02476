//! Kanban boards and their stages.

use schemars::JsonSchema;
use serde::Serialize;
use switchboard_proto::v1 as proto;

use crate::id::Id;
use crate::time::Timestamp;

/// A column of a board.
#[derive(Serialize, JsonSchema)]
#[schemars(deny_unknown_fields)]
pub struct Stage {
    pub id: Id,
    pub name: String,
    /// From 0, left to right.
    pub position: u32,
    /// `#RRGGBB`.
    pub color: String,
}

/// A kanban board.
#[derive(Serialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
#[schemars(deny_unknown_fields)]
pub struct Board {
    pub id: Id,
    pub name: String,
    /// In column order.
    pub stages: Vec<Stage>,
    /// Contacts on the board, in any stage.
    pub contact_count: u64,
    pub created_at: Timestamp,
    pub updated_at: Timestamp,
}

impl From<&proto::Board> for Board {
    fn from(board: &proto::Board) -> Self {
        Self {
            id: Id::stored(board.id.clone()),
            name: board.name.clone(),
            stages: board
                .stages
                .iter()
                .map(|stage| Stage {
                    id: Id::stored(stage.id.clone()),
                    name: stage.name.clone(),
                    position: stage.position,
                    color: stage.color.clone(),
                })
                .collect(),
            contact_count: board.contact_count,
            created_at: Timestamp::from_ms(board.created_at_ms),
            updated_at: Timestamp::from_ms(board.updated_at_ms),
        }
    }
}
