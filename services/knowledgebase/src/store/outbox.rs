//! Index changes waiting to be applied; see `crate::sync`.

use sqlx::{AnyConnection, Row};
use switchboard_kit::ServiceResult;
use switchboard_kit::time::now_ms;

use super::KnowledgeStore;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Op {
    Upsert,
    Delete,
    DeleteKnowledgebase,
}

impl Op {
    fn as_str(self) -> &'static str {
        match self {
            Op::Upsert => "upsert",
            Op::Delete => "delete",
            Op::DeleteKnowledgebase => "delete_knowledgebase",
        }
    }
}

#[derive(Debug, Clone)]
pub struct OutboxItem {
    pub id: String,
    pub entry_id: String,
    pub knowledgebase_id: String,
    pub op: String,
}

/// Records a change; call it in the transaction that makes it.
pub(crate) async fn record(
    conn: &mut AnyConnection,
    entry_id: &str,
    knowledgebase_id: &str,
    op: Op,
) -> ServiceResult<()> {
    sqlx::query(
        "INSERT INTO index_outbox (id, entry_id, knowledgebase_id, op, created_at) VALUES ($1, $2, $3, $4, $5)",
    )
    .bind(uuid::Uuid::now_v7().to_string())
    .bind(entry_id)
    .bind(knowledgebase_id)
    .bind(op.as_str())
    .bind(now_ms())
    .execute(conn)
    .await?;
    Ok(())
}

impl KnowledgeStore {
    /// The oldest pending changes.
    pub async fn outbox(&self, limit: i64) -> ServiceResult<Vec<OutboxItem>> {
        let rows =
            sqlx::query("SELECT id, entry_id, knowledgebase_id, op FROM index_outbox ORDER BY created_at, id LIMIT $1")
                .bind(limit)
                .fetch_all(self.db.pool())
                .await?;
        let mut items = Vec::with_capacity(rows.len());
        for row in rows {
            items.push(OutboxItem {
                id: row.try_get("id")?,
                entry_id: row.try_get("entry_id")?,
                knowledgebase_id: row.try_get("knowledgebase_id")?,
                op: row.try_get("op")?,
            });
        }
        Ok(items)
    }

    pub async fn clear_outbox(&self, ids: &[String]) -> ServiceResult<()> {
        for chunk in ids.chunks(500) {
            let placeholders: Vec<String> = (1..=chunk.len()).map(|i| format!("${i}")).collect();
            let sql = format!("DELETE FROM index_outbox WHERE id IN ({})", placeholders.join(", "));
            let mut query = sqlx::query(&sql);
            for id in chunk {
                query = query.bind(id);
            }
            query.execute(self.db.pool()).await?;
        }
        Ok(())
    }
}
