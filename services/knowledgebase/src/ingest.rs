//! The jobs that turn sources into searchable entries: scraping a webpage and extracting
//! an uploaded document. Both are idempotent (a source's entries are replaced as a whole),
//! so a job that runs again after a crash does no harm.
//!
//! A failure marks the source `failed` with its reason at once, keeping the entries of the
//! last good run; failures that may pass (timeouts, 5xx, network errors) are retried by
//! the job runner with backoff, the others are final.

use std::sync::Arc;

use anyhow::Context;
use switchboard_kit::jobs::{Job, JobHandler};

use crate::knowledge::Knowledge;
use crate::passages;
use crate::sources::fetch::{ContentKind, FetchError, Fetcher};
use crate::sources::html::Section;
use crate::sources::llm::ChatExtractor;
use crate::sources::qa::{self, QaPair};
use crate::sources::{documents, html};
use crate::store::{EXTRACT_DOCUMENT, EntryText, ExtractedEntry, SCRAPE_WEBPAGE, SourceKind};

/// Entries embedded per call to the embedder.
const EMBED_BATCH: usize = 64;

pub struct Ingest {
    knowledge: Arc<Knowledge>,
    fetcher: Fetcher,
    chat: Option<ChatExtractor>,
}

/// How a job attempt ended when it did not succeed.
enum Failure {
    /// Worth another attempt.
    Transient(String),
    /// Final: the source stays `failed`.
    Final(String),
}

impl From<anyhow::Error> for Failure {
    fn from(error: anyhow::Error) -> Self {
        Failure::Transient(format!("{error:#}"))
    }
}

impl From<switchboard_kit::ServiceError> for Failure {
    fn from(error: switchboard_kit::ServiceError) -> Self {
        Failure::Transient(error.to_string())
    }
}

fn is_transient(error: &FetchError) -> bool {
    match error {
        FetchError::Timeout(_) | FetchError::Network(_) | FetchError::RobotsUnavailable(..) => true,
        FetchError::HttpStatus(status) => *status >= 500 || *status == 429 || *status == 408,
        _ => false,
    }
}

impl Ingest {
    pub fn new(knowledge: Arc<Knowledge>, fetcher: Fetcher, chat: Option<ChatExtractor>) -> Arc<Self> {
        Arc::new(Self { knowledge, fetcher, chat })
    }

    async fn scrape(&self, webpage_id: &str) -> Result<(), Failure> {
        let store = &self.knowledge.store;
        let Some((webpage, team_id)) = store.webpage_by_id(webpage_id).await? else {
            return Ok(());
        };
        let fetched = self.fetcher.fetch(&webpage.url).await.map_err(|error| {
            if is_transient(&error) { Failure::Transient(error.to_string()) } else { Failure::Final(error.to_string()) }
        })?;
        let (title, sections) = tokio::task::spawn_blocking(move || match fetched.kind {
            ContentKind::Html => {
                let page = html::extract(&fetched.body);
                (page.title, page.sections)
            }
            ContentKind::PlainText => (None, qa::plain_text_sections(&fetched.body)),
        })
        .await
        .context("extracting the page's text")?;
        let pairs = self.pairs(title.as_deref(), &webpage.name, &sections, Vec::new()).await;
        if pairs.is_empty() {
            return Err(Failure::Final("the page contains no text".to_owned()));
        }
        let entries = self.embed(&team_id, pairs).await?;
        self.finish(SourceKind::Webpage, webpage_id, &entries).await
    }

    async fn extract(&self, document_id: &str) -> Result<(), Failure> {
        let store = &self.knowledge.store;
        let Some((document, team_id, object_key)) = store.document_by_id(document_id).await? else {
            return Ok(());
        };
        // The format found at upload is stored as the document's content type (the file name
        // may have no extension the upload's Content-Type stood in for).
        let format = documents::Format::from_content_type(&document.content_type)
            .or_else(|| documents::Format::from_file_name(&document.file_name))
            .ok_or_else(|| Failure::Final(format!("unsupported file type; supported: {}", documents::SUPPORTED)))?;
        let bytes = self.knowledge.objects.get(&object_key).await?;
        let parsed = tokio::task::spawn_blocking(move || documents::parse(format, &bytes))
            .await
            .context("extracting the document's text")?
            .map_err(Failure::Final)?;
        let pairs = self.pairs(parsed.title.as_deref(), &document.name, &parsed.sections, parsed.pairs).await;
        if pairs.is_empty() {
            return Err(Failure::Final("the document contains no text".to_owned()));
        }
        let entries = self.embed(&team_id, pairs).await?;
        self.finish(SourceKind::Document, document_id, &entries).await
    }

    /// Stores the entries, waits until the vector index has them, then marks the source
    /// `ready`: a client (or webhook receiver) that sees `ready` finds the new content in
    /// its next search. An index that cannot be updated is a transient failure: the job
    /// runs again, and the entries stored meanwhile are applied by the drainer.
    async fn finish(&self, kind: SourceKind, source_id: &str, entries: &[ExtractedEntry]) -> Result<(), Failure> {
        let store = &self.knowledge.store;
        if !store.store_entries(kind, source_id, entries, &self.knowledge.embedding_tag()).await? {
            return Ok(());
        }
        self.knowledge.sync.apply_pending().await.context("applying the new entries to the vector index")?;
        store.mark_ready(kind, source_id).await?;
        Ok(())
    }

    /// Q&A pairs of the sections (by the chat model when one is configured), after the
    /// pairs a source gives ready-made.
    async fn pairs(
        &self,
        title: Option<&str>,
        name: &str,
        sections: &[Section],
        mut ready: Vec<QaPair>,
    ) -> Vec<QaPair> {
        let found = match &self.chat {
            Some(chat) => chat.pairs(title, name, sections).await,
            None => qa::from_sections(title, name, sections),
        };
        ready.extend(found);
        ready.retain(|pair| !pair.question.trim().is_empty() && !pair.answer.trim().is_empty());
        ready.truncate(qa::MAX_ENTRIES);
        ready
    }

    /// Embeds the entries for the source's team: each batch's passages are spent from the team's
    /// budget first, waiting while it is spent (a job has no client to answer 429), so a large
    /// source takes the team's minutes instead of the encoder's.
    async fn embed(&self, team_id: &str, pairs: Vec<QaPair>) -> anyhow::Result<Vec<ExtractedEntry>> {
        let mut entries = Vec::with_capacity(pairs.len());
        for batch in pairs.chunks(EMBED_BATCH) {
            let texts: Vec<EntryText> =
                batch.iter().map(|p| EntryText { question: p.question.clone(), answer: p.answer.clone() }).collect();
            self.knowledge.budget.spend_waiting(team_id, passages::count(&texts)).await;
            let vectors = passages::embed_entries(self.knowledge.embedder.as_ref(), team_id, &texts)
                .await
                .context("embedding extracted entries")?;
            entries.extend(texts.into_iter().zip(vectors).map(|(text, embedding)| ExtractedEntry { text, embedding }));
        }
        Ok(entries)
    }

    fn source_kind(job: &Job) -> anyhow::Result<SourceKind> {
        match job.kind.as_str() {
            SCRAPE_WEBPAGE => Ok(SourceKind::Webpage),
            EXTRACT_DOCUMENT => Ok(SourceKind::Document),
            other => anyhow::bail!("no handler for jobs of kind {other}"),
        }
    }
}

#[async_trait::async_trait]
impl JobHandler for Ingest {
    async fn run(&self, job: &Job) -> anyhow::Result<()> {
        let kind = Self::source_kind(job)?;
        let outcome = match kind {
            SourceKind::Webpage => self.scrape(&job.subject_id).await,
            SourceKind::Document => self.extract(&job.subject_id).await,
        };
        let (reason, retry) = match outcome {
            Ok(()) => return Ok(()),
            Err(Failure::Transient(reason)) => (reason, true),
            Err(Failure::Final(reason)) => (reason, false),
        };
        tracing::warn!(job = %job.id, source = %job.subject_id, %reason, retry, "ingesting a source failed");
        self.knowledge.store.fail_source(kind, &job.subject_id, &reason, job.created_at_ms).await?;
        if retry { Err(anyhow::anyhow!(reason)) } else { Ok(()) }
    }

    async fn gave_up(&self, job: &Job, error: &str) -> anyhow::Result<()> {
        let kind = Self::source_kind(job)?;
        self.knowledge.store.fail_source(kind, &job.subject_id, error, job.created_at_ms).await?;
        Ok(())
    }
}
