//! Kanban boards: named columns (stages) in position order. A contact sits in at most one
//! stage per board; its `crmStage` is the stage it was placed in last, on any board.

use std::collections::{HashMap, HashSet};

use sqlx::any::AnyRow;
use sqlx::{AnyConnection, Row};
use switchboard_kit::limits;
use switchboard_kit::time::now_ms;
use switchboard_kit::vocabulary::EventType;
use switchboard_kit::{FieldViolation, ServiceError, ServiceResult, validate};
use switchboard_proto::v1::{
    Board, Contact, CreateBoardRequest, SetContactBoardsRequest, Stage, StageInput, UpdateBoardRequest,
};

use super::contacts::{find_contact, first_stages, hydrate_one, place, touch};
use super::tags::color_violation;
use super::{
    CrmStore, board_not_found, check_ids, distinct, id_list_violations, select_in, stage_not_found, uuid_violation,
};

/// The colours of stages created without one, by position (wrapping around).
pub const STAGE_COLORS: [&str; 8] =
    ["#6B7280", "#3B82F6", "#10B981", "#F59E0B", "#EF4444", "#8B5CF6", "#EC4899", "#14B8A6"];

fn board_from_row(row: &AnyRow) -> Result<Board, sqlx::Error> {
    Ok(Board {
        id: row.try_get("id")?,
        name: row.try_get("name")?,
        stages: Vec::new(),
        contact_count: 0,
        created_at_ms: row.try_get("created_at")?,
        updated_at_ms: row.try_get("updated_at")?,
    })
}

fn stage_from_row(row: &AnyRow) -> Result<Stage, sqlx::Error> {
    Ok(Stage {
        id: row.try_get("id")?,
        name: row.try_get("name")?,
        position: u32::try_from(row.try_get::<i64, _>("position")?).unwrap_or_default(),
        color: row.try_get("color")?,
    })
}

/// Fills in the boards' stages (in position order) and how many contacts each holds.
async fn with_stages(conn: &mut AnyConnection, mut boards: Vec<Board>) -> ServiceResult<Vec<Board>> {
    if boards.is_empty() {
        return Ok(boards);
    }
    let ids: Vec<String> = boards.iter().map(|board| board.id.clone()).collect();
    let rows = select_in(
        conn,
        "SELECT board_id, id, name, position, color FROM stages WHERE board_id IN ({ids}) ORDER BY position, id",
        &[],
        &ids,
    )
    .await?;
    let mut stages: HashMap<String, Vec<Stage>> = HashMap::new();
    for row in &rows {
        stages.entry(row.try_get("board_id")?).or_default().push(stage_from_row(row)?);
    }
    let rows = select_in(
        conn,
        "SELECT board_id, COUNT(*) AS n FROM contact_placements WHERE board_id IN ({ids}) GROUP BY board_id",
        &[],
        &ids,
    )
    .await?;
    let mut counts: HashMap<String, i64> = HashMap::new();
    for row in &rows {
        counts.insert(row.try_get("board_id")?, row.try_get("n")?);
    }
    for board in &mut boards {
        board.stages = stages.remove(&board.id).unwrap_or_default();
        board.contact_count = counts.get(&board.id).copied().map_or(0, |n| u64::try_from(n).unwrap_or_default());
    }
    Ok(boards)
}

async fn with_stages_one(conn: &mut AnyConnection, board: Board) -> ServiceResult<Board> {
    with_stages(conn, vec![board])
        .await?
        .pop()
        .ok_or_else(|| ServiceError::internal(anyhow::anyhow!("a board went missing while reading it")))
}

async fn find_board(conn: &mut AnyConnection, team_id: &str, board_id: &str, lock: &str) -> ServiceResult<Board> {
    let sql = format!("SELECT id, name, created_at, updated_at FROM boards WHERE team_id = $1 AND id = $2{lock}");
    let row = sqlx::query(&sql).bind(team_id).bind(board_id).fetch_optional(conn).await?;
    row.as_ref().map(board_from_row).transpose()?.ok_or_else(board_not_found)
}

/// The violations of a board's stage list: its length, each name and colour, ids (which a new
/// board's stages must not have), and names or ids given twice (names regardless of case).
fn stage_violations(stages: &[StageInput], creating: bool) -> Vec<FieldViolation> {
    let count = i64::try_from(stages.len()).unwrap_or(i64::MAX);
    let mut violations: Vec<FieldViolation> = limits::BOARD_STAGES.check("stages", count).into_iter().collect();
    let (mut names, mut ids) = (HashSet::new(), HashSet::new());
    for (index, stage) in stages.iter().enumerate() {
        let name = stage.name.trim();
        violations.extend(limits::STAGE_NAME.check(&format!("stages[{index}].name"), name));
        if !name.is_empty() && !names.insert(name.to_lowercase()) {
            violations.push(FieldViolation::new(format!("stages[{index}].name"), "is the name of another stage"));
        }
        violations.extend(color_violation(&format!("stages[{index}].color"), &stage.color));
        if let Some(id) = &stage.id {
            let field = format!("stages[{index}].id");
            if creating {
                violations.push(FieldViolation::new(field, "must not be given for a new board"));
            } else if let Some(violation) = uuid_violation(&field, id) {
                violations.push(violation);
            } else if !ids.insert(id.as_str()) {
                violations.push(FieldViolation::new(field, "is listed twice"));
            }
        }
    }
    violations
}

fn stage_color(stage: &StageInput, position: usize) -> String {
    if stage.color.is_empty() { STAGE_COLORS[position % STAGE_COLORS.len()].to_owned() } else { stage.color.clone() }
}

async fn insert_stage(
    conn: &mut AnyConnection,
    (team_id, board_id): (&str, &str),
    name: &str,
    position: usize,
    color: &str,
    now: i64,
) -> ServiceResult<()> {
    sqlx::query(
        "INSERT INTO stages (id, board_id, team_id, name, position, color, created_at) \
         VALUES ($1, $2, $3, $4, $5, $6, $7)",
    )
    .bind(uuid::Uuid::now_v7().to_string())
    .bind(board_id)
    .bind(team_id)
    .bind(name)
    .bind(i64::try_from(position).unwrap_or(i64::MAX))
    .bind(color)
    .bind(now)
    .execute(conn)
    .await?;
    Ok(())
}

impl CrmStore {
    /// The team's boards, oldest first, with their stages and contact counts.
    pub async fn list_boards(&self, team_id: &str) -> ServiceResult<Vec<Board>> {
        check_ids(&[("teamId", team_id)])?;
        let mut conn = self.db.pool().acquire().await?;
        let rows = sqlx::query(
            "SELECT id, name, created_at, updated_at FROM boards WHERE team_id = $1 ORDER BY created_at, id",
        )
        .bind(team_id)
        .fetch_all(&mut *conn)
        .await?;
        let boards = rows.iter().map(board_from_row).collect::<Result<Vec<_>, _>>()?;
        with_stages(&mut conn, boards).await
    }

    pub async fn board(&self, team_id: &str, board_id: &str) -> ServiceResult<Board> {
        check_ids(&[("teamId", team_id), ("boardId", board_id)])?;
        let mut conn = self.db.pool().acquire().await?;
        let board = find_board(&mut conn, team_id, board_id, "").await?;
        with_stages_one(&mut conn, board).await
    }

    /// A new board with 1 to `BOARD_STAGES` stages in the order given; a stage without a
    /// colour gets one of [`STAGE_COLORS`] by position. Board names need not be unique.
    pub async fn create_board(&self, request: &CreateBoardRequest) -> ServiceResult<Board> {
        let name = request.name.trim();
        let mut violations = vec![uuid_violation("teamId", &request.team_id), limits::BOARD_NAME.check("name", name)];
        violations.extend(stage_violations(&request.stages, true).into_iter().map(Some));
        validate(violations)?;
        let mut tx = self.db.begin_write().await?;
        let now = now_ms();
        let board_id = uuid::Uuid::now_v7().to_string();
        sqlx::query("INSERT INTO boards (id, team_id, name, created_at, updated_at) VALUES ($1, $2, $3, $4, $4)")
            .bind(board_id.as_str())
            .bind(request.team_id.as_str())
            .bind(name)
            .bind(now)
            .execute(&mut *tx)
            .await?;
        for (position, stage) in request.stages.iter().enumerate() {
            let color = stage_color(stage, position);
            insert_stage(&mut tx, (&request.team_id, &board_id), stage.name.trim(), position, &color, now).await?;
        }
        let board = find_board(&mut tx, &request.team_id, &board_id, "").await?;
        let board = with_stages_one(&mut tx, board).await?;
        tx.commit().await?;
        Ok(board)
    }

    /// Renames the board and/or sets its stages: a stage listed with its id keeps it (and its
    /// contacts) and takes the name, colour (empty: unchanged) and position of the list; one
    /// without an id is new; one left out is removed, which is a conflict while it holds
    /// contacts. An id that is not a stage of this board is `NOT_FOUND`.
    pub async fn update_board(&self, request: &UpdateBoardRequest) -> ServiceResult<Board> {
        let (team_id, board_id) = (request.team_id.as_str(), request.board_id.as_str());
        check_ids(&[("teamId", team_id), ("boardId", board_id)])?;
        let name = request.name.as_deref().map(str::trim);
        let mut violations = vec![name.and_then(|name| limits::BOARD_NAME.check("name", name))];
        if let Some(list) = &request.stages {
            violations.extend(stage_violations(&list.stages, false).into_iter().map(Some));
        }
        validate(violations)?;

        let mut tx = self.db.begin_write().await?;
        let board = find_board(&mut tx, team_id, board_id, self.db.for_update()).await?;
        let now = now_ms();
        if let Some(list) = &request.stages {
            let current = sqlx::query("SELECT id, name, position, color FROM stages WHERE board_id = $1")
                .bind(board_id)
                .fetch_all(&mut *tx)
                .await?;
            let current: HashMap<String, Stage> = current
                .iter()
                .map(|row| stage_from_row(row).map(|stage| (stage.id.clone(), stage)))
                .collect::<Result<_, _>>()?;
            if list.stages.iter().filter_map(|stage| stage.id.as_ref()).any(|id| !current.contains_key(id)) {
                return Err(stage_not_found());
            }
            let kept: HashSet<&str> = list.stages.iter().filter_map(|stage| stage.id.as_deref()).collect();
            let mut removed: Vec<&Stage> = current.values().filter(|stage| !kept.contains(stage.id.as_str())).collect();
            removed.sort_by_key(|stage| stage.position);
            let mut holding = Vec::new();
            for stage in &removed {
                let n: i64 = sqlx::query("SELECT COUNT(*) AS n FROM contact_placements WHERE stage_id = $1")
                    .bind(stage.id.as_str())
                    .fetch_one(&mut *tx)
                    .await?
                    .try_get("n")?;
                if n > 0 {
                    let message = format!("stage {} ({}) holds {n} contacts", stage.id, stage.name);
                    holding.push(FieldViolation::new("stages", message));
                }
            }
            if !holding.is_empty() {
                return Err(ServiceError {
                    details: holding,
                    ..ServiceError::conflict("A stage that holds contacts cannot be removed")
                        .with_hint("Move its contacts to another stage first.")
                });
            }
            for stage in &removed {
                sqlx::query("DELETE FROM stages WHERE id = $1").bind(stage.id.as_str()).execute(&mut *tx).await?;
            }
            for (position, stage) in list.stages.iter().enumerate() {
                match stage.id.as_deref().and_then(|id| current.get(id)) {
                    Some(existing) => {
                        let color = if stage.color.is_empty() { existing.color.clone() } else { stage.color.clone() };
                        sqlx::query("UPDATE stages SET name = $1, position = $2, color = $3 WHERE id = $4")
                            .bind(stage.name.trim())
                            .bind(i64::try_from(position).unwrap_or(i64::MAX))
                            .bind(color)
                            .bind(existing.id.as_str())
                            .execute(&mut *tx)
                            .await?;
                    }
                    None => {
                        let color = stage_color(stage, position);
                        insert_stage(&mut tx, (team_id, board_id), stage.name.trim(), position, &color, now).await?;
                    }
                }
            }
        }
        let name = name.unwrap_or(board.name.as_str());
        sqlx::query("UPDATE boards SET name = $1, updated_at = $2 WHERE id = $3")
            .bind(name)
            .bind(now)
            .bind(board_id)
            .execute(&mut *tx)
            .await?;
        let board = find_board(&mut tx, team_id, board_id, "").await?;
        let board = with_stages_one(&mut tx, board).await?;
        tx.commit().await?;
        Ok(board)
    }

    /// Deletes the board with its stages; its contacts leave it (their `crmStage` falls back
    /// to their latest other placement). Returns it as it was.
    pub async fn delete_board(&self, team_id: &str, board_id: &str) -> ServiceResult<Board> {
        check_ids(&[("teamId", team_id), ("boardId", board_id)])?;
        let mut tx = self.db.begin_write().await?;
        let board = find_board(&mut tx, team_id, board_id, self.db.for_update()).await?;
        let board = with_stages_one(&mut tx, board).await?;
        for table in ["contact_placements", "stages"] {
            sqlx::query(&format!("DELETE FROM {table} WHERE board_id = $1")).bind(board_id).execute(&mut *tx).await?;
        }
        sqlx::query("DELETE FROM boards WHERE id = $1 AND team_id = $2")
            .bind(board_id)
            .bind(team_id)
            .execute(&mut *tx)
            .await?;
        tx.commit().await?;
        Ok(board)
    }

    /// Adds the contact to boards (each new one in its first stage, in the order given, so
    /// the last new one holds its `crmStage`; a board it is on already keeps its stage), or
    /// with `replace` also takes it off the boards not listed.
    pub async fn set_contact_boards(&self, request: &SetContactBoardsRequest) -> ServiceResult<Contact> {
        let (team_id, contact_id) = (request.team_id.as_str(), request.contact_id.as_str());
        let mut violations = vec![uuid_violation("teamId", team_id), uuid_violation("contactId", contact_id)];
        violations.extend(id_list_violations("boardIds", &request.board_ids).into_iter().map(Some));
        validate(violations)?;
        let board_ids = distinct(request.board_ids.iter().cloned());
        let mut tx = self.db.begin_write().await?;
        let contact = find_contact(&mut tx, team_id, contact_id, self.db.for_update()).await?;
        let first = first_stages(&mut tx, team_id, &board_ids).await?;
        if board_ids.iter().any(|id| !first.contains_key(id)) {
            return Err(board_not_found());
        }
        let rows = sqlx::query("SELECT board_id FROM contact_placements WHERE contact_id = $1")
            .bind(contact_id)
            .fetch_all(&mut *tx)
            .await?;
        let on: HashSet<String> = rows.iter().map(|row| row.try_get("board_id")).collect::<Result<_, _>>()?;
        if request.replace {
            for board_id in on.iter().filter(|id| !board_ids.contains(id)) {
                sqlx::query("DELETE FROM contact_placements WHERE contact_id = $1 AND board_id = $2")
                    .bind(contact_id)
                    .bind(board_id.as_str())
                    .execute(&mut *tx)
                    .await?;
            }
        }
        for board_id in board_ids.iter().filter(|id| !on.contains(*id)) {
            let stage_id = first.get(board_id).map_or("", String::as_str);
            place(&mut tx, team_id, contact_id, (board_id, stage_id)).await?;
        }
        let mut contact = contact;
        contact.updated_at_ms = touch(&mut tx, contact_id).await?;
        let contact = hydrate_one(&mut tx, contact).await?;
        super::contacts::told(&mut tx, EventType::ContactUpdated, &contact).await?;
        tx.commit().await?;
        Ok(contact)
    }
}
