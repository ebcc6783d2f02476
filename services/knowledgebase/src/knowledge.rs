//! What the service does, on top of the store: references are embedded before they are
//! written, so that they are searchable as soon as the write answers; searches embed the
//! query and read the matching entries back from SQL.

use std::sync::Arc;

use switchboard_kit::error::bulk_failure;
use switchboard_kit::write_keys::WriteKey;
use switchboard_kit::{ErrorKind, ServiceError, ServiceResult, limits, validate};
use switchboard_proto::v1::{BulkFailure, Document, Knowledgebase, Reference, SearchHit, Webpage};
use tokio::sync::Notify;

use crate::budget::EmbeddingBudget;
use crate::embed::Embedder;
use crate::index::SearchQuery;
use crate::objects::{self, Objects};
use crate::passages;
use crate::sources::documents::{self, Format};
use crate::store::{EntryText, KnowledgeStore, NewDocument, RefreshInterval, SourcePatch, reference_not_found};
use crate::sync::IndexSync;

/// An update retried this often when other writers keep changing the same reference.
const UPDATE_ATTEMPTS: usize = 3;

/// The bounds of a search's query, limit and threshold.
pub fn check_search(query: &str, limit: u32, threshold: f32) -> ServiceResult<()> {
    switchboard_kit::validate([
        limits::SEARCH_QUERY.check("query", query),
        limits::SEARCH_LIMIT.check("limit", i64::from(limit)),
        limits::SEARCH_THRESHOLD.check("threshold", f64::from(threshold)),
    ])
}

/// A file as the client uploaded it.
pub struct Upload<'a> {
    /// As given; any directory part is dropped.
    pub file_name: &'a str,
    /// The part's Content-Type, read when the file name's extension names no format.
    pub content_type: Option<&'a str>,
    /// Display name; the file name when `None`.
    pub name: Option<&'a str>,
    pub notes: Option<&'a str>,
    pub content: Vec<u8>,
}

pub struct Knowledge {
    pub store: KnowledgeStore,
    pub embedder: Arc<dyn Embedder>,
    /// What each team may ask of the embedder (`budget.rs`).
    pub budget: EmbeddingBudget,
    pub sync: Arc<IndexSync>,
    pub objects: Objects,
    /// Uploaded files larger than this are refused.
    pub max_upload_bytes: usize,
    /// Rung after a job is queued so that the runner starts it now.
    pub jobs: Arc<Notify>,
    /// Held for as long as the service runs (see `startup`).
    pub(crate) _index_lock: Option<std::fs::File>,
}

impl Knowledge {
    /// The stored vectors of an entry (one per passage) and their tag, its passages spent from
    /// the team's budget first.
    async fn embed_entry(&self, team_id: &str, text: &EntryText) -> ServiceResult<(Vec<f32>, String)> {
        let texts = std::slice::from_ref(text);
        self.budget.spend(team_id, passages::count(texts), "answer").await?;
        let vectors = passages::embed_entries(self.embedder.as_ref(), team_id, texts)
            .await
            .map_err(|e| ServiceError::internal(e.context("embedding")))?
            .pop()
            .ok_or_else(|| ServiceError::internal(anyhow::anyhow!("the embedder returned no vector")))?;
        Ok((vectors, self.embedding_tag()))
    }

    /// What `embedding_model` records for vectors made now (see `passages::embedding_tag`).
    pub fn embedding_tag(&self) -> String {
        passages::embedding_tag(self.embedder.model())
    }

    async fn embed_one(&self, text: String) -> ServiceResult<Vec<f32>> {
        self.embedder
            .embed_queries(vec![text])
            .await
            .map_err(|e| ServiceError::internal(e.context("embedding")))?
            .pop()
            .ok_or_else(|| ServiceError::internal(anyhow::anyhow!("the embedder returned no vector")))
    }

    pub async fn knowledgebase_with_content(
        &self,
        team_id: &str,
        knowledgebase_id: &str,
    ) -> ServiceResult<Knowledgebase> {
        let mut knowledgebase = self.store.knowledgebase(team_id, knowledgebase_id).await?;
        knowledgebase.references = self.store.manual_references(team_id, knowledgebase_id).await?;
        knowledgebase.webpages = self.store.webpages(team_id, knowledgebase_id).await?;
        knowledgebase.documents = self.store.documents(team_id, knowledgebase_id).await?;
        Ok(knowledgebase)
    }

    /// Deletes the knowledge base with everything in it, the uploaded files too.
    pub async fn delete_knowledgebase(&self, team_id: &str, knowledgebase_id: &str) -> ServiceResult<Knowledgebase> {
        let files = self.store.document_objects(team_id, knowledgebase_id).await?;
        let deleted = self.store.delete_knowledgebase(team_id, knowledgebase_id).await?;
        self.sync.apply_or_log().await;
        for key in files {
            self.delete_object(&key).await;
        }
        Ok(deleted)
    }

    async fn delete_object(&self, key: &str) {
        if let Err(error) = self.objects.delete(key).await {
            tracing::warn!(error = format!("{error:#}"), key, "an uploaded file could not be removed");
        }
    }

    pub async fn create_webpage(
        &self,
        team_id: &str,
        knowledgebase_id: &str,
        name: &str,
        url: &str,
        notes: Option<&str>,
        refresh_interval: RefreshInterval,
    ) -> ServiceResult<Webpage> {
        let webpage = self.store.create_webpage(team_id, knowledgebase_id, name, url, notes, refresh_interval).await?;
        self.jobs.notify_one();
        Ok(webpage)
    }

    pub async fn webpage(
        &self,
        team_id: &str,
        knowledgebase_id: &str,
        webpage_id: &str,
        content: bool,
    ) -> ServiceResult<Webpage> {
        let mut webpage = self.store.webpage(team_id, knowledgebase_id, webpage_id).await?;
        if content {
            webpage.content = self.store.source_entries(team_id, webpage_id).await?;
        }
        Ok(webpage)
    }

    pub async fn update_webpage(
        &self,
        team_id: &str,
        knowledgebase_id: &str,
        webpage_id: &str,
        patch: &SourcePatch,
    ) -> ServiceResult<Webpage> {
        self.store.update_webpage(team_id, knowledgebase_id, webpage_id, patch).await
    }

    /// Starts the refreshes that are due, by the rules of a manual refresh (a page refreshed
    /// in the meantime, by hand or by another replica, is left alone); answers how many.
    pub async fn refresh_due(&self, now: i64) -> ServiceResult<usize> {
        let mut started = 0;
        for due in self.store.due_refreshes(now, 100).await? {
            match self.store.request_refresh(&due.team_id, &due.knowledgebase_id, &due.webpage_id, now).await {
                Ok(_) => started += 1,
                // Refreshed or being refreshed since it was read, or deleted: not due any more.
                Err(error)
                    if matches!(error.kind, ErrorKind::Conflict | ErrorKind::RateLimited | ErrorKind::NotFound) => {}
                Err(error) => return Err(error),
            }
        }
        if started > 0 {
            self.jobs.notify_one();
        }
        Ok(started)
    }

    pub async fn delete_webpage(
        &self,
        team_id: &str,
        knowledgebase_id: &str,
        webpage_id: &str,
    ) -> ServiceResult<Webpage> {
        let deleted = self.store.delete_webpage(team_id, knowledgebase_id, webpage_id).await?;
        self.sync.apply_or_log().await;
        Ok(deleted)
    }

    pub async fn refresh_webpage(
        &self,
        team_id: &str,
        knowledgebase_id: &str,
        webpage_id: &str,
    ) -> ServiceResult<Webpage> {
        let webpage =
            self.store.request_refresh(team_id, knowledgebase_id, webpage_id, switchboard_kit::time::now_ms()).await?;
        self.jobs.notify_one();
        Ok(webpage)
    }

    /// Checks the file (type 415, size 413, content 422: nothing is stored for a file that
    /// cannot be read), keeps it in object storage and queues its extraction.
    pub async fn upload_document(
        &self,
        team_id: &str,
        knowledgebase_id: &str,
        upload: Upload<'_>,
    ) -> ServiceResult<Document> {
        let Upload { file_name, content_type, name, notes, content } = upload;
        // An unknown knowledge base is a 404 whatever the file is.
        self.store.knowledgebase(team_id, knowledgebase_id).await?;
        let file_name = file_name.rsplit(['/', '\\']).next().unwrap_or_default().trim().to_owned();
        if file_name.is_empty() {
            return Err(ServiceError::invalid_field("file", "must have a file name"));
        }
        let id = uuid::Uuid::now_v7().to_string();
        let new = NewDocument {
            object_key: objects::document_key(team_id, knowledgebase_id, &id, &file_name),
            id,
            name: name.map(str::to_owned).unwrap_or_else(|| file_name.clone()),
            notes: notes.map(str::to_owned),
            content_type: String::new(),
            size_bytes: i64::try_from(content.len()).unwrap_or(i64::MAX),
            file_name,
        };
        new.validate()?;
        // The extension says the format; a name without a known one may have a Content-Type
        // that does (curl -F "file=@notes;type=text/plain").
        let format = Format::from_file_name(&new.file_name)
            .or_else(|| content_type.and_then(Format::from_content_type))
            .ok_or_else(|| {
                ServiceError::new(ErrorKind::UnsupportedMediaType, "Unsupported file type")
                    .with_hint(format!("Supported types: {}.", documents::SUPPORTED))
            })?;
        if content.len() > self.max_upload_bytes {
            return Err(ServiceError::new(
                ErrorKind::PayloadTooLarge,
                format!("The file is larger than {} bytes", self.max_upload_bytes),
            ));
        }
        if content.is_empty() {
            return Err(
                ServiceError::new(ErrorKind::Unprocessable, "The file cannot be read").with_hint("the file is empty")
            );
        }
        let (content, parsed) = tokio::task::spawn_blocking(move || {
            let parsed = documents::parse(format, &content);
            (content, parsed)
        })
        .await
        .map_err(|e| ServiceError::internal(anyhow::Error::new(e).context("parsing an upload")))?;
        if let Err(reason) = parsed {
            return Err(ServiceError::new(ErrorKind::Unprocessable, "The file cannot be read").with_hint(reason));
        }
        let new = NewDocument { content_type: format.content_type().to_owned(), ..new };
        if let Err(error) = self.objects.put(&new.object_key, content).await {
            tracing::error!(error = format!("{error:#}"), "an upload could not be stored");
            return Err(ServiceError::unavailable("File storage is unavailable").with_hint("Retry the upload later."));
        }
        match self.store.create_document(team_id, knowledgebase_id, &new).await {
            Ok(document) => {
                self.jobs.notify_one();
                Ok(document)
            }
            Err(error) => {
                self.delete_object(&new.object_key).await;
                Err(error)
            }
        }
    }

    pub async fn document(
        &self,
        team_id: &str,
        knowledgebase_id: &str,
        document_id: &str,
        content: bool,
    ) -> ServiceResult<Document> {
        let mut document = self.store.document(team_id, knowledgebase_id, document_id).await?;
        if content {
            document.content = self.store.source_entries(team_id, document_id).await?;
        }
        Ok(document)
    }

    pub async fn update_document(
        &self,
        team_id: &str,
        knowledgebase_id: &str,
        document_id: &str,
        patch: &SourcePatch,
    ) -> ServiceResult<Document> {
        if patch.url.is_some() {
            return Err(ServiceError::invalid_field("url", "documents have no url"));
        }
        self.store.update_document(team_id, knowledgebase_id, document_id, patch).await
    }

    pub async fn delete_document(
        &self,
        team_id: &str,
        knowledgebase_id: &str,
        document_id: &str,
    ) -> ServiceResult<Document> {
        let (deleted, key) = self.store.delete_document(team_id, knowledgebase_id, document_id).await?;
        self.sync.apply_or_log().await;
        self.delete_object(&key).await;
        Ok(deleted)
    }

    pub async fn create_reference(
        &self,
        team_id: &str,
        knowledgebase_id: &str,
        text: EntryText,
        key: Option<&WriteKey>,
    ) -> ServiceResult<Reference> {
        text.validate()?;
        // A missing knowledge base is a 404 before the model is asked for anything.
        self.store.knowledgebase(team_id, knowledgebase_id).await?;
        if let Some(key) = key
            && let Some(mut made) = self.store.references_made_by(team_id, knowledgebase_id, key).await?
        {
            return made.pop().ok_or_else(reference_not_found);
        }
        let (vectors, tag) = self.embed_entry(team_id, &text).await?;
        let embedding = (vectors.as_slice(), tag.as_str());
        let reference = self.store.insert_reference_once(team_id, knowledgebase_id, &text, embedding, key).await?;
        self.sync.apply_or_log().await;
        Ok(reference)
    }

    /// 1 to `BULK_REFERENCES` references, each checked alone: the ones that fail are listed
    /// by index with the error `create_reference` would give, and the others are embedded
    /// together (the model's large batches, on every core, at ingestion priority, taking turns
    /// with other teams) and written in one transaction. Charged no credits, like a single
    /// create; their passages are spent from the team's budget, or the request is refused
    /// whole (413 over a request's bound, 429 past the team's minute) with nothing written.
    pub async fn bulk_create_references(
        &self,
        team_id: &str,
        knowledgebase_id: &str,
        texts: Vec<EntryText>,
        key: Option<&WriteKey>,
    ) -> ServiceResult<(Vec<Reference>, Vec<BulkFailure>)> {
        let count = i64::try_from(texts.len()).unwrap_or(i64::MAX);
        validate([limits::BULK_REFERENCES.check("references", count)])?;
        self.store.knowledgebase(team_id, knowledgebase_id).await?;
        let (mut valid, mut failed) = (Vec::new(), Vec::new());
        for (index, text) in texts.into_iter().enumerate() {
            match text.validate() {
                Ok(()) => valid.push(text),
                Err(error) => failed.push(bulk_failure(u32::try_from(index).unwrap_or(u32::MAX), error)),
            }
        }
        if let Some(key) = key
            && let Some(made) = self.store.references_made_by(team_id, knowledgebase_id, key).await?
        {
            return Ok((made, failed));
        }
        if valid.is_empty() {
            return Ok((Vec::new(), failed));
        }
        self.budget.spend(team_id, passages::count(&valid), "references").await?;
        let vectors = passages::embed_entries(self.embedder.as_ref(), team_id, &valid)
            .await
            .map_err(|e| ServiceError::internal(e.context("embedding")))?;
        let tag = self.embedding_tag();
        let items: Vec<(&EntryText, &[f32])> =
            valid.iter().zip(&vectors).map(|(text, vector)| (text, vector.as_slice())).collect();
        let created = self.store.insert_references(team_id, knowledgebase_id, &items, &tag, key).await?;
        self.sync.apply_or_log().await;
        Ok((created, failed))
    }

    /// A partial update: omitted fields keep their value; the vector is recomputed only
    /// when the text changes.
    pub async fn update_reference(
        &self,
        team_id: &str,
        knowledgebase_id: &str,
        reference_id: &str,
        question: Option<String>,
        answer: Option<String>,
    ) -> ServiceResult<Reference> {
        self.store.knowledgebase(team_id, knowledgebase_id).await?;
        for _ in 0..UPDATE_ATTEMPTS {
            let current = self.store.reference(team_id, knowledgebase_id, reference_id).await?;
            let before = EntryText { question: current.question.clone(), answer: current.answer.clone() };
            let after = EntryText {
                question: question.clone().unwrap_or_else(|| before.question.clone()),
                answer: answer.clone().unwrap_or_else(|| before.answer.clone()),
            };
            after.validate()?;
            if after == before {
                // Nothing to change: the reference, and its updatedAt, stay as they are.
                return Ok(current);
            }
            let (vectors, tag) = self.embed_entry(team_id, &after).await?;
            let embedding = (vectors.as_slice(), tag.as_str());
            let replaced = self
                .store
                .replace_reference_text(team_id, knowledgebase_id, reference_id, &before, &after, embedding)
                .await?;
            if let Some(reference) = replaced {
                self.sync.apply_or_log().await;
                return Ok(reference);
            }
        }
        Err(ServiceError::conflict("The reference kept changing while it was being updated")
            .with_hint("Retry the update."))
    }

    pub async fn delete_reference(
        &self,
        team_id: &str,
        knowledgebase_id: &str,
        reference_id: &str,
    ) -> ServiceResult<Reference> {
        self.store.knowledgebase(team_id, knowledgebase_id).await?;
        let deleted = self.store.delete_reference(team_id, knowledgebase_id, reference_id).await?;
        self.sync.apply_or_log().await;
        Ok(deleted)
    }

    pub async fn search(
        &self,
        team_id: &str,
        knowledgebase_id: &str,
        query: &str,
        limit: u32,
        threshold: f32,
    ) -> ServiceResult<Vec<SearchHit>> {
        check_search(query, limit, threshold)?;
        let started = std::time::Instant::now();
        // The lookup runs beside the embedding, which takes far longer.
        let (_, vector) =
            tokio::try_join!(self.store.knowledgebase(team_id, knowledgebase_id), self.embed_one(query.to_owned()))?;
        let embedded = started.elapsed();
        let query = SearchQuery { vector, terms: self.sync.lexical().query(query) };
        let hits = self
            .sync
            .index()
            .search(knowledgebase_id, &query, usize::try_from(limit).unwrap_or(10), threshold)
            .await
            .map_err(|e| ServiceError::internal(e.context("searching the index")))?;
        let ids: Vec<String> = hits.iter().map(|hit| hit.id.to_string()).collect();
        let searched = started.elapsed();
        let mut references = self.store.references_by_ids(team_id, knowledgebase_id, &ids).await?;
        tracing::debug!(
            embed_us = embedded.as_micros(),
            index_us = (searched - embedded).as_micros(),
            read_us = (started.elapsed() - searched).as_micros(),
            hits = hits.len(),
            "search timings"
        );
        // An entry deleted since the index saw it is dropped here rather than shown.
        Ok(hits
            .iter()
            .filter_map(|hit| {
                references.remove(&hit.id.to_string()).map(|reference| SearchHit {
                    reference: Some(reference),
                    similarity: hit.score,
                    relevance: hit.relevance,
                })
            })
            .collect())
    }

    pub async fn reference(
        &self,
        team_id: &str,
        knowledgebase_id: &str,
        reference_id: &str,
    ) -> ServiceResult<Reference> {
        self.store.knowledgebase(team_id, knowledgebase_id).await?;
        self.store.reference(team_id, knowledgebase_id, reference_id).await
    }
}
