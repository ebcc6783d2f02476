//! Knowledge entries: manual Q&A references, and (from the sources feature) entries
//! extracted from webpages and documents. Every write records its index change in the
//! outbox in the same transaction.

use std::collections::HashMap;

use sqlx::Row;
use sqlx::any::AnyRow;
use switchboard_kit::time::now_ms;
use switchboard_kit::write_keys::{self, WriteKey};
use switchboard_kit::{ServiceError, ServiceResult, limits, validate};
use switchboard_proto::v1::{Reference, Source};

use super::outbox::{self, Op};

/// One manual reference's row, embedded.
async fn insert_manual(
    conn: &mut sqlx::AnyConnection,
    (team_id, knowledgebase_id, id): (&str, &str, &str),
    text: &EntryText,
    (embedding, model): (&[f32], &str),
    now: i64,
) -> ServiceResult<()> {
    sqlx::query(
        "INSERT INTO entries (id, team_id, knowledgebase_id, source_type, source_id, position, question, answer, \
         embedding, embedding_model, created_at, updated_at) \
         VALUES ($1, $2, $3, 'manual', NULL, 0, $4, $5, $6, $7, $8, $8)",
    )
    .bind(id)
    .bind(team_id)
    .bind(knowledgebase_id)
    .bind(&text.question)
    .bind(&text.answer)
    .bind(encode_vector(embedding))
    .bind(model)
    .bind(now)
    .execute(conn)
    .await?;
    Ok(())
}

/// What a recorded write key names (`switchboard_kit::write_keys`).
const CREATE_REFERENCES: &str = "knowledgebase.CreateReferences";
use super::{KnowledgeStore, check_ids, decode_vector, encode_vector, knowledgebase_not_found, reference_not_found};

const ENTRY_COLUMNS: &str = "e.id, e.knowledgebase_id, e.source_type, e.source_id, e.question, e.answer, \
     e.created_at, e.updated_at, COALESCE((SELECT w.name FROM webpages w WHERE w.id = e.source_id), \
     (SELECT d.name FROM documents d WHERE d.id = e.source_id)) AS source_name";

/// The text of an entry, and what of it is embedded.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct EntryText {
    pub question: String,
    pub answer: String,
}

impl EntryText {
    pub fn validate(&self) -> ServiceResult<()> {
        validate([limits::QUESTION.check("question", &self.question), limits::ANSWER.check("answer", &self.answer)])
    }

    /// The question comes first: the model reads 256 tokens at most, and the question is
    /// what searches most resemble.
    pub fn embedding_input(&self) -> String {
        format!("{}\n{}", self.question, self.answer)
    }
}

/// What the vector index needs of an entry.
#[derive(Debug, Clone)]
pub struct IndexedEntry {
    pub id: String,
    pub knowledgebase_id: String,
    pub team_id: String,
    /// What the passages are cut from, and the lexical vectors made of.
    pub text: EntryText,
    /// One vector per passage, concatenated in passage order.
    pub embedding: Vec<f32>,
    pub model: String,
}

/// An entry whose vectors were made by another model or passage rule.
#[derive(Debug, Clone)]
pub struct StaleEntry {
    pub id: String,
    pub text: EntryText,
    pub embedding: Vec<f32>,
    pub model: String,
}

fn reference_from_row(row: &AnyRow) -> Result<Reference, sqlx::Error> {
    Ok(Reference {
        id: row.try_get("id")?,
        knowledgebase_id: row.try_get("knowledgebase_id")?,
        question: row.try_get("question")?,
        answer: row.try_get("answer")?,
        source: Some(Source {
            r#type: row.try_get("source_type")?,
            id: row.try_get("source_id")?,
            name: row.try_get("source_name")?,
        }),
        created_at_ms: row.try_get("created_at")?,
        updated_at_ms: row.try_get("updated_at")?,
    })
}

fn indexed_from_row(row: &AnyRow) -> Result<IndexedEntry, sqlx::Error> {
    let bytes: Vec<u8> = row.try_get("embedding")?;
    Ok(IndexedEntry {
        id: row.try_get("id")?,
        knowledgebase_id: row.try_get("knowledgebase_id")?,
        team_id: row.try_get("team_id")?,
        text: EntryText { question: row.try_get("question")?, answer: row.try_get("answer")? },
        embedding: decode_vector(&bytes),
        model: row.try_get("embedding_model")?,
    })
}

fn extracted_is_read_only() -> ServiceError {
    ServiceError::conflict("This entry was extracted from a webpage or document")
        .with_hint("It changes when its source is refreshed; edit or add manual references instead.")
}

impl KnowledgeStore {
    pub async fn insert_reference(
        &self,
        team_id: &str,
        knowledgebase_id: &str,
        text: &EntryText,
        embedding: &[f32],
        model: &str,
    ) -> ServiceResult<Reference> {
        self.insert_reference_once(team_id, knowledgebase_id, text, (embedding, model), None).await
    }

    /// The references a write with `key` made already in this knowledge base, if one did
    /// (`switchboard_kit::write_keys`): a retry is answered with them before anything is
    /// embedded.
    pub async fn references_made_by(
        &self,
        team_id: &str,
        knowledgebase_id: &str,
        key: &WriteKey,
    ) -> ServiceResult<Option<Vec<Reference>>> {
        let mut conn = self.db.pool().acquire().await?;
        let Some(ids) = write_keys::recorded_all(&mut conn, team_id, key, CREATE_REFERENCES).await? else {
            return Ok(None);
        };
        drop(conn);
        let mut found = self.references_by_ids(team_id, knowledgebase_id, &ids).await?;
        Ok(Some(ids.iter().filter_map(|id| found.remove(id)).collect()))
    }

    /// [`Self::insert_reference`], recording `key` with it; when a concurrent retry with the
    /// same key made its reference first, that one is the answer and nothing is written.
    pub async fn insert_reference_once(
        &self,
        team_id: &str,
        knowledgebase_id: &str,
        text: &EntryText,
        (embedding, model): (&[f32], &str),
        key: Option<&WriteKey>,
    ) -> ServiceResult<Reference> {
        let mut made = self.insert_references(team_id, knowledgebase_id, &[(text, embedding)], model, key).await?;
        made.pop().ok_or_else(|| ServiceError::internal(anyhow::anyhow!("an insert returned no reference")))
    }

    /// Inserts manual references with their embeddings in one transaction and returns them in
    /// order. With `key`, their ids are recorded under it, and a write that finds the key
    /// recorded (a retry whose first answer was lost) writes nothing and answers with the
    /// references made the first time.
    pub async fn insert_references(
        &self,
        team_id: &str,
        knowledgebase_id: &str,
        items: &[(&EntryText, &[f32])],
        model: &str,
        key: Option<&WriteKey>,
    ) -> ServiceResult<Vec<Reference>> {
        check_ids(&[("teamId", team_id), ("knowledgebaseId", knowledgebase_id)])?;
        for (text, _) in items {
            text.validate()?;
        }
        let mut tx = self.db.begin_write().await?;
        sqlx::query("SELECT id FROM knowledgebases WHERE id = $1 AND team_id = $2")
            .bind(knowledgebase_id)
            .bind(team_id)
            .fetch_optional(&mut *tx)
            .await?
            .ok_or_else(knowledgebase_not_found)?;
        let recorded = match key {
            Some(key) => write_keys::recorded_all(&mut tx, team_id, key, CREATE_REFERENCES).await?,
            None => None,
        };
        let ids: Vec<String> = match recorded {
            Some(made) => {
                drop(tx);
                made
            }
            None => {
                let now = now_ms();
                let ids: Vec<String> = items.iter().map(|_| uuid::Uuid::now_v7().to_string()).collect();
                for (id, (text, embedding)) in ids.iter().zip(items) {
                    insert_manual(&mut tx, (team_id, knowledgebase_id, id), text, (embedding, model), now).await?;
                    outbox::record(&mut tx, id, knowledgebase_id, Op::Upsert).await?;
                }
                if let Some(key) = key {
                    write_keys::record_all(&mut tx, team_id, key, CREATE_REFERENCES, &ids).await?;
                }
                tx.commit().await?;
                ids
            }
        };
        let mut found = self.references_by_ids(team_id, knowledgebase_id, &ids).await?;
        // One deleted since a recorded write made it is left out of the answer.
        Ok(ids.iter().filter_map(|id| found.remove(id)).collect())
    }

    /// Any entry of the knowledge base, manual or extracted.
    pub async fn reference(
        &self,
        team_id: &str,
        knowledgebase_id: &str,
        reference_id: &str,
    ) -> ServiceResult<Reference> {
        check_ids(&[("teamId", team_id), ("knowledgebaseId", knowledgebase_id), ("referenceId", reference_id)])?;
        let row = sqlx::query(&format!(
            "SELECT {ENTRY_COLUMNS} FROM entries e WHERE e.id = $1 AND e.knowledgebase_id = $2 AND e.team_id = $3"
        ))
        .bind(reference_id)
        .bind(knowledgebase_id)
        .bind(team_id)
        .fetch_optional(self.db.pool())
        .await?
        .ok_or_else(reference_not_found)?;
        Ok(reference_from_row(&row)?)
    }

    /// Replaces the text and embedding of a manual reference if it still reads `expected`;
    /// `None` when another writer changed it in between (the caller re-reads and retries, so
    /// that the stored embedding always belongs to the stored text).
    pub async fn replace_reference_text(
        &self,
        team_id: &str,
        knowledgebase_id: &str,
        reference_id: &str,
        expected: &EntryText,
        new: &EntryText,
        (vector, model): (&[f32], &str),
    ) -> ServiceResult<Option<Reference>> {
        new.validate()?;
        let current = self.reference(team_id, knowledgebase_id, reference_id).await?;
        if current.source.as_ref().is_some_and(|s| s.r#type != "manual") {
            return Err(extracted_is_read_only());
        }
        let mut tx = self.db.begin_write().await?;
        let query = sqlx::query(
            "UPDATE entries SET question = $1, answer = $2, updated_at = $3, embedding = $8, embedding_model = $9 \
             WHERE id = $4 AND team_id = $5 AND question = $6 AND answer = $7",
        )
        .bind(&new.question)
        .bind(&new.answer)
        .bind(now_ms())
        .bind(reference_id)
        .bind(team_id)
        .bind(&expected.question)
        .bind(&expected.answer)
        .bind(encode_vector(vector))
        .bind(model);
        if query.execute(&mut *tx).await?.rows_affected() == 0 {
            return Ok(None);
        }
        outbox::record(&mut tx, reference_id, knowledgebase_id, Op::Upsert).await?;
        tx.commit().await?;
        Ok(Some(self.reference(team_id, knowledgebase_id, reference_id).await?))
    }

    pub async fn delete_reference(
        &self,
        team_id: &str,
        knowledgebase_id: &str,
        reference_id: &str,
    ) -> ServiceResult<Reference> {
        let reference = self.reference(team_id, knowledgebase_id, reference_id).await?;
        if reference.source.as_ref().is_some_and(|s| s.r#type != "manual") {
            return Err(extracted_is_read_only());
        }
        let mut tx = self.db.begin_write().await?;
        sqlx::query("DELETE FROM entries WHERE id = $1 AND team_id = $2")
            .bind(reference_id)
            .bind(team_id)
            .execute(&mut *tx)
            .await?;
        outbox::record(&mut tx, reference_id, knowledgebase_id, Op::Delete).await?;
        tx.commit().await?;
        Ok(reference)
    }

    /// The manual references of a knowledge base, oldest first.
    pub async fn manual_references(&self, team_id: &str, knowledgebase_id: &str) -> ServiceResult<Vec<Reference>> {
        let rows = sqlx::query(&format!(
            "SELECT {ENTRY_COLUMNS} FROM entries e WHERE e.knowledgebase_id = $1 AND e.team_id = $2 \
             AND e.source_type = 'manual' ORDER BY e.created_at, e.id"
        ))
        .bind(knowledgebase_id)
        .bind(team_id)
        .fetch_all(self.db.pool())
        .await?;
        Ok(rows.iter().map(reference_from_row).collect::<Result<_, _>>()?)
    }

    /// The entries extracted from one webpage or document, in the order of the source.
    pub async fn source_entries(&self, team_id: &str, source_id: &str) -> ServiceResult<Vec<Reference>> {
        let rows = sqlx::query(&format!(
            "SELECT {ENTRY_COLUMNS} FROM entries e WHERE e.source_id = $1 AND e.team_id = $2 ORDER BY e.position, e.id"
        ))
        .bind(source_id)
        .bind(team_id)
        .fetch_all(self.db.pool())
        .await?;
        Ok(rows.iter().map(reference_from_row).collect::<Result<_, _>>()?)
    }

    /// Entries of one knowledge base by id, for search results.
    pub async fn references_by_ids(
        &self,
        team_id: &str,
        knowledgebase_id: &str,
        ids: &[String],
    ) -> ServiceResult<HashMap<String, Reference>> {
        if ids.is_empty() {
            return Ok(HashMap::new());
        }
        // By id alone, so that the primary key serves the lookup: with the knowledge base in
        // the WHERE clause SQLite preferred its index and read every entry of the knowledge
        // base (60 ms at 10,000 entries). Ownership is checked on the rows instead.
        let placeholders: Vec<String> = (1..=ids.len()).map(|i| format!("${i}")).collect();
        let sql =
            format!("SELECT {ENTRY_COLUMNS}, e.team_id FROM entries e WHERE e.id IN ({})", placeholders.join(", "));
        let mut query = sqlx::query(&sql);
        for id in ids {
            query = query.bind(id);
        }
        let rows = query.fetch_all(self.db.pool()).await?;
        let mut found = HashMap::with_capacity(rows.len());
        for row in &rows {
            let owner: String = row.try_get("team_id")?;
            let reference = reference_from_row(row)?;
            if owner == team_id && reference.knowledgebase_id == knowledgebase_id {
                found.insert(reference.id.clone(), reference);
            }
        }
        Ok(found)
    }

    /// The stored vectors of these entries (missing ids are left out: they were deleted).
    pub async fn indexed_entries(&self, ids: &[String]) -> ServiceResult<Vec<IndexedEntry>> {
        let mut entries = Vec::with_capacity(ids.len());
        for chunk in ids.chunks(500) {
            let placeholders: Vec<String> = (1..=chunk.len()).map(|i| format!("${i}")).collect();
            let sql = format!(
                "SELECT id, knowledgebase_id, team_id, question, answer, embedding, embedding_model FROM entries \
                 WHERE id IN ({})",
                placeholders.join(", ")
            );
            let mut query = sqlx::query(&sql);
            for id in chunk {
                query = query.bind(id);
            }
            for row in query.fetch_all(self.db.pool()).await? {
                entries.push(indexed_from_row(&row)?);
            }
        }
        Ok(entries)
    }

    /// Every entry's vector, in id order, a page at a time (for a rebuild).
    pub async fn indexed_page(&self, after_id: &str, limit: i64) -> ServiceResult<Vec<IndexedEntry>> {
        let rows = sqlx::query(
            "SELECT id, knowledgebase_id, team_id, question, answer, embedding, embedding_model FROM entries \
             WHERE id > $1 ORDER BY id LIMIT $2",
        )
        .bind(after_id)
        .bind(limit)
        .fetch_all(self.db.pool())
        .await?;
        Ok(rows.iter().map(indexed_from_row).collect::<Result<_, _>>()?)
    }

    /// Entries whose vectors were made by another model or passage rule (`embedding_model`
    /// other than `tag`), a page at a time.
    pub async fn stale_embeddings(&self, tag: &str, limit: i64) -> ServiceResult<Vec<StaleEntry>> {
        let rows = sqlx::query(
            "SELECT id, question, answer, embedding, embedding_model FROM entries WHERE embedding_model <> $1 \
             ORDER BY id LIMIT $2",
        )
        .bind(tag)
        .bind(limit)
        .fetch_all(self.db.pool())
        .await?;
        let mut stale = Vec::with_capacity(rows.len());
        for row in rows {
            let bytes: Vec<u8> = row.try_get("embedding")?;
            stale.push(StaleEntry {
                id: row.try_get("id")?,
                text: EntryText { question: row.try_get("question")?, answer: row.try_get("answer")? },
                embedding: decode_vector(&bytes),
                model: row.try_get("embedding_model")?,
            });
        }
        Ok(stale)
    }

    pub async fn set_embedding(&self, entry_id: &str, embedding: &[f32], model: &str) -> ServiceResult<()> {
        sqlx::query("UPDATE entries SET embedding = $1, embedding_model = $2 WHERE id = $3")
            .bind(encode_vector(embedding))
            .bind(model)
            .bind(entry_id)
            .execute(self.db.pool())
            .await?;
        Ok(())
    }

    pub async fn count_entries(&self) -> ServiceResult<i64> {
        Ok(sqlx::query("SELECT COUNT(*) AS n FROM entries").fetch_one(self.db.pool()).await?.try_get("n")?)
    }
}
