//! A source's turns once its scrape or extraction ran: its entries replaced, then `ready`
//! once indexed, or `failed` with the reason; webhooks hear of each turn in its transaction.

use sqlx::{AnyConnection, Row};
use switchboard_kit::ServiceResult;
use switchboard_kit::time::now_ms;
use switchboard_kit::vocabulary::EventType;
use switchboard_kit::vocabulary::SourceStatus;

use super::KnowledgeStore;
use super::extracted::{ExtractedEntry, replace_entries};
use super::sources::{Owner, SourceKind, source_in};
use super::webpages::REFRESH_INTERVAL_MS;

impl KnowledgeStore {
    /// Replaces a source's entries with those of a successful scrape or extraction. The
    /// source keeps its status: it turns `ready` in `mark_ready`, once the vector index has
    /// the new entries, so that `ready` means searchable. `false` when the source was
    /// deleted meanwhile.
    pub async fn store_entries(
        &self,
        kind: SourceKind,
        source_id: &str,
        entries: &[ExtractedEntry],
        model: &str,
    ) -> ServiceResult<bool> {
        let mut tx = self.db.begin_write().await?;
        let Some((team_id, knowledgebase_id)) = owner_of(&mut tx, kind, source_id).await? else {
            return Ok(false);
        };
        let owner = Owner { team_id: &team_id, knowledgebase_id: &knowledgebase_id, kind, source_id };
        replace_entries(&mut tx, &owner, entries, model).await?;
        tx.commit().await?;
        Ok(true)
    }

    /// Marks a source whose entries are stored and indexed `ready`, and tells webhooks.
    /// `false` when the source was deleted meanwhile.
    pub async fn mark_ready(&self, kind: SourceKind, source_id: &str) -> ServiceResult<bool> {
        let now = now_ms();
        let mut tx = self.db.begin_write().await?;
        let Some((team_id, _)) = owner_of(&mut tx, kind, source_id).await? else {
            return Ok(false);
        };
        sqlx::query(&format!(
            "UPDATE {} SET status = $3, failure_reason = NULL, {} = $1, updated_at = $1 WHERE id = $2",
            kind.table(),
            kind.rebuilt_column()
        ))
        .bind(now)
        .bind(source_id)
        .bind(SourceStatus::Ready.as_str())
        .execute(&mut *tx)
        .await?;
        tell(&mut tx, kind, (&team_id, source_id), true).await?;
        tx.commit().await?;
        Ok(true)
    }

    /// A failed scrape or extraction by a job queued at `queued_at`: the source turns
    /// `failed` with the reason and keeps its entries, unless a later run has rebuilt it
    /// since (an old job's last failure must not hide a newer success).
    pub async fn fail_source(
        &self,
        kind: SourceKind,
        source_id: &str,
        reason: &str,
        queued_at: i64,
    ) -> ServiceResult<()> {
        let reason: String = reason.chars().take(1000).collect();
        let rebuilt = kind.rebuilt_column();
        let mut tx = self.db.begin_write().await?;
        let before =
            sqlx::query(&format!("SELECT team_id, status FROM {} WHERE id = $1{}", kind.table(), self.db.for_update()))
                .bind(source_id)
                .fetch_optional(&mut *tx)
                .await?;
        let Some(before) = before else {
            return Ok(());
        };
        let failed = sqlx::query(&format!(
            "UPDATE {} SET status = $5, failure_reason = $1, updated_at = $2 \
             WHERE id = $3 AND ({rebuilt} IS NULL OR {rebuilt} < $4)",
            kind.table()
        ))
        .bind(reason)
        .bind(now_ms())
        .bind(source_id)
        .bind(queued_at)
        .bind(SourceStatus::Failed.as_str())
        .execute(&mut *tx)
        .await?;
        // Webhooks hear of the turn to failed once, not of each retry that fails again.
        let (team_id, status): (String, String) = (before.try_get("team_id")?, before.try_get("status")?);
        if failed.rows_affected() > 0 && SourceStatus::parse(&status) != Some(SourceStatus::Failed) {
            tell(&mut tx, kind, (&team_id, source_id), false).await?;
        }
        tx.commit().await?;
        Ok(())
    }
}

/// The team and knowledge base of a source; `None` once it is deleted.
async fn owner_of(
    conn: &mut AnyConnection,
    kind: SourceKind,
    source_id: &str,
) -> ServiceResult<Option<(String, String)>> {
    let row = sqlx::query(&format!("SELECT team_id, knowledgebase_id FROM {} WHERE id = $1", kind.table()))
        .bind(source_id)
        .fetch_optional(&mut *conn)
        .await?;
    Ok(match row {
        Some(row) => Some((row.try_get("team_id")?, row.try_get("knowledgebase_id")?)),
        None => None,
    })
}

/// Tells webhooks that a source turned ready or failed, in that change's transaction.
async fn tell(
    conn: &mut AnyConnection,
    kind: SourceKind,
    (team_id, source_id): (&str, &str),
    ready: bool,
) -> ServiceResult<()> {
    use switchboard_proto::v1::event::Resource;
    let (event, resource) = match kind {
        SourceKind::Webpage => (
            if ready { EventType::WebpageReady } else { EventType::WebpageFailed },
            Resource::Webpage(source_in(conn, source_id, REFRESH_INTERVAL_MS).await?),
        ),
        SourceKind::Document => (
            if ready { EventType::DocumentReady } else { EventType::DocumentFailed },
            Resource::Document(source_in(conn, source_id, REFRESH_INTERVAL_MS).await?),
        ),
    };
    switchboard_kit::outbox::record(conn, event, (team_id, source_id), resource).await?;
    Ok(())
}
