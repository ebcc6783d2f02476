//! The embedded index: one qdrant-edge shard in the data directory.
//!
//! qdrant-edge 0.7.2 has sharp edges that shape this file:
//! - `EdgeShard::load` does not replay the WAL, so a write is only durable once the shard is
//!   flushed; every write batch is flushed before it returns.
//! - `flush` and `optimize` take the shard's internal locks with `try_lock().expect(..)` and panic
//!   when an `update` holds them, so every update, flush and optimize runs under `write_lock`.
//!   Searches and counts only take read locks inside the shard and need no lock of ours.
//! - The shard never optimizes by itself: without `optimize()` every point stays in one plain
//!   (brute-force) segment. `optimize()` runs inline with the write that brings the number of
//!   points changed since the last optimization to `OPTIMIZE_AFTER_CHANGES`, after `clear`, and
//!   when the shard is opened. That write pays for it: 0.2 s in `examples/index_bench.rs`, where
//!   no knowledge base is big enough to need graph links, seconds when one is; searches carry on
//!   meanwhile.
//! - The WAL directory is locked while a shard is open: a second `EdgeIndex` on the same
//!   directory, in this process or another, fails to open until the first is dropped.
//! - Nothing in the crate truncates the WAL (its `ack` is never called), and the open segment is
//!   memory-mapped, its written pages counting as resident memory until it is closed. Segments
//!   are therefore small (`WAL_SEGMENT_BYTES`), and `open` deletes the closed segments a previous
//!   run left (see `prune_wal`): the WAL is never read back, since `load` does not replay it.
//! - Every call blocks, so the async methods run them on the blocking pool.

use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};

use anyhow::{Context, anyhow};
use qdrant_edge::external::ordered_float::OrderedFloat;
use qdrant_edge::external::serde_json::{Map, Value};
use qdrant_edge::{
    Condition, CountRequest, CreateIndex, Distance, EdgeConfig, EdgeConfigBuilder, EdgeShard,
    EdgeSparseVectorParamsBuilder, EdgeVectorParamsBuilder, FieldCondition, FieldIndexOperations, Filter,
    HasIdCondition, HnswIndexConfig, JsonPath, KeywordIndexParams, Match, Modifier, NamedQuery, Payload,
    PayloadFieldSchema, PayloadSchemaParams, PointId, PointInsertOperations, PointOperations, PointStructPersisted,
    QueryEnum, QueryRequest, ScoredPoint, ScoringQuery, SparseVector, UpdateOperation, ValueVariants, VectorInternal,
    VectorPersisted, VectorStructInternal, VectorStructPersisted, WalOptions, WithPayloadInterface, WithVector,
};

use super::{
    Candidate, Candidates, DENSE, ENTRY_ID, KNOWLEDGEBASE_ID, Point, SPARSE, SearchQuery, TEAM_ID, VectorIndex,
};

/// Graph degree of the per-knowledge-base HNSW graphs (Qdrant's default `m`).
const PAYLOAD_M: usize = 16;

/// How many upserted or deleted points make the next write run `optimize()`. Optimizing only does
/// real work once a plain segment outgrows the indexing threshold (about 6,500 vectors of 384
/// dimensions) or holds more than 20 % deleted points; below that it just plans and returns, so
/// this only bounds how long such a segment can go unnoticed.
const OPTIMIZE_AFTER_CHANGES: usize = 1_000;

/// Size of a WAL segment file. The default (32 MiB) made the open segment a 0-32 MiB sawtooth in
/// the service's resident memory (bench/soak.sh); a record larger than this gets a segment of its
/// own size.
const WAL_SEGMENT_BYTES: usize = 4 << 20;

/// Name of the WAL directory inside the shard directory (qdrant-edge's `WAL_PATH`).
const WAL_DIR: &str = "wal";

/// A vector index in an embedded qdrant-edge shard.
#[derive(Clone)]
pub struct EdgeIndex {
    inner: Arc<Inner>,
}

/// Shard statistics from [`EdgeIndex::info`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct EdgeIndexInfo {
    pub segments: usize,
    pub points: usize,
    /// Vectors in HNSW-indexed segments; the rest are searched by full scan.
    pub indexed_vectors: usize,
}

struct Inner {
    shard: EdgeShard,
    path: PathBuf,
    dimensions: usize,
    /// Serialises update, flush and optimize (see the module docs); holds the number of points
    /// changed since the last optimization.
    write_lock: Mutex<usize>,
}

impl std::fmt::Debug for EdgeIndex {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("EdgeIndex")
            .field("path", &self.inner.path)
            .field("dimensions", &self.inner.dimensions)
            .finish_non_exhaustive()
    }
}

impl EdgeIndex {
    /// Creates the shard in `path` (and the directory) or loads the one already there, makes sure
    /// the payload indexes exist and optimizes what a previous run left unoptimized. Blocks.
    pub fn open(path: &Path, dimensions: usize) -> anyhow::Result<Self> {
        Self::open_with_wal_segments(path, dimensions, WAL_SEGMENT_BYTES)
    }

    /// [`EdgeIndex::open`] with WAL segments of `wal_segment_bytes`, so that tests can close
    /// segments without writing megabytes.
    #[doc(hidden)]
    pub fn open_with_wal_segments(path: &Path, dimensions: usize, wal_segment_bytes: usize) -> anyhow::Result<Self> {
        anyhow::ensure!(dimensions > 0, "vector index dimensions must be positive");
        std::fs::create_dir_all(path).with_context(|| format!("creating the index directory {}", path.display()))?;
        let config = shard_config(dimensions, wal_segment_bytes);
        if holds_shard(path)?
            && let Some(reason) = outdated_layout(path, dimensions)?
        {
            // Made before hybrid search (its points lack the BM25 vector and the passages), or for
            // another embedding model. SQL holds everything, so start empty; the service rebuilds
            // an empty index from SQL, and `reindex` embeds what another model made.
            tracing::warn!(path = %path.display(), reason, "replacing the vector index");
            std::fs::remove_dir_all(path).with_context(|| format!("removing the old index in {}", path.display()))?;
            std::fs::create_dir_all(path).with_context(|| format!("creating {}", path.display()))?;
        }
        let shard = if holds_shard(path)? {
            prune_wal(&path.join(WAL_DIR))?;
            // Passing the config makes `load` reject a shard built for other dimensions.
            EdgeShard::load(path, Some(config))
                .map_err(|e| anyhow!("{e}"))
                .with_context(|| format!("loading the vector index in {}", path.display()))?
        } else {
            EdgeShard::new(path, config)
                .map_err(|e| anyhow!("{e}"))
                .with_context(|| format!("creating the vector index in {}", path.display()))?
        };
        let inner = Inner { shard, path: path.to_path_buf(), dimensions, write_lock: Mutex::new(0) };
        {
            let mut changes = inner.lock();
            inner.ensure_payload_indexes()?;
            inner.optimize_locked(&mut changes)?;
        }
        Ok(Self { inner: Arc::new(inner) })
    }

    /// The directory holding the shard.
    pub fn path(&self) -> &Path {
        &self.inner.path
    }

    /// Runs the shard's optimizers now (HNSW indexing, merging small segments, vacuuming
    /// deleted points) instead of waiting for the write that would trigger them. Returns whether
    /// anything was optimized.
    pub async fn optimize(&self) -> anyhow::Result<bool> {
        self.blocking(|inner| {
            let mut changes = inner.lock();
            inner.optimize_locked(&mut changes)
        })
        .await
    }

    /// What the shard holds, for diagnostics and benchmarks. `points` is approximate (summed
    /// over segments); [`VectorIndex::count`] is exact.
    pub async fn info(&self) -> anyhow::Result<EdgeIndexInfo> {
        self.blocking(|inner| {
            let info = inner.shard.info();
            Ok(EdgeIndexInfo {
                segments: info.segments_count,
                points: info.points_count,
                indexed_vectors: info.indexed_vectors_count,
            })
        })
        .await
    }

    async fn blocking<T, F>(&self, f: F) -> anyhow::Result<T>
    where
        T: Send + 'static,
        F: FnOnce(&Inner) -> anyhow::Result<T> + Send + 'static,
    {
        let inner = Arc::clone(&self.inner);
        tokio::task::spawn_blocking(move || f(&inner)).await.context("vector index task failed")?
    }
}

impl Inner {
    fn lock(&self) -> MutexGuard<'_, usize> {
        // A panic under the lock (qdrant-edge panics when a flush fails) must not wedge the index:
        // the interrupted write already reported an error to its caller, and the next flush
        // retries persisting whatever it left in memory.
        self.write_lock.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Applies one write, makes it durable, and optimizes when enough has changed. The caller
    /// holds the write lock (`changes`).
    fn write_locked(&self, changes: &mut usize, operation: UpdateOperation, changed: usize) -> anyhow::Result<()> {
        self.writes_locked(changes, vec![operation], changed)
    }

    /// [`Self::write_locked`] for several operations, made durable together.
    fn writes_locked(
        &self,
        changes: &mut usize,
        operations: Vec<UpdateOperation>,
        changed: usize,
    ) -> anyhow::Result<()> {
        for operation in operations {
            self.shard.update(operation).map_err(|e| anyhow!("{e}")).context("updating the vector index")?;
        }
        self.shard.flush();
        *changes = changes.saturating_add(changed);
        if *changes >= OPTIMIZE_AFTER_CHANGES
            && let Err(err) = self.optimize_locked(changes)
        {
            // The write itself is durable; a failed optimization only costs search speed and is
            // retried on the next write.
            tracing::warn!(error = %format!("{err:#}"), "optimizing the vector index failed");
        }
        Ok(())
    }

    fn optimize_locked(&self, changes: &mut usize) -> anyhow::Result<bool> {
        let optimized = self.shard.optimize().map_err(|e| anyhow!("{e}")).context("optimizing the vector index")?;
        *changes = 0;
        if optimized {
            // Segments built by the optimizer should carry the payload indexes over; creating an
            // index that exists is a no-op, so make sure rather than rely on it.
            self.ensure_payload_indexes()?;
        }
        Ok(optimized)
    }

    /// Creates the keyword indexes every search and delete filters on (idempotent). The caller
    /// holds the write lock.
    fn ensure_payload_indexes(&self) -> anyhow::Result<()> {
        for (field, is_tenant) in [(KNOWLEDGEBASE_ID, true), (TEAM_ID, false), (ENTRY_ID, false)] {
            let schema = PayloadFieldSchema::FieldParams(PayloadSchemaParams::Keyword(KeywordIndexParams {
                r#type: Default::default(),
                is_tenant: Some(is_tenant),
                on_disk: None,
                // Searches never filter by team or entry alone; graphs per team or entry would be
                // wasted work.
                enable_hnsw: Some(is_tenant),
            }));
            let operation = UpdateOperation::FieldIndexOperation(FieldIndexOperations::CreateIndex(CreateIndex {
                field_name: json_path(field)?,
                field_schema: Some(schema),
            }));
            self.shard
                .update(operation)
                .map_err(|e| anyhow!("{e}"))
                .with_context(|| format!("creating the {field} payload index"))?;
        }
        self.shard.flush();
        Ok(())
    }

    fn count_filtered(&self, filter: Option<Filter>) -> anyhow::Result<usize> {
        self.shard
            .count(CountRequest { filter, exact: true })
            .map_err(|e| anyhow!("{e}"))
            .context("counting vector index points")
    }
}

#[async_trait::async_trait]
impl VectorIndex for EdgeIndex {
    async fn upsert(&self, points: Vec<Point>) -> anyhow::Result<()> {
        if points.is_empty() {
            return Ok(());
        }
        let dimensions = self.inner.dimensions;
        if let Some(point) = points.iter().find(|p| p.vector.len() != dimensions) {
            anyhow::bail!("vector of {} has {} dimensions, the index has {dimensions}", point.id, point.vector.len());
        }
        let changed = points.len();
        // Written first, then the entries' other passages (left from a longer text) removed: a
        // search in between sees the entry, never a gap.
        let stale = Filter {
            must: Some(vec![entries_condition(super::entries_of(&points).into_iter())?]),
            must_not: Some(vec![Condition::HasId(
                points.iter().map(|p| PointId::Uuid(p.id)).collect::<HasIdCondition>(),
            )]),
            ..Filter::default()
        };
        let points: Vec<PointStructPersisted> = points.into_iter().map(to_edge_point).collect();
        self.blocking(move |inner| {
            let operations = vec![
                UpdateOperation::PointOperation(PointOperations::UpsertPoints(PointInsertOperations::PointsList(
                    points,
                ))),
                UpdateOperation::PointOperation(PointOperations::DeletePointsByFilter(stale)),
            ];
            let mut changes = inner.lock();
            inner.writes_locked(&mut changes, operations, changed)
        })
        .await
    }

    async fn delete(&self, entry_ids: Vec<uuid::Uuid>) -> anyhow::Result<()> {
        if entry_ids.is_empty() {
            return Ok(());
        }
        let filter = Filter::new_must(entries_condition(entry_ids.into_iter())?);
        self.blocking(move |inner| {
            let mut changes = inner.lock();
            let changed = inner.count_filtered(Some(filter.clone()))?;
            if changed == 0 {
                return Ok(());
            }
            let operation = UpdateOperation::PointOperation(PointOperations::DeletePointsByFilter(filter));
            inner.write_locked(&mut changes, operation, changed)
        })
        .await
    }

    async fn delete_knowledgebase(&self, knowledgebase_id: &str) -> anyhow::Result<()> {
        let filter = knowledgebase_filter(knowledgebase_id)?;
        self.blocking(move |inner| {
            let mut changes = inner.lock();
            // Counted so that dropping a large knowledge base leads to a vacuum.
            let changed = inner.count_filtered(Some(filter.clone()))?;
            if changed == 0 {
                return Ok(());
            }
            let operation = UpdateOperation::PointOperation(PointOperations::DeletePointsByFilter(filter));
            inner.write_locked(&mut changes, operation, changed)
        })
        .await
    }

    async fn candidates(
        &self,
        knowledgebase_id: &str,
        query: &SearchQuery,
        per_list: usize,
        threshold: f32,
    ) -> anyhow::Result<Candidates> {
        let dimensions = self.inner.dimensions;
        anyhow::ensure!(
            query.vector.len() == dimensions,
            "query vector has {} dimensions, the index has {dimensions}",
            query.vector.len()
        );
        let filter = knowledgebase_filter(knowledgebase_id)?;
        let entry_id = WithPayloadInterface::Fields(vec![json_path(ENTRY_ID)?]);
        let dense = QueryRequest {
            prefetches: Vec::new(),
            query: Some(ScoringQuery::Vector(QueryEnum::Nearest(NamedQuery::new(
                VectorInternal::Dense(query.vector.clone()),
                DENSE,
            )))),
            filter: Some(filter.clone()),
            score_threshold: Some(OrderedFloat(super::qdrant_threshold(threshold))),
            limit: per_list,
            offset: 0,
            params: None,
            with_vector: WithVector::Bool(false),
            with_payload: entry_id.clone(),
        };
        let lexical = (!query.terms.is_empty()).then(|| QueryRequest {
            prefetches: Vec::new(),
            query: Some(ScoringQuery::Vector(QueryEnum::Nearest(NamedQuery::new(
                VectorInternal::Sparse(SparseVector {
                    indices: query.terms.indices.clone(),
                    values: query.terms.values.clone(),
                }),
                SPARSE,
            )))),
            filter: Some(filter),
            score_threshold: None,
            limit: per_list,
            offset: 0,
            params: None,
            // The similarity of a passage only this list found comes from its dense vector.
            with_vector: WithVector::Selector(vec![DENSE.to_owned()]),
            with_payload: entry_id,
        });
        let vector = query.vector.clone();
        self.blocking(move |inner| {
            let search = |request: QueryRequest| {
                inner.shard.query(request).map_err(|e| anyhow!("{e}")).context("searching the vector index")
            };
            let dense = search(dense)?
                .into_iter()
                .filter_map(|point| Some(Candidate::dense(entry_of(&point)?, point.score)))
                .filter(|candidate| super::reaches(candidate.similarity, threshold))
                .collect();
            let lexical = match lexical {
                Some(request) => search(request)?
                    .into_iter()
                    .filter_map(|point| {
                        Some(Candidate::lexical(entry_of(&point)?, point.score, &vector, dense_vector(&point)?))
                    })
                    .collect(),
                None => Vec::new(),
            };
            Ok(Candidates { dense, lexical })
        })
        .await
    }

    async fn count(&self) -> anyhow::Result<usize> {
        self.blocking(|inner| inner.count_filtered(None)).await
    }

    async fn clear(&self) -> anyhow::Result<()> {
        self.blocking(|inner| {
            let mut changes = inner.lock();
            // An empty filter matches every point. Deleting in place (rather than swapping the
            // shard directory) keeps concurrent searches valid; the vacuum below reclaims the space.
            let operation = UpdateOperation::PointOperation(PointOperations::DeletePointsByFilter(Filter::default()));
            inner.shard.update(operation).map_err(|e| anyhow!("{e}")).context("clearing the vector index")?;
            inner.shard.flush();
            inner.optimize_locked(&mut changes)?;
            Ok(())
        })
        .await
    }
}

fn shard_config(dimensions: usize, wal_segment_bytes: usize) -> EdgeConfig {
    EdgeConfigBuilder::new()
        .wal_options(WalOptions { segment_capacity: wal_segment_bytes, ..WalOptions::default() })
        .vector(DENSE, EdgeVectorParamsBuilder::new(dimensions, Distance::Cosine).build())
        // BM25's inverse document frequency is applied at search time from the shard's counts.
        .sparse_vector(SPARSE, EdgeSparseVectorParamsBuilder::new().modifier(Modifier::Idf).build())
        // Every search is filtered by knowledge base, so a global graph over all teams would never
        // be used: build graph links per knowledge base instead (Qdrant's multitenancy recipe).
        // Knowledge bases under the full-scan threshold (about 6,500 vectors) need no graph at
        // all: they are scanned exactly, their points stored together thanks to the tenant index.
        .hnsw_config(HnswIndexConfig { m: 0, payload_m: Some(PAYLOAD_M), ..HnswIndexConfig::default() })
        .build()
}

/// Deletes every closed WAL segment but the newest, which a previous run of the shard left
/// behind: the segments already hold every write (each is flushed before it returns) and `load`
/// never replays the WAL. The newest closed segment stays so that the WAL's numbering, which
/// gives every write its version, carries on from where it was: restarted from zero, writes
/// would carry versions older than the points they replace and be ignored. Takes the WAL's own
/// lock, so a shard open in another process is left alone (its `load` then fails as before).
fn prune_wal(wal: &Path) -> anyhow::Result<()> {
    if !wal.is_dir() {
        return Ok(());
    }
    let dir = std::fs::File::open(wal).with_context(|| format!("opening {}", wal.display()))?;
    if dir.try_lock().is_err() {
        return Ok(());
    }
    let mut closed = Vec::new();
    for entry in std::fs::read_dir(wal).with_context(|| format!("reading {}", wal.display()))? {
        let entry = entry.with_context(|| format!("reading {}", wal.display()))?;
        let name = entry.file_name();
        if let Some(start) = name.to_str().and_then(|n| n.strip_prefix("closed-")).and_then(|n| n.parse::<u64>().ok()) {
            closed.push((start, entry.path()));
        }
    }
    closed.sort_unstable();
    closed.pop();
    for (_, segment) in &closed {
        std::fs::remove_file(segment).with_context(|| format!("deleting the old WAL segment {}", segment.display()))?;
    }
    if !closed.is_empty() {
        tracing::info!(deleted = closed.len(), wal = %wal.display(), "deleted closed vector index WAL segments");
    }
    Ok(())
}

/// `EdgeShard::new` refuses a directory that already holds segments and `load` fails on one that
/// holds nothing, so tell the two apart: `new` writes its config file before anything else.
fn holds_shard(path: &Path) -> anyhow::Result<bool> {
    if path.join("edge_config.json").is_file() {
        return Ok(true);
    }
    let segments = path.join("segments");
    if !segments.is_dir() {
        return Ok(false);
    }
    let mut entries = std::fs::read_dir(&segments).with_context(|| format!("reading {}", segments.display()))?;
    Ok(entries.next().is_some())
}

fn json_path(field: &str) -> anyhow::Result<JsonPath> {
    field.parse().map_err(|()| anyhow!("invalid payload path {field:?}"))
}

fn knowledgebase_filter(knowledgebase_id: &str) -> anyhow::Result<Filter> {
    Ok(Filter::new_must(Condition::Field(FieldCondition::new_match(
        json_path(KNOWLEDGEBASE_ID)?,
        Match::new_value(ValueVariants::String(knowledgebase_id.to_owned())),
    ))))
}

/// Matches the passages of any of these entries.
fn entries_condition(entry_ids: impl Iterator<Item = uuid::Uuid>) -> anyhow::Result<Condition> {
    let ids: Vec<String> = entry_ids.map(|id| id.to_string()).collect();
    Ok(Condition::Field(FieldCondition::new_match(json_path(ENTRY_ID)?, Match::from(ids))))
}

/// Whether the shard in `path` is of the layout before hybrid search (one unnamed dense vector).
/// Why the shard in `path` cannot serve this service as it is, if it cannot.
fn outdated_layout(path: &Path, dimensions: usize) -> anyhow::Result<Option<&'static str>> {
    let file = path.join("edge_config.json");
    if !file.is_file() {
        return Ok(None);
    }
    let text = std::fs::read_to_string(&file).with_context(|| format!("reading {}", file.display()))?;
    let config: EdgeConfig =
        qdrant_edge::external::serde_json::from_str(&text).with_context(|| format!("parsing {}", file.display()))?;
    if !config.sparse_vectors.contains_key(SPARSE) {
        return Ok(Some("the single-vector layout of before hybrid search"));
    }
    if config.vectors.get(DENSE).is_some_and(|dense| dense.size != dimensions) {
        return Ok(Some("vectors of another dimension: the embedding model changed"));
    }
    Ok(None)
}

fn entry_of(point: &ScoredPoint) -> Option<uuid::Uuid> {
    match point.payload.as_ref()?.0.get(ENTRY_ID)? {
        Value::String(id) => uuid::Uuid::parse_str(id).ok(),
        _ => None,
    }
}

fn dense_vector(point: &ScoredPoint) -> Option<&[f32]> {
    match point.vector.as_ref()? {
        VectorStructInternal::Named(vectors) => match vectors.get(DENSE)? {
            VectorInternal::Dense(vector) => Some(vector),
            _ => None,
        },
        _ => None,
    }
}

fn to_edge_point(point: Point) -> PointStructPersisted {
    let mut payload = Map::new();
    payload.insert(KNOWLEDGEBASE_ID.to_owned(), Value::String(point.knowledgebase_id));
    payload.insert(TEAM_ID.to_owned(), Value::String(point.team_id));
    payload.insert(ENTRY_ID.to_owned(), Value::String(point.entry_id.to_string()));
    let mut vectors = std::collections::HashMap::from([(DENSE.to_owned(), VectorPersisted::Dense(point.vector))]);
    if !point.terms.is_empty() {
        let sparse = SparseVector { indices: point.terms.indices, values: point.terms.values };
        vectors.insert(SPARSE.to_owned(), VectorPersisted::Sparse(sparse));
    }
    PointStructPersisted {
        id: PointId::Uuid(point.id),
        vector: VectorStructPersisted::Named(vectors),
        payload: Some(Payload(payload)),
    }
}
