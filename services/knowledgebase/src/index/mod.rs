//! The vector index: an embedded qdrant-edge shard in the data directory by default
//! (`edge.rs`), a Qdrant server through qdrant-client when `QDRANT_URL` is set
//! (`remote.rs`). One collection for every team, with a tenant payload index on the
//! knowledgebase id; every search is filtered by it. SQL holds the truth; the index is
//! derived from it and can be rebuilt.
//!
//! A point is a passage of an entry, with a named dense vector (`dense`) and a named BM25
//! sparse vector (`bm25`, inverse document frequency applied by the index). A search asks the
//! backend for two candidate lists, one per vector, and `fusion` turns them into entries in
//! one place for both backends.

use std::path::PathBuf;
use std::sync::Arc;

use anyhow::Context;

pub use crate::lexical::Terms;

mod edge;
pub mod fusion;
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

fn reaches(similarity: f32, threshold: f32) -> bool {
    similarity >= threshold
}

/// The dense vector's name in both backends.
const DENSE: &str = "dense";
/// The BM25 sparse vector's name in both backends.
const SPARSE: &str = "bm25";
/// The payload field naming the entry a passage belongs to.
const ENTRY_ID: &str = "entry_id";
const KNOWLEDGEBASE_ID: &str = "knowledgebase_id";
const TEAM_ID: &str = "team_id";

/// One passage of a knowledge entry (see `passages`): a short entry has one.
#[derive(Debug, Clone, PartialEq)]
pub struct Point {
    /// The passage's point id (see [`passage_id`]).
    pub id: uuid::Uuid,
    /// The knowledge entry's id.
    pub entry_id: uuid::Uuid,
    pub knowledgebase_id: String,
    pub team_id: String,
    pub vector: Vec<f32>,
    /// The passage's BM25 terms.
    pub terms: Terms,
}

/// The point id of passage `passage` of an entry: the entry's id with the passage number
/// XORed into its last bits, so the first passage (and a one-passage entry) is the entry's own
/// id. Entry ids are random (v4), so another entry's id is never hit.
pub fn passage_id(entry_id: uuid::Uuid, passage: u32) -> uuid::Uuid {
    uuid::Uuid::from_u128(entry_id.as_u128() ^ u128::from(passage))
}

/// What a search looks for: the query's embedding and its BM25 terms (empty for a query of
/// stopwords only, which makes the search dense only).
#[derive(Debug, Clone, PartialEq)]
pub struct SearchQuery {
    pub vector: Vec<f32>,
    pub terms: Terms,
}

impl SearchQuery {
    /// A query without a lexical part.
    pub fn dense(vector: Vec<f32>) -> Self {
        Self { vector, terms: Terms::default() }
    }
}

/// A passage one retriever found.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Candidate {
    pub entry_id: uuid::Uuid,
    /// The retriever's own score: cosine similarity for the dense list, BM25 for the lexical.
    pub score: f32,
    /// Cosine similarity of the query and the passage.
    pub similarity: f32,
}

impl Candidate {
    /// A passage of the dense list: its score is its similarity.
    fn dense(entry_id: uuid::Uuid, score: f32) -> Self {
        Self { entry_id, score, similarity: score }
    }

    /// A passage of the lexical list, its similarity computed from the dense vector the
    /// backend returned with it.
    fn lexical(entry_id: uuid::Uuid, score: f32, query: &[f32], passage: &[f32]) -> Self {
        Self { entry_id, score, similarity: cosine(query, passage) }
    }
}

/// The entries these passages belong to, each once.
fn entries_of(points: &[Point]) -> Vec<uuid::Uuid> {
    let ids: std::collections::BTreeSet<uuid::Uuid> = points.iter().map(|point| point.entry_id).collect();
    ids.into_iter().collect()
}

/// The two ranked lists a search fuses, best first.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Candidates {
    /// Passages by cosine similarity, all with a similarity of at least the threshold.
    pub dense: Vec<Candidate>,
    /// Passages by BM25 score, whatever their similarity.
    pub lexical: Vec<Candidate>,
}

/// A knowledge entry a search found.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Hit {
    /// The knowledge entry's id.
    pub id: uuid::Uuid,
    /// Cosine similarity of the query and the entry's best passage.
    pub score: f32,
    /// The fused relevance the hits are ordered by, from 0 to 1 (see `fusion`): hits never
    /// come before one of higher relevance.
    pub relevance: f32,
}

#[async_trait::async_trait]
pub trait VectorIndex: Send + Sync + 'static {
    /// Inserts or replaces the passages of the entries these points belong to (an entry's
    /// passages beyond those given are removed); durable when it returns.
    async fn upsert(&self, points: Vec<Point>) -> anyhow::Result<()>;
    /// Removes every passage of these entries; unknown ids are ignored. Durable when it returns.
    async fn delete(&self, entry_ids: Vec<uuid::Uuid>) -> anyhow::Result<()>;
    /// Removes every point of a knowledge base.
    async fn delete_knowledgebase(&self, knowledgebase_id: &str) -> anyhow::Result<()>;
    /// The best `per_list` passages of one knowledge base by each retriever; dense ones have a
    /// similarity of at least `threshold`.
    async fn candidates(
        &self,
        knowledgebase_id: &str,
        query: &SearchQuery,
        per_list: usize,
        threshold: f32,
    ) -> anyhow::Result<Candidates>;
    /// How many points (passages) the index holds.
    async fn count(&self) -> anyhow::Result<usize>;
    /// Removes every point (before a rebuild from SQL).
    async fn clear(&self) -> anyhow::Result<()>;

    /// The best `limit` entries of one knowledge base whose best passage has a similarity of at
    /// least `threshold`, in fused order (see `fusion`).
    async fn search(
        &self,
        knowledgebase_id: &str,
        query: &SearchQuery,
        limit: usize,
        threshold: f32,
    ) -> anyhow::Result<Vec<Hit>> {
        if limit == 0 {
            return Ok(Vec::new());
        }
        let tuning = fusion::Tuning::get();
        let candidates = self.candidates(knowledgebase_id, query, tuning.per_list(limit), threshold).await?;
        Ok(fusion::fuse(&candidates, tuning, limit, threshold))
    }
}

/// Cosine similarity; the stored and query vectors are unit length already, but a vector
/// another model or a Qdrant server hands back is normalised again to be sure.
fn cosine(a: &[f32], b: &[f32]) -> f32 {
    let (mut dot, mut aa, mut bb) = (0.0f32, 0.0f32, 0.0f32);
    for (x, y) in a.iter().zip(b) {
        dot += x * y;
        aa += x * x;
        bb += y * y;
    }
    if aa == 0.0 || bb == 0.0 { 0.0 } else { dot / (aa.sqrt() * bb.sqrt()) }
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
