//! Keeps the vector index in step with SQL.
//!
//! Writers record each change in `index_outbox` in their own transaction. Applying the
//! outbox reads the *current* SQL state of the entries it names (an entry that exists is
//! upserted with its stored vector, one that is gone is deleted), under one lock, so the
//! last applier always writes the newest state whatever order writers committed in. Items
//! are removed only once the index has them: what a crash leaves behind is applied at the
//! next start, and a background drainer retries in between.

use std::collections::HashSet;
use std::sync::Arc;
use std::time::Duration;

use anyhow::Context;
use tokio::sync::{Mutex, watch};

use crate::embed::Embedder;
use crate::index::{Point, VectorIndex, passage_id};
use crate::lexical::Lexical;
use crate::passages::{self, embed_entries, embedding_tag};
use crate::store::{IndexedEntry, KnowledgeStore};

const BATCH: i64 = 500;

pub struct IndexSync {
    store: KnowledgeStore,
    index: Arc<dyn VectorIndex>,
    lexical: Lexical,
    /// Dimensions of one stored vector, to split an entry's passages.
    dimensions: usize,
    /// The embedding model's name: entries another model embedded stay out of the index until
    /// `reindex` embeds them again (their vectors mean nothing beside this model's).
    model: String,
    lock: Mutex<()>,
}

/// The points of an entry: one per passage, each with its stored vector and its BM25 terms.
/// Vectors stored under an older passage rule (one per entry, until `rebuild` re-embeds it)
/// pair with the first passages.
pub fn entry_points(lexical: &Lexical, dimensions: usize, entry: IndexedEntry) -> anyhow::Result<Vec<Point>> {
    let entry_id = uuid::Uuid::parse_str(&entry.id).with_context(|| format!("entry id {}", entry.id))?;
    let texts = passages::passages(&entry.text);
    let vectors = entry.embedding.chunks_exact(dimensions);
    let mut points = Vec::with_capacity(texts.len());
    for (passage, (text, vector)) in (0u32..).zip(texts.iter().zip(vectors)) {
        points.push(Point {
            id: passage_id(entry_id, passage),
            entry_id,
            knowledgebase_id: entry.knowledgebase_id.clone(),
            team_id: entry.team_id.clone(),
            vector: vector.to_vec(),
            terms: lexical.document(text),
        });
    }
    Ok(points)
}

/// Whether an entry's embedding tag (`<model>` or `<model>; passages ...`) names `model`.
fn made_by(tag: &str, model: &str) -> bool {
    tag.split(';').next().map(str::trim) == Some(model)
}

impl IndexSync {
    pub fn new(
        store: KnowledgeStore,
        index: Arc<dyn VectorIndex>,
        dimensions: usize,
        model: &str,
    ) -> anyhow::Result<Arc<Self>> {
        anyhow::ensure!(dimensions > 0, "vector dimensions must be positive");
        let model = model.to_owned();
        Ok(Arc::new(Self { store, index, lexical: Lexical::new()?, dimensions, model, lock: Mutex::new(()) }))
    }

    pub fn index(&self) -> &Arc<dyn VectorIndex> {
        &self.index
    }

    /// The BM25 model of the stored vectors, for queries.
    pub fn lexical(&self) -> &Lexical {
        &self.lexical
    }

    /// The points of the entries this model embedded, and how many entries that was.
    fn points_of(&self, entries: Vec<IndexedEntry>) -> anyhow::Result<(Vec<Point>, usize)> {
        let mut points = Vec::with_capacity(entries.len());
        let mut ours = 0;
        for entry in entries.into_iter().filter(|entry| made_by(&entry.model, &self.model)) {
            ours += 1;
            points.extend(entry_points(&self.lexical, self.dimensions, entry)?);
        }
        Ok((points, ours))
    }

    /// Applies every pending change; returns how many outbox items were applied.
    pub async fn apply_pending(&self) -> anyhow::Result<usize> {
        let _guard = self.lock.lock().await;
        let mut applied = 0;
        loop {
            let items = self.store.outbox(BATCH).await.context("reading the index outbox")?;
            if items.is_empty() {
                return Ok(applied);
            }
            let mut entry_ids = HashSet::new();
            for item in &items {
                if item.op == "delete_knowledgebase" {
                    self.index.delete_knowledgebase(&item.knowledgebase_id).await?;
                } else {
                    entry_ids.insert(item.entry_id.clone());
                }
            }
            let entry_ids: Vec<String> = entry_ids.into_iter().collect();
            let existing = self.store.indexed_entries(&entry_ids).await.context("reading entries to index")?;
            let present: HashSet<&str> = existing.iter().map(|e| e.id.as_str()).collect();
            let gone: Vec<uuid::Uuid> = entry_ids
                .iter()
                .filter(|id| !present.contains(id.as_str()))
                .filter_map(|id| uuid::Uuid::parse_str(id).ok())
                .collect();
            if !existing.is_empty() {
                self.index.upsert(self.points_of(existing)?.0).await?;
            }
            if !gone.is_empty() {
                self.index.delete(gone).await?;
            }
            let ids: Vec<String> = items.into_iter().map(|item| item.id).collect();
            applied += ids.len();
            self.store.clear_outbox(&ids).await.context("clearing the index outbox")?;
        }
    }

    /// Applies the outbox, logging rather than failing: the write it follows has committed,
    /// and the drainer will try again.
    pub async fn apply_or_log(&self) {
        if let Err(error) = self.apply_pending().await {
            tracing::error!(error = format!("{error:#}"), "applying index changes failed; will retry");
        }
    }

    /// Empties the index and fills it again from SQL, re-embedding entries whose vectors came
    /// from another model or passage rule. Returns the number of entries indexed.
    pub async fn rebuild(&self, embedder: &dyn Embedder) -> anyhow::Result<i64> {
        let _guard = self.lock.lock().await;
        let tag = embedding_tag(embedder.model());
        loop {
            let stale = self.store.stale_embeddings(&tag, 64).await?;
            if stale.is_empty() {
                break;
            }
            // An entry of one passage embedded by this model before passages existed has the
            // vector it would get now: only its tag changes.
            let (same, changed): (Vec<_>, Vec<_>) = stale.into_iter().partition(|entry| {
                entry.model == embedder.model()
                    && entry.embedding.len() == self.dimensions
                    && passages::passages(&entry.text).len() == 1
            });
            for entry in same {
                self.store.set_embedding(&entry.id, &entry.embedding, &tag).await?;
            }
            let texts: Vec<_> = changed.iter().map(|entry| entry.text.clone()).collect();
            let vectors =
                embed_entries(embedder, crate::embed::NO_TEAM, &texts).await.context("re-embedding entries")?;
            for (entry, vectors) in changed.iter().zip(vectors) {
                self.store.set_embedding(&entry.id, &vectors, &tag).await?;
            }
        }
        self.fill_locked().await
    }

    /// Empties the index and fills it again from SQL with the vectors stored there, stale or
    /// not (an entry embedded under an older passage rule gets its first passages), except
    /// those another model made. Fast: what a start does when it finds the index empty;
    /// `rebuild` is what re-embeds.
    pub async fn fill_from_sql(&self) -> anyhow::Result<i64> {
        let _guard = self.lock.lock().await;
        self.fill_locked().await
    }

    async fn fill_locked(&self) -> anyhow::Result<i64> {
        self.index.clear().await.context("clearing the index")?;
        let mut after = String::new();
        let mut indexed = 0;
        loop {
            let page = self.store.indexed_page(&after, BATCH).await?;
            let Some(last) = page.last() else {
                break;
            };
            after = last.id.clone();
            let (points, ours) = self.points_of(page)?;
            indexed += i64::try_from(ours).unwrap_or(0);
            self.index.upsert(points).await?;
        }
        Ok(indexed)
    }

    /// Retries pending changes every few seconds until shut down.
    pub async fn drain(self: Arc<Self>, mut shutdown: watch::Receiver<bool>) {
        loop {
            tokio::select! {
                _ = tokio::time::sleep(Duration::from_secs(5)) => {}
                _ = shutdown.wait_for(|stop| *stop) => return,
            }
            self.apply_or_log().await;
        }
    }
}

#[cfg(test)]
mod model_tests {
    use super::made_by;

    #[test]
    fn an_entry_belongs_to_the_model_its_tag_names() {
        assert!(made_by("all-MiniLM-L6-v2", "all-MiniLM-L6-v2"));
        assert!(made_by("all-MiniLM-L6-v2; passages 128/96", "all-MiniLM-L6-v2"));
        assert!(!made_by("all-mpnet-base-v2; passages 128/96", "all-MiniLM-L6-v2"));
        assert!(!made_by("", "all-MiniLM-L6-v2"));
    }
}
