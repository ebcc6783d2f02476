//! Uploaded documents. The file lives in object storage under `object_key`; the row, the
//! extraction job and (later) the extracted entries live here.

use sqlx::Row;
use sqlx::any::AnyRow;
use switchboard_kit::jobs::{self, NewJob};
use switchboard_kit::time::now_ms;
use switchboard_kit::vocabulary::SourceStatus;
use switchboard_kit::{ServiceError, ServiceResult, limits, validate};
use switchboard_proto::v1::Document;

use super::sources::{Owner, Source, SourceKind, SourcePatch, remove_source};
use super::{KnowledgeStore, check_ids};

pub const EXTRACT_DOCUMENT: &str = "extract_document";
const EXTRACT_ATTEMPTS: i64 = 3;

const DOCUMENT_COLUMNS: &str = "d.id, d.team_id, d.knowledgebase_id, d.name, d.notes, d.file_name, d.content_type, \
     d.size_bytes, d.object_key, d.status, d.failure_reason, d.extracted_at, d.created_at, d.updated_at, \
     (SELECT COUNT(*) FROM entries e WHERE e.source_id = d.id AND e.source_type = 'document') AS entry_count";

fn document_not_found() -> ServiceError {
    ServiceError::not_found("Document not found")
}

fn document_from_row(row: &AnyRow) -> Result<Document, sqlx::Error> {
    Ok(Document {
        id: row.try_get("id")?,
        knowledgebase_id: row.try_get("knowledgebase_id")?,
        name: row.try_get("name")?,
        notes: row.try_get("notes")?,
        file_name: row.try_get("file_name")?,
        content_type: row.try_get("content_type")?,
        size_bytes: row.try_get("size_bytes")?,
        status: row.try_get("status")?,
        failure_reason: row.try_get("failure_reason")?,
        extracted_at_ms: row.try_get("extracted_at")?,
        created_at_ms: row.try_get("created_at")?,
        updated_at_ms: row.try_get("updated_at")?,
        content: Vec::new(),
        entry_count: row.try_get("entry_count")?,
    })
}

/// A document about to be stored; its file is already in object storage.
#[derive(Debug, Clone)]
pub struct NewDocument {
    pub id: String,
    pub name: String,
    pub notes: Option<String>,
    pub file_name: String,
    pub content_type: String,
    pub size_bytes: i64,
    pub object_key: String,
}

impl NewDocument {
    pub fn validate(&self) -> ServiceResult<()> {
        validate([
            limits::NAME.check("name", &self.name),
            self.notes.as_deref().and_then(|n| limits::NOTES.check("notes", n)),
            limits::NAME.check("file", &self.file_name),
        ])
    }
}

impl KnowledgeStore {
    /// Records the document and queues its extraction in the same transaction.
    pub async fn create_document(
        &self,
        team_id: &str,
        knowledgebase_id: &str,
        new: &NewDocument,
    ) -> ServiceResult<Document> {
        check_ids(&[("teamId", team_id), ("knowledgebaseId", knowledgebase_id)])?;
        new.validate()?;
        let now = now_ms();
        let mut tx = self.db.begin_write().await?;
        self.knowledgebase_in(&mut tx, team_id, knowledgebase_id).await?;
        sqlx::query(
            "INSERT INTO documents (id, team_id, knowledgebase_id, name, notes, file_name, content_type, size_bytes, \
             object_key, status, created_at, updated_at) VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $11, $10, $10)",
        )
        .bind(&new.id)
        .bind(team_id)
        .bind(knowledgebase_id)
        .bind(new.name.trim())
        .bind(new.notes.as_deref())
        .bind(&new.file_name)
        .bind(&new.content_type)
        .bind(new.size_bytes)
        .bind(&new.object_key)
        .bind(now)
        .bind(SourceStatus::Pending.as_str())
        .execute(&mut *tx)
        .await?;
        jobs::enqueue(
            &mut tx,
            NewJob {
                kind: EXTRACT_DOCUMENT,
                team_id,
                subject_id: &new.id,
                payload: serde_json::json!({ "documentId": new.id }),
                max_attempts: EXTRACT_ATTEMPTS,
            },
        )
        .await?;
        tx.commit().await?;
        self.document(team_id, knowledgebase_id, &new.id).await
    }

    pub async fn document(&self, team_id: &str, knowledgebase_id: &str, document_id: &str) -> ServiceResult<Document> {
        self.source(team_id, knowledgebase_id, document_id).await
    }

    /// The knowledge base's documents, oldest first.
    pub async fn documents(&self, team_id: &str, knowledgebase_id: &str) -> ServiceResult<Vec<Document>> {
        self.sources(team_id, knowledgebase_id).await
    }

    /// The object keys of a knowledge base's documents (to remove the files with it).
    pub async fn document_objects(&self, team_id: &str, knowledgebase_id: &str) -> ServiceResult<Vec<String>> {
        let rows = sqlx::query("SELECT object_key FROM documents WHERE knowledgebase_id = $1 AND team_id = $2")
            .bind(knowledgebase_id)
            .bind(team_id)
            .fetch_all(self.db.pool())
            .await?;
        Ok(rows.iter().map(|row| row.try_get("object_key")).collect::<Result<_, _>>()?)
    }

    /// A document and its object key by id alone, for the extraction job.
    pub async fn document_by_id(&self, document_id: &str) -> ServiceResult<Option<(Document, String, String)>> {
        let row = sqlx::query(&format!("SELECT {DOCUMENT_COLUMNS} FROM documents d WHERE d.id = $1"))
            .bind(document_id)
            .fetch_optional(self.db.pool())
            .await?;
        row.map(|row| {
            Ok((
                document_from_row(&row)?,
                row.try_get::<String, _>("team_id")?,
                row.try_get::<String, _>("object_key")?,
            ))
        })
        .transpose()
    }

    /// Changes name and notes; the file itself never changes.
    pub async fn update_document(
        &self,
        team_id: &str,
        knowledgebase_id: &str,
        document_id: &str,
        patch: &SourcePatch,
    ) -> ServiceResult<Document> {
        patch.validate()?;
        self.document(team_id, knowledgebase_id, document_id).await?;
        sqlx::query(
            "UPDATE documents SET name = COALESCE($1, name), notes = CASE WHEN $2 = 1 THEN $3 ELSE notes END, \
             updated_at = $4 WHERE id = $5 AND team_id = $6",
        )
        .bind(patch.name.as_deref().map(str::trim))
        .bind(i64::from(patch.notes.is_some()))
        .bind(patch.notes.clone().flatten())
        .bind(now_ms())
        .bind(document_id)
        .bind(team_id)
        .execute(self.db.pool())
        .await?;
        self.document(team_id, knowledgebase_id, document_id).await
    }

    /// Removes the document and its entries; returns it with its object key, which the
    /// caller deletes from object storage once this has committed.
    pub async fn delete_document(
        &self,
        team_id: &str,
        knowledgebase_id: &str,
        document_id: &str,
    ) -> ServiceResult<(Document, String)> {
        let document = self.document(team_id, knowledgebase_id, document_id).await?;
        let mut tx = self.db.begin_write().await?;
        let object_key: String = sqlx::query("SELECT object_key FROM documents WHERE id = $1 AND team_id = $2")
            .bind(document_id)
            .bind(team_id)
            .fetch_optional(&mut *tx)
            .await?
            .ok_or_else(document_not_found)?
            .try_get("object_key")?;
        let owner = Owner { team_id, knowledgebase_id, kind: SourceKind::Document, source_id: document_id };
        remove_source(&mut tx, &owner).await?;
        tx.commit().await?;
        Ok((document, object_key))
    }
}

impl Source for Document {
    const KIND: SourceKind = SourceKind::Document;
    const COLUMNS: &'static str = DOCUMENT_COLUMNS;
    const ALIAS: &'static str = "d";
    const ID_FIELD: &'static str = "documentId";

    fn from_row(row: &AnyRow, _day_ms: i64) -> Result<Self, sqlx::Error> {
        document_from_row(row)
    }

    fn not_found() -> ServiceError {
        document_not_found()
    }
}
