//! Knowledge bases of a team.

use sqlx::Row;
use sqlx::any::AnyRow;
use switchboard_kit::jobs::{self, NewJob};
use switchboard_kit::time::now_ms;
use switchboard_kit::{ServiceResult, limits, validate};
use switchboard_proto::v1::{Knowledgebase, KnowledgebaseCounts};

use super::{KnowledgeStore, check_ids, knowledgebase_not_found};

const KNOWLEDGEBASE_COLUMNS: &str = "k.id, k.team_id, k.name, k.description, k.created_at, k.updated_at";

/// What a list shows instead of the content. Counting scans the knowledge base's entries,
/// so single lookups (which every search and reference call makes) leave it out.
const COUNT_COLUMNS: &str = "\
     (SELECT COUNT(*) FROM entries e WHERE e.knowledgebase_id = k.id AND e.source_type = 'manual') AS reference_count, \
     (SELECT COUNT(*) FROM webpages w WHERE w.knowledgebase_id = k.id) AS webpage_count, \
     (SELECT COUNT(*) FROM documents d WHERE d.knowledgebase_id = k.id) AS document_count";

fn knowledgebase_from_row(row: &AnyRow) -> Result<Knowledgebase, sqlx::Error> {
    Ok(Knowledgebase {
        id: row.try_get("id")?,
        team_id: row.try_get("team_id")?,
        name: row.try_get("name")?,
        description: row.try_get("description")?,
        created_at_ms: row.try_get("created_at")?,
        updated_at_ms: row.try_get("updated_at")?,
        references: Vec::new(),
        counts: None,
        webpages: Vec::new(),
        documents: Vec::new(),
    })
}

fn counted_knowledgebase_from_row(row: &AnyRow) -> Result<Knowledgebase, sqlx::Error> {
    Ok(Knowledgebase {
        counts: Some(KnowledgebaseCounts {
            webpages: row.try_get("webpage_count")?,
            documents: row.try_get("document_count")?,
            references: row.try_get("reference_count")?,
        }),
        ..knowledgebase_from_row(row)?
    })
}

/// The job that unlinks a deleted knowledge base's agents (see `crate::unlink`).
pub const UNLINK_AGENTS: &str = "unlink-agents";
/// With the runner's backoff (doubling, at most 5 minutes apart), about 3 days of retries.
const UNLINK_ATTEMPTS: i64 = 1000;

impl KnowledgeStore {
    pub async fn create_knowledgebase(
        &self,
        team_id: &str,
        name: &str,
        description: Option<&str>,
    ) -> ServiceResult<Knowledgebase> {
        check_ids(&[("teamId", team_id)])?;
        validate([
            limits::NAME.check("name", name),
            description.and_then(|d| limits::DESCRIPTION.check("description", d)),
        ])?;
        let id = uuid::Uuid::now_v7().to_string();
        let now = now_ms();
        sqlx::query(
            "INSERT INTO knowledgebases (id, team_id, name, description, created_at, updated_at) \
             VALUES ($1, $2, $3, $4, $5, $5)",
        )
        .bind(&id)
        .bind(team_id)
        .bind(name.trim())
        .bind(description)
        .bind(now)
        .execute(self.db.pool())
        .await?;
        self.knowledgebase(team_id, &id).await
    }

    /// The team's knowledge bases, newest first; with `ids`, only those.
    pub async fn list_knowledgebases(&self, team_id: &str, ids: &[String]) -> ServiceResult<Vec<Knowledgebase>> {
        check_ids(&[("teamId", team_id)])?;
        let ids: Vec<&String> = ids.iter().filter(|id| uuid::Uuid::parse_str(id).is_ok()).collect();
        let mut sql =
            format!("SELECT {KNOWLEDGEBASE_COLUMNS}, {COUNT_COLUMNS} FROM knowledgebases k WHERE k.team_id = $1");
        if !ids.is_empty() {
            let placeholders: Vec<String> = (0..ids.len()).map(|i| format!("${}", i + 2)).collect();
            sql.push_str(&format!(" AND k.id IN ({})", placeholders.join(", ")));
        }
        sql.push_str(" ORDER BY k.created_at DESC, k.id DESC");
        let mut query = sqlx::query(&sql).bind(team_id);
        for id in ids {
            query = query.bind(id);
        }
        let rows = query.fetch_all(self.db.pool()).await?;
        Ok(rows.iter().map(counted_knowledgebase_from_row).collect::<Result<Vec<_>, _>>()?)
    }

    /// One knowledge base of the team, without its content or counts.
    pub async fn knowledgebase(&self, team_id: &str, knowledgebase_id: &str) -> ServiceResult<Knowledgebase> {
        check_ids(&[("teamId", team_id), ("knowledgebaseId", knowledgebase_id)])?;
        let row = sqlx::query(&format!(
            "SELECT {KNOWLEDGEBASE_COLUMNS} FROM knowledgebases k WHERE k.id = $1 AND k.team_id = $2"
        ))
        .bind(knowledgebase_id)
        .bind(team_id)
        .fetch_optional(self.db.pool())
        .await?
        .ok_or_else(knowledgebase_not_found)?;
        Ok(knowledgebase_from_row(&row)?)
    }

    pub async fn update_knowledgebase(
        &self,
        team_id: &str,
        knowledgebase_id: &str,
        name: Option<&str>,
        description: Option<Option<&str>>,
    ) -> ServiceResult<Knowledgebase> {
        validate([
            name.and_then(|n| limits::NAME.check("name", n)),
            description.flatten().and_then(|d| limits::DESCRIPTION.check("description", d)),
        ])?;
        let current = self.knowledgebase(team_id, knowledgebase_id).await?;
        let name = name.map(str::trim).map(str::to_owned).or(current.name);
        let description = match description {
            Some(description) => description.map(str::to_owned),
            None => current.description,
        };
        sqlx::query(
            "UPDATE knowledgebases SET name = $1, description = $2, updated_at = $3 WHERE id = $4 AND team_id = $5",
        )
        .bind(name)
        .bind(description)
        .bind(now_ms())
        .bind(knowledgebase_id)
        .bind(team_id)
        .execute(self.db.pool())
        .await?;
        self.knowledgebase(team_id, knowledgebase_id).await
    }

    /// Deletes the knowledge base and its entries; the index follows through the outbox.
    pub async fn delete_knowledgebase(&self, team_id: &str, knowledgebase_id: &str) -> ServiceResult<Knowledgebase> {
        let knowledgebase = self.knowledgebase(team_id, knowledgebase_id).await?;
        let mut tx = self.db.begin_write().await?;
        sqlx::query("DELETE FROM entries WHERE knowledgebase_id = $1 AND team_id = $2")
            .bind(knowledgebase_id)
            .bind(team_id)
            .execute(&mut *tx)
            .await?;
        sqlx::query("DELETE FROM knowledgebases WHERE id = $1 AND team_id = $2")
            .bind(knowledgebase_id)
            .bind(team_id)
            .execute(&mut *tx)
            .await?;
        super::outbox::record(&mut tx, knowledgebase_id, knowledgebase_id, super::outbox::Op::DeleteKnowledgebase)
            .await?;
        // The agents linked to it are unlinked by a job committed with the delete, so that an
        // agents service that is down delays the unlink instead of losing it.
        jobs::enqueue(
            &mut tx,
            NewJob {
                kind: UNLINK_AGENTS,
                team_id,
                subject_id: knowledgebase_id,
                payload: serde_json::Value::Null,
                max_attempts: UNLINK_ATTEMPTS,
            },
        )
        .await?;
        tx.commit().await?;
        Ok(knowledgebase)
    }
}
