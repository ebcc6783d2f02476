//! The vector index: an embedded qdrant-edge shard in the data directory by default
//! (`edge.rs`), a Qdrant server through qdrant-client when `QDRANT_URL` is set
//! (`remote.rs`). One collection for every team, with a tenant payload index on the
//! knowledgebase id; every search is filtered by it. SQL holds the truth; the index is
//! derived from it and can be rebuilt.

use std::path::PathBuf;
use std::sync::Arc;

use anyhow::Context;

mod edge;
mod remote;

pub use edge::{EdgeIndex, EdgeIndexInfo};
pub use remote::RemoteIndex;

/// The score threshold to hand Qdrant for a search whose threshold is `threshold`. Qdrant
/// keeps only scores strictly above its threshold, while [`VectorIndex::search`] promises
/// "at least": ask for a hair less, then keep what [`reaches`] the threshold, so that a hit
/// searched again with its own score as the threshold is still found.
fn qdrant_threshold(threshold: f32) -> f32 {
    threshold - 1e-6
}

fn reaches(hit: &Hit, threshold: f32) -> bool {
    hit.score >= threshold
}

#[derive(Debug, Clone, PartialEq)]
pub struct Point {
    /// The knowledge entry's id.
    pub id: uuid::Uuid,
    pub knowledgebase_id: String,
    pub team_id: String,
    pub vector: Vec<f32>,
}

#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Hit {
    pub id: uuid::Uuid,
    /// Cosine similarity.
    pub score: f32,
}

#[async_trait::async_trait]
pub trait VectorIndex: Send + Sync + 'static {
    /// Inserts or replaces points; durable when it returns.
    async fn upsert(&self, points: Vec<Point>) -> anyhow::Result<()>;
    /// Removes points; unknown ids are ignored. Durable when it returns.
    async fn delete(&self, ids: Vec<uuid::Uuid>) -> anyhow::Result<()>;
    /// Removes every point of a knowledge base.
    async fn delete_knowledgebase(&self, knowledgebase_id: &str) -> anyhow::Result<()>;
    /// The best `limit` points of one knowledge base with a similarity of at least
    /// `threshold`, best first.
    async fn search(
        &self,
        knowledgebase_id: &str,
        vector: Vec<f32>,
        limit: usize,
        threshold: f32,
    ) -> anyhow::Result<Vec<Hit>>;
    /// How many points the index holds.
    async fn count(&self) -> anyhow::Result<usize>;
    /// Removes every point (before a rebuild from SQL).
    async fn clear(&self) -> anyhow::Result<()>;
}

#[derive(Debug, Clone)]
pub struct IndexConfig {
    /// Where the embedded shard lives.
    pub path: PathBuf,
    /// A Qdrant server (gRPC URL, e.g. `http://qdrant:6334`); the embedded shard when unset.
    pub qdrant_url: Option<String>,
    pub qdrant_api_key: Option<String>,
    pub collection: String,
    pub dimensions: usize,
}

/// Opens the index the configuration names: the Qdrant server when `qdrant_url` is set, else the
/// embedded shard in `path` (created when missing).
pub async fn open(config: &IndexConfig) -> anyhow::Result<Arc<dyn VectorIndex>> {
    if let Some(url) = &config.qdrant_url {
        let index =
            RemoteIndex::open(url, config.qdrant_api_key.as_deref(), &config.collection, config.dimensions).await?;
        return Ok(Arc::new(index));
    }
    let path = config.path.clone();
    let dimensions = config.dimensions;
    // Opening loads segments and may optimize what a previous run left unindexed: blocking work.
    let index = tokio::task::spawn_blocking(move || EdgeIndex::open(&path, dimensions))
        .await
        .context("opening the vector index")??;
    Ok(Arc::new(index))
}
