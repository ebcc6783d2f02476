//! `/boards`: kanban boards of contacts (CRM service). A board's columns are its stages; a
//! contact sits in at most one stage of each board.

use schemars::JsonSchema;
use serde::Deserialize;
use switchboard_api::boards::Board;
use switchboard_kit::vocabulary::AuditAction;
use switchboard_kit::{ServiceResult, limits};
use switchboard_proto::v1::{
    BoardRef, CreateBoardRequest, ListBoardsRequest, StageInput, StageList, UpdateBoardRequest,
};

use super::groups::BOARDS;
use crate::call::Call;
use crate::endpoint::{Created, Data, Endpoint, Id, Input, Json, List, Nothing, Updated};

const BOARD_GONE: &str = "Board not found";

pub fn endpoints() -> Vec<Endpoint> {
    vec![
        Endpoint::get("/v1/boards", list)
            .doc("listBoards", BOARDS, "The team's kanban boards with their stages")
            .lists("boardId")
            .about("Every board of the team, oldest first, its stages in column order; not paged."),
        Endpoint::post("/v1/boards", create)
            .audited(AuditAction::BoardCreated)
            .doc("createBoard", BOARDS, "Create a board with its stages")
            .creates("boardId")
            .about("Stages are the columns, in the order given; a stage without `color` gets one of a palette."),
        Endpoint::get("/v1/boards/{boardId}", get)
            .doc("getBoard", BOARDS, "A board with its stages")
            .fails(404, BOARD_GONE),
        Endpoint::put("/v1/boards/{boardId}", update)
            .audited(AuditAction::BoardUpdated)
            .doc("updateBoard", BOARDS, "Rename a board, or change its stages")
            .about(
                "`stages`, when given, is the whole new list of columns in order: a stage listed with its `id` \
                 keeps it (and its contacts), one without an `id` is new, and a stage left out is removed. \
                 Removing a stage that still holds contacts is refused with 409; move them first.",
            )
            .fails(404, "Board not found, or Stage not found (an `id` that is not one of this board's stages)")
            .fails(409, "A stage left out still holds contacts."),
        Endpoint::delete("/v1/boards/{boardId}", delete)
            .audited(AuditAction::BoardDeleted)
            .doc("deleteBoard", BOARDS, "Delete a board; its contacts leave it")
            .about("The contacts stay; they are only taken off this board.")
            .fails(404, BOARD_GONE),
    ]
}

/// A board's id in the path.
#[derive(Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct BoardPath {
    pub board_id: Id,
}

/// A column of a new board. Other members are ignored.
#[derive(Deserialize, JsonSchema)]
pub struct NewStage {
    #[schemars(length(min = limits::STAGE_NAME.min, max = limits::STAGE_NAME.max))]
    pub name: String,
    /// `#RRGGBB`; absent or null: from a palette.
    #[schemars(extend("pattern" = limits::COLOR_PATTERN))]
    pub color: Option<String>,
}

/// A column of an updated board. Other members are ignored.
#[derive(Deserialize, JsonSchema)]
pub struct StageChange {
    /// One of this board's stages, which keeps its id and contacts; absent: a new stage.
    pub id: Option<Id>,
    #[schemars(length(min = limits::STAGE_NAME.min, max = limits::STAGE_NAME.max))]
    pub name: String,
    /// `#RRGGBB`; absent or null: a kept stage keeps its colour, a new one gets one of a palette.
    #[schemars(extend("pattern" = limits::COLOR_PATTERN))]
    pub color: Option<String>,
}

/// Other members are ignored.
#[derive(Deserialize, JsonSchema)]
pub struct CreateBoard {
    #[schemars(length(min = limits::BOARD_NAME.min, max = limits::BOARD_NAME.max))]
    pub name: String,
    /// The columns, in order.
    #[schemars(length(min = limits::BOARD_STAGES.min, max = limits::BOARD_STAGES.max))]
    pub stages: Vec<NewStage>,
}

/// A partial update: members left out (or null) keep their value. Other members are ignored.
#[derive(Deserialize, JsonSchema)]
pub struct UpdateBoard {
    #[schemars(length(min = limits::BOARD_NAME.min, max = limits::BOARD_NAME.max))]
    pub name: Option<String>,
    /// The whole new list of columns, in order.
    #[schemars(length(min = limits::BOARD_STAGES.min, max = limits::BOARD_STAGES.max))]
    pub stages: Option<Vec<StageChange>>,
}

fn board_ref(call: &Call, path: &BoardPath) -> BoardRef {
    BoardRef { team_id: call.team_id().to_owned(), board_id: path.board_id.to_string() }
}

async fn list(call: Call, _: Input) -> ServiceResult<List<Board>> {
    let request = ListBoardsRequest { team_id: call.team_id().to_owned() };
    let boards = call.services.crm.clone().list_boards(request).await?.into_inner().boards;
    Ok(List::new(boards.iter().map(Board::from).collect()))
}

async fn get(call: Call, input: Input<BoardPath>) -> ServiceResult<Data<Board>> {
    let board = call.services.crm.clone().get_board(board_ref(&call, &input.path)).await?.into_inner();
    Ok(Data::new(Board::from(&board)))
}

async fn create(call: Call, input: Input<Nothing, Nothing, Json<CreateBoard>>) -> ServiceResult<Created<Board>> {
    let body = input.body.0;
    let stages = body
        .stages
        .into_iter()
        .map(|stage| StageInput { id: None, name: stage.name, color: stage.color.unwrap_or_default() })
        .collect();
    let request = CreateBoardRequest { team_id: call.team_id().to_owned(), name: body.name, stages };
    let board = call.services.crm.clone().create_board(request).await?.into_inner();
    Ok(Created::new(Board::from(&board), "Board created successfully"))
}

async fn update(call: Call, input: Input<BoardPath, Nothing, Json<UpdateBoard>>) -> ServiceResult<Updated<Board>> {
    let body = input.body.0;
    let stages = body.stages.map(|stages| StageList {
        stages: stages
            .into_iter()
            .map(|stage| StageInput {
                id: stage.id.map(Id::into_string),
                name: stage.name,
                color: stage.color.unwrap_or_default(),
            })
            .collect(),
    });
    let request = UpdateBoardRequest {
        team_id: call.team_id().to_owned(),
        board_id: input.path.board_id.into_string(),
        name: body.name,
        stages,
    };
    let board = call.services.crm.clone().update_board(request).await?.into_inner();
    Ok(Updated::new(Board::from(&board), "Board updated successfully"))
}

async fn delete(call: Call, input: Input<BoardPath>) -> ServiceResult<Updated<Board>> {
    let board = call.services.crm.clone().delete_board(board_ref(&call, &input.path)).await?.into_inner();
    Ok(Updated::new(Board::from(&board), "Board deleted successfully"))
}
