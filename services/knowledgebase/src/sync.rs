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
use crate::index::{Point, VectorIndex};
use crate::store::{IndexedEntry, KnowledgeStore};

const BATCH: i64 = 500;

pub struct IndexSync {
    store: KnowledgeStore,
    index: Arc<dyn VectorIndex>,
    lock: Mutex<()>,
}

fn point(entry: IndexedEntry) -> anyhow::Result<Point> {
    Ok(Point {
        id: uuid::Uuid::parse_str(&entry.id).with_context(|| format!("entry id {}", entry.id))?,
        knowledgebase_id: entry.knowledgebase_id,
        team_id: entry.team_id,
        vector: entry.embedding,
    })
}

impl IndexSync {
    pub fn new(store: KnowledgeStore, index: Arc<dyn VectorIndex>) -> Arc<Self> {
        Arc::new(Self { store, index, lock: Mutex::new(()) })
    }

    pub fn index(&self) -> &Arc<dyn VectorIndex> {
        &self.index
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
                self.index.upsert(existing.into_iter().map(point).collect::<anyhow::Result<_>>()?).await?;
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

    /// Empties the index and fills it again from SQL, re-embedding entries whose vector came
    /// from another model. Returns the number of entries indexed.
    pub async fn rebuild(&self, embedder: &dyn Embedder) -> anyhow::Result<i64> {
        let _guard = self.lock.lock().await;
        loop {
            let stale = self.store.stale_embeddings(embedder.model(), 64).await?;
            if stale.is_empty() {
                break;
            }
            let texts = stale.iter().map(|(_, text)| text.embedding_input()).collect();
            let vectors = embedder.embed(texts).await.context("re-embedding entries")?;
            for ((id, _), vector) in stale.iter().zip(vectors) {
                self.store.set_embedding(id, &vector, embedder.model()).await?;
            }
        }
        self.index.clear().await.context("clearing the index")?;
        let mut after = String::new();
        let mut indexed = 0;
        loop {
            let page = self.store.indexed_page(&after, BATCH).await?;
            let Some(last) = page.last() else {
                break;
            };
            after = last.id.clone();
            indexed += i64::try_from(page.len()).unwrap_or(0);
            self.index.upsert(page.into_iter().map(point).collect::<anyhow::Result<_>>()?).await?;
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
