//! The calls and chats of an export (`GET /v1/calls/export`, `GET /v1/chats/export`): the
//! list's filters, read in pages of [`EXPORT_CHUNK`] by keyset on the start and the id, oldest
//! first, so that each page is a walk of the start index from where the last one stopped,
//! whatever the number of rows, and a row written meanwhile is neither lost nor repeated by a
//! page boundary.

use sqlx::Row;
use switchboard_kit::ServiceResult;
use switchboard_kit::db::Engine;
use switchboard_kit::listing::Arg;
use switchboard_proto::v1::{Call, Chat};

use super::calls::{CALL_COLUMNS, call_from_row};
use super::chats::{CHAT_COLUMNS, chat_from_row};
use super::{CallFilter, ChatFilter, ConversationStore, check_ids};

/// Calls per page read, and per chunk streamed.
pub const EXPORT_CHUNK: i64 = 1000;

/// Where the next page starts: after the row with this start and id.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ExportCursor {
    pub started_at_ms: i64,
    pub id: String,
}

impl ConversationStore {
    /// The names of the custom analysis fields of the calls the filter selects, sorted: the
    /// export's `custom.<name>` columns. Read from the calls themselves, so that a field an
    /// agent no longer declares still has its column where calls hold it.
    pub async fn export_custom_names(&self, team_id: &str, filter: &CallFilter) -> ServiceResult<Vec<String>> {
        check_ids(&[("teamId", team_id)])?;
        super::calls::validate_filter(filter)?;
        let mut conn = self.db.pool().acquire().await?;
        let conditions = self.call_conditions(&mut conn, team_id, filter).await?;
        let keys = match self.db.engine() {
            Engine::Sqlite => "SELECT DISTINCT j.key AS name FROM calls c, json_each(c.analysis_custom) j",
            Engine::Postgres => "SELECT DISTINCT jsonb_object_keys(c.analysis_custom::jsonb) AS name FROM calls c",
        };
        let sql = format!("{keys} WHERE c.analysis_custom IS NOT NULL AND {} ORDER BY name", conditions.sql());
        let rows = conditions.bind(sqlx::query(&sql)).fetch_all(&mut *conn).await?;
        Ok(rows.iter().map(|row| row.try_get("name")).collect::<Result<_, _>>()?)
    }

    /// The next page of the export after `after` (from the first call when `None`), without
    /// transcripts; fewer than [`EXPORT_CHUNK`] calls means it is the last.
    pub async fn export_page(
        &self,
        team_id: &str,
        filter: &CallFilter,
        after: Option<&ExportCursor>,
    ) -> ServiceResult<Vec<Call>> {
        check_ids(&[("teamId", team_id)])?;
        let mut conn = self.db.pool().acquire().await?;
        let mut conditions = self.call_conditions(&mut conn, team_id, filter).await?;
        if let Some(after) = after {
            let started = conditions.arg(Arg::Int(after.started_at_ms));
            let id = conditions.arg(Arg::Text(after.id.clone()));
            conditions.and(format!("(c.started_at > {started} OR (c.started_at = {started} AND c.id > {id}))"));
        }
        let sql = format!(
            "SELECT {CALL_COLUMNS} FROM calls c WHERE {} ORDER BY c.started_at, c.id LIMIT {EXPORT_CHUNK}",
            conditions.sql()
        );
        let rows = conditions.bind(sqlx::query(&sql)).fetch_all(&mut *conn).await?;
        Ok(rows.iter().map(call_from_row).collect::<Result<_, _>>()?)
    }

    /// The next page of a chat export after `after` (from the first chat when `None`), without
    /// messages; fewer than [`EXPORT_CHUNK`] chats means it is the last. The filter's page and
    /// sort are not used.
    pub async fn export_chat_page(
        &self,
        team_id: &str,
        filter: &ChatFilter,
        after: Option<&ExportCursor>,
    ) -> ServiceResult<Vec<Chat>> {
        check_ids(&[("teamId", team_id)])?;
        super::chats::validate_filter(filter)?;
        let mut conn = self.db.pool().acquire().await?;
        let mut conditions = self.chat_conditions(&mut conn, team_id, filter).await?;
        if let Some(after) = after {
            let created = conditions.arg(Arg::Int(after.started_at_ms));
            let id = conditions.arg(Arg::Text(after.id.clone()));
            conditions.and(format!("(c.created_at > {created} OR (c.created_at = {created} AND c.id > {id}))"));
        }
        let sql = format!(
            "SELECT {CHAT_COLUMNS} FROM chats c WHERE {} ORDER BY c.created_at, c.id LIMIT {EXPORT_CHUNK}",
            conditions.sql()
        );
        let rows = conditions.bind(sqlx::query(&sql)).fetch_all(&mut *conn).await?;
        Ok(rows.iter().map(chat_from_row).collect::<Result<_, _>>()?)
    }
}
