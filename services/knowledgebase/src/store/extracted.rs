//! The Q&A entries of a webpage or document: replaced as a whole in one transaction, so
//! that a search sees either the old content or the new. The source turns ready in a
//! second one, after the vector index has applied the replacement.

use sqlx::{AnyConnection, Row};
use switchboard_kit::ServiceResult;
use switchboard_kit::time::now_ms;

use super::encode_vector;
use super::entries::EntryText;
use super::outbox::{self, Op};

/// An extracted entry with its vector, ready to be stored.
#[derive(Debug, Clone)]
pub struct ExtractedEntry {
    pub text: EntryText,
    pub embedding: Vec<f32>,
}

/// Where extracted entries come from.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SourceKind {
    Webpage,
    Document,
}

impl SourceKind {
    pub fn as_str(self) -> &'static str {
        match self {
            SourceKind::Webpage => "webpage",
            SourceKind::Document => "document",
        }
    }

    /// The column set when the source's content was last rebuilt.
    pub(crate) fn rebuilt_column(self) -> &'static str {
        match self {
            SourceKind::Webpage => "last_scraped_at",
            SourceKind::Document => "extracted_at",
        }
    }

    pub(crate) fn table(self) -> &'static str {
        match self {
            SourceKind::Webpage => "webpages",
            SourceKind::Document => "documents",
        }
    }
}

/// Who a source belongs to.
pub(crate) struct Owner<'a> {
    pub team_id: &'a str,
    pub knowledgebase_id: &'a str,
    pub kind: SourceKind,
    pub source_id: &'a str,
}

/// Deletes the source's entries, recording each removal for the index.
pub(crate) async fn remove_entries(conn: &mut AnyConnection, owner: &Owner<'_>) -> ServiceResult<usize> {
    let rows = sqlx::query("SELECT id FROM entries WHERE source_id = $1 AND source_type = $2")
        .bind(owner.source_id)
        .bind(owner.kind.as_str())
        .fetch_all(&mut *conn)
        .await?;
    for row in &rows {
        let id: String = row.try_get("id")?;
        outbox::record(conn, &id, owner.knowledgebase_id, Op::Delete).await?;
    }
    sqlx::query("DELETE FROM entries WHERE source_id = $1 AND source_type = $2")
        .bind(owner.source_id)
        .bind(owner.kind.as_str())
        .execute(&mut *conn)
        .await?;
    Ok(rows.len())
}

/// Replaces the source's entries with `entries`, in their order.
pub(crate) async fn replace_entries(
    conn: &mut AnyConnection,
    owner: &Owner<'_>,
    entries: &[ExtractedEntry],
    model: &str,
) -> ServiceResult<()> {
    remove_entries(conn, owner).await?;
    let now = now_ms();
    for (position, entry) in entries.iter().enumerate() {
        let id = uuid::Uuid::now_v7().to_string();
        sqlx::query(
            "INSERT INTO entries (id, team_id, knowledgebase_id, source_type, source_id, position, question, answer, \
             embedding, embedding_model, created_at, updated_at) \
             VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $11)",
        )
        .bind(&id)
        .bind(owner.team_id)
        .bind(owner.knowledgebase_id)
        .bind(owner.kind.as_str())
        .bind(owner.source_id)
        .bind(i64::try_from(position).unwrap_or(i64::MAX))
        // PostgreSQL text cannot hold NUL, which a document or page may contain.
        .bind(entry.text.question.replace('\0', ""))
        .bind(entry.text.answer.replace('\0', ""))
        .bind(encode_vector(&entry.embedding))
        .bind(model)
        .bind(now)
        .execute(&mut *conn)
        .await?;
        outbox::record(conn, &id, owner.knowledgebase_id, Op::Upsert).await?;
    }
    Ok(())
}
