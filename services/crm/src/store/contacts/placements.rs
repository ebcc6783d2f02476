//! Where contacts sit on boards: a contact is on a board in one of its stages, and its latest
//! placement is its `crmStage`, so placements keep an order even within one millisecond.

use std::collections::HashMap;

use sqlx::{AnyConnection, Row};
use switchboard_kit::ServiceResult;
use switchboard_kit::time::now_ms;

use crate::store::{select_in, stage_not_found};

/// The first stage (lowest position) of each of these boards that is the team's.
pub(in crate::store) async fn first_stages(
    conn: &mut AnyConnection,
    team_id: &str,
    board_ids: &[String],
) -> ServiceResult<HashMap<String, String>> {
    let rows = select_in(
        conn,
        "SELECT s.board_id, s.id FROM stages s WHERE s.team_id = $1 AND s.board_id IN ({ids}) ORDER BY s.position, s.id",
        &[team_id],
        board_ids,
    )
    .await?;
    let mut first = HashMap::new();
    for row in &rows {
        first.entry(row.try_get("board_id")?).or_insert(row.try_get("id")?);
    }
    Ok(first)
}

/// Puts the contact in `stage_id` on its board (moving it if it sits elsewhere on that
/// board), as its latest placement: `placed_at` is kept increasing per contact, so that two
/// placements within one millisecond still have an order.
pub(in crate::store) async fn place(
    conn: &mut AnyConnection,
    team_id: &str,
    contact_id: &str,
    (board_id, stage_id): (&str, &str),
) -> ServiceResult<()> {
    let latest: Option<i64> =
        sqlx::query("SELECT MAX(placed_at) AS latest FROM contact_placements WHERE contact_id = $1")
            .bind(contact_id)
            .fetch_one(&mut *conn)
            .await?
            .try_get("latest")?;
    let placed_at = latest.map_or(now_ms(), |latest| now_ms().max(latest + 1));
    sqlx::query(
        "INSERT INTO contact_placements (contact_id, board_id, stage_id, team_id, placed_at) VALUES ($1, $2, $3, $4, $5) \
         ON CONFLICT (contact_id, board_id) DO UPDATE SET stage_id = excluded.stage_id, placed_at = excluded.placed_at",
    )
    .bind(contact_id)
    .bind(board_id)
    .bind(stage_id)
    .bind(team_id)
    .bind(placed_at)
    .execute(conn)
    .await?;
    Ok(())
}

/// The team's stage of this id: (board, stage).
pub(super) async fn find_stage(
    conn: &mut AnyConnection,
    team_id: &str,
    stage_id: &str,
) -> ServiceResult<(String, String)> {
    let row = sqlx::query("SELECT board_id, id FROM stages WHERE team_id = $1 AND id = $2")
        .bind(team_id)
        .bind(stage_id)
        .fetch_optional(conn)
        .await?
        .ok_or_else(stage_not_found)?;
    Ok((row.try_get("board_id")?, row.try_get("id")?))
}
