//! The index on a Qdrant server, through qdrant-client (gRPC).
//!
//! One collection holds every team's points; `knowledgebase_id` is a keyword tenant index
//! (`is_tenant`), so the server stores each knowledge base's points together, and every search
//! and knowledge-base delete filters on it. Writes use `wait: true`, so they are applied (and in
//! the server's WAL) when they return.

use anyhow::Context;
use qdrant_client::qdrant::vector_output::Vector as VectorOutput;
use qdrant_client::qdrant::vectors_config::Config as VectorsConfigKind;
use qdrant_client::qdrant::{
    Condition, CountPointsBuilder, CreateCollectionBuilder, CreateFieldIndexCollectionBuilder, DeletePointsBuilder,
    Distance, FieldType, Filter, HnswConfigDiffBuilder, KeywordIndexParamsBuilder, Modifier, NamedVectors,
    PayloadIncludeSelector, PointId, PointStruct, Query, QueryBatchPointsBuilder, QueryPoints, QueryPointsBuilder,
    ScoredPoint, SparseVectorParamsBuilder, SparseVectorsConfigBuilder, UpsertPointsBuilder, Vector, VectorInput,
    VectorParamsBuilder, VectorsConfigBuilder, VectorsSelector, value::Kind, with_payload_selector,
    with_vectors_selector,
};
use qdrant_client::{Payload, Qdrant};

use super::{
    Candidate, Candidates, DENSE, ENTRY_ID, KNOWLEDGEBASE_ID, Point, SPARSE, SearchQuery, TEAM_ID, VectorIndex,
};

/// Graph degree of the per-knowledge-base HNSW graphs (Qdrant's default `m`).
const PAYLOAD_M: u64 = 16;

/// A vector index in a collection of a Qdrant server.
pub struct RemoteIndex {
    client: Qdrant,
    collection: String,
    dimensions: usize,
}

impl std::fmt::Debug for RemoteIndex {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("RemoteIndex")
            .field("collection", &self.collection)
            .field("dimensions", &self.dimensions)
            .finish_non_exhaustive()
    }
}

impl RemoteIndex {
    /// Connects to the server at `url` (gRPC, e.g. `http://qdrant:6334`), creates `collection`
    /// when it is missing and makes sure its payload indexes exist.
    pub async fn open(url: &str, api_key: Option<&str>, collection: &str, dimensions: usize) -> anyhow::Result<Self> {
        anyhow::ensure!(dimensions > 0, "vector index dimensions must be positive");
        let client = Qdrant::from_url(url)
            .api_key(api_key)
            .build()
            .with_context(|| format!("configuring the Qdrant client for {url}"))?;
        let index = Self { client, collection: collection.to_owned(), dimensions };
        index
            .ensure_collection()
            .await
            .with_context(|| format!("preparing the Qdrant collection {collection} at {url}"))?;
        Ok(index)
    }

    async fn ensure_collection(&self) -> anyhow::Result<()> {
        if self.client.collection_exists(&self.collection).await.context("checking whether the collection exists")?
            && let Some(reason) = self.outdated_layout().await?
        {
            // Made before hybrid search (its points lack the BM25 vector and the passages), or for
            // another embedding model. SQL holds everything; the service rebuilds an empty index
            // from SQL, and `reindex` embeds what another model made.
            tracing::warn!(collection = %self.collection, reason, "replacing the Qdrant collection");
            self.client.delete_collection(&self.collection).await.context("deleting the old collection")?;
        }
        if !self.client.collection_exists(&self.collection).await.context("checking whether the collection exists")? {
            let mut dense = VectorsConfigBuilder::default();
            dense.add_named_vector_params(DENSE, VectorParamsBuilder::new(self.dimensions as u64, Distance::Cosine));
            let mut sparse = SparseVectorsConfigBuilder::default();
            // BM25's inverse document frequency is applied at search time from the collection's counts.
            sparse.add_named_vector_params(SPARSE, SparseVectorParamsBuilder::default().modifier(Modifier::Idf));
            let create = CreateCollectionBuilder::new(&self.collection)
                .vectors_config(dense)
                .sparse_vectors_config(sparse)
                // Every search is filtered by knowledge base, so a global graph over all teams
                // would never be used: build one graph per knowledge base instead (Qdrant's
                // multitenancy recipe).
                .hnsw_config(HnswConfigDiffBuilder::default().m(0).payload_m(PAYLOAD_M));
            if let Err(err) = self.client.create_collection(create).await {
                // Another instance may have created it between the check and the create.
                if !self.client.collection_exists(&self.collection).await.unwrap_or(false) {
                    return Err(err).context("creating the collection");
                }
            }
        }
        self.check_dimensions().await?;
        // Creating an index that already exists with the same schema is a no-op on the server.
        self.client
            .create_field_index(
                CreateFieldIndexCollectionBuilder::new(&self.collection, KNOWLEDGEBASE_ID, FieldType::Keyword)
                    .field_index_params(KeywordIndexParamsBuilder::default().is_tenant(true))
                    .wait(true),
            )
            .await
            .context("creating the knowledgebase_id payload index")?;
        self.client
            .create_field_index(
                CreateFieldIndexCollectionBuilder::new(&self.collection, TEAM_ID, FieldType::Keyword)
                    // Searches never filter by team alone; per-team graphs would be wasted work.
                    .field_index_params(KeywordIndexParamsBuilder::default().enable_hnsw(false))
                    .wait(true),
            )
            .await
            .context("creating the team_id payload index")?;
        self.client
            .create_field_index(
                CreateFieldIndexCollectionBuilder::new(&self.collection, ENTRY_ID, FieldType::Keyword)
                    .field_index_params(KeywordIndexParamsBuilder::default().enable_hnsw(false))
                    .wait(true),
            )
            .await
            .context("creating the entry_id payload index")?;
        Ok(())
    }

    /// Why the collection cannot serve this service as it is, if it cannot.
    async fn outdated_layout(&self) -> anyhow::Result<Option<&'static str>> {
        let info = self.client.collection_info(&self.collection).await.context("reading the collection info")?;
        let Some(params) = info.result.and_then(|info| info.config).and_then(|config| config.params) else {
            return Ok(None);
        };
        if !params.sparse_vectors_config.as_ref().is_some_and(|sparse| sparse.map.contains_key(SPARSE)) {
            return Ok(Some("the single-vector layout of before hybrid search"));
        }
        let dense_size = match params.vectors_config.and_then(|vectors| vectors.config) {
            Some(VectorsConfigKind::ParamsMap(map)) => map.map.get(DENSE).map(|dense| dense.size),
            _ => None,
        };
        if dense_size.is_some_and(|size| size != self.dimensions as u64) {
            return Ok(Some("vectors of another dimension: the embedding model changed"));
        }
        Ok(None)
    }

    /// Fails early on a collection made for another embedding model rather than on every upsert.
    async fn check_dimensions(&self) -> anyhow::Result<()> {
        let info = self.client.collection_info(&self.collection).await.context("reading the collection info")?;
        let vectors = info
            .result
            .and_then(|info| info.config)
            .and_then(|config| config.params)
            .and_then(|params| params.vectors_config)
            .and_then(|vectors| vectors.config);
        match vectors {
            Some(VectorsConfigKind::ParamsMap(map)) => {
                let params =
                    map.map.get(DENSE).with_context(|| format!("the collection has no vector named {DENSE:?}"))?;
                anyhow::ensure!(
                    params.size == self.dimensions as u64,
                    "the collection holds {}-dimensional vectors, the embedder makes {}",
                    params.size,
                    self.dimensions
                );
                Ok(())
            }
            Some(VectorsConfigKind::Params(_)) => {
                anyhow::bail!("the collection has a single unnamed vector; it needs {DENSE:?} and {SPARSE:?}")
            }
            None => Ok(()),
        }
    }

    fn knowledgebase_filter(knowledgebase_id: &str) -> Filter {
        Filter::must([Condition::matches(KNOWLEDGEBASE_ID, knowledgebase_id.to_owned())])
    }

    /// Matches the passages of any of these entries.
    fn entries_condition(entry_ids: impl Iterator<Item = uuid::Uuid>) -> Condition {
        Condition::matches(ENTRY_ID, entry_ids.map(|id| id.to_string()).collect::<Vec<String>>())
    }

    async fn delete_by_filter(&self, filter: Filter, what: &str) -> anyhow::Result<()> {
        self.client
            .delete_points(DeletePointsBuilder::new(&self.collection).points(filter).wait(true))
            .await
            .with_context(|| format!("deleting {what} from Qdrant"))?;
        Ok(())
    }
}

#[async_trait::async_trait]
impl VectorIndex for RemoteIndex {
    async fn upsert(&self, points: Vec<Point>) -> anyhow::Result<()> {
        if points.is_empty() {
            return Ok(());
        }
        let dimensions = self.dimensions;
        if let Some(point) = points.iter().find(|p| p.vector.len() != dimensions) {
            anyhow::bail!("vector of {} has {} dimensions, the index has {dimensions}", point.id, point.vector.len());
        }
        // Written first, then the entries' other passages (left from a longer text) removed: a
        // search in between sees the entry, never a gap.
        let stale = Filter {
            must: vec![Self::entries_condition(super::entries_of(&points).into_iter())],
            must_not: vec![Condition::has_id(points.iter().map(|p| PointId::from(p.id.to_string())))],
            ..Filter::default()
        };
        let points: Vec<PointStruct> = points
            .into_iter()
            .map(|point| {
                let payload = Payload::from([
                    (KNOWLEDGEBASE_ID, point.knowledgebase_id.into()),
                    (TEAM_ID, point.team_id.into()),
                    (ENTRY_ID, point.entry_id.to_string().into()),
                ]);
                let mut vectors = NamedVectors::default().add_vector(DENSE, point.vector);
                if !point.terms.is_empty() {
                    vectors = vectors.add_vector(SPARSE, Vector::new_sparse(point.terms.indices, point.terms.values));
                }
                PointStruct::new(point.id.to_string(), vectors, payload)
            })
            .collect();
        self.client
            .upsert_points(UpsertPointsBuilder::new(&self.collection, points).wait(true))
            .await
            .context("upserting points into Qdrant")?;
        self.delete_by_filter(stale, "replaced passages").await
    }

    async fn delete(&self, entry_ids: Vec<uuid::Uuid>) -> anyhow::Result<()> {
        if entry_ids.is_empty() {
            return Ok(());
        }
        self.delete_by_filter(Filter::must([Self::entries_condition(entry_ids.into_iter())]), "entries").await
    }

    async fn delete_knowledgebase(&self, knowledgebase_id: &str) -> anyhow::Result<()> {
        self.delete_by_filter(
            Self::knowledgebase_filter(knowledgebase_id),
            &format!("the points of knowledge base {knowledgebase_id}"),
        )
        .await
    }

    async fn candidates(
        &self,
        knowledgebase_id: &str,
        query: &SearchQuery,
        per_list: usize,
        threshold: f32,
    ) -> anyhow::Result<Candidates> {
        anyhow::ensure!(
            query.vector.len() == self.dimensions,
            "query vector has {} dimensions, the index has {}",
            query.vector.len(),
            self.dimensions
        );
        let dense: QueryPoints = QueryPointsBuilder::new(&self.collection)
            .query(Query::new_nearest(query.vector.clone()))
            .using(DENSE)
            .filter(Self::knowledgebase_filter(knowledgebase_id))
            .score_threshold(super::qdrant_threshold(threshold))
            .limit(per_list as u64)
            .with_payload(entry_id_only())
            .into();
        let mut requests = vec![dense];
        if !query.terms.is_empty() {
            let sparse = VectorInput::new_sparse(query.terms.indices.clone(), query.terms.values.clone());
            requests.push(
                QueryPointsBuilder::new(&self.collection)
                    .query(Query::new_nearest(sparse))
                    .using(SPARSE)
                    .filter(Self::knowledgebase_filter(knowledgebase_id))
                    .limit(per_list as u64)
                    .with_payload(entry_id_only())
                    // The similarity of a passage only this list found comes from its dense vector.
                    .with_vectors(with_vectors_selector::SelectorOptions::Include(VectorsSelector {
                        names: vec![DENSE.to_owned()],
                    }))
                    .into(),
            );
        }
        // Both lists in one round trip.
        let response = self
            .client
            .query_batch(QueryBatchPointsBuilder::new(&self.collection, requests))
            .await
            .context("searching Qdrant")?;
        let mut lists = response.result.into_iter().map(|batch| batch.result);
        let dense = lists
            .next()
            .unwrap_or_default()
            .into_iter()
            .filter_map(|point| Some(Candidate::dense(entry_of(&point)?, point.score)))
            .filter(|candidate| super::reaches(candidate.similarity, threshold))
            .collect();
        let lexical = lists
            .next()
            .unwrap_or_default()
            .into_iter()
            .filter_map(|point| {
                Some(Candidate::lexical(entry_of(&point)?, point.score, &query.vector, &dense_vector(&point)?))
            })
            .collect();
        Ok(Candidates { dense, lexical })
    }

    async fn count(&self) -> anyhow::Result<usize> {
        let response = self
            .client
            .count(CountPointsBuilder::new(&self.collection).exact(true))
            .await
            .context("counting Qdrant points")?;
        let count = response.result.map_or(0, |result| result.count);
        usize::try_from(count).context("point count overflows usize")
    }

    async fn clear(&self) -> anyhow::Result<()> {
        // An empty filter matches every point; deleting (rather than dropping the collection)
        // keeps the collection's configuration and payload indexes, and other instances' searches
        // keep working meanwhile.
        self.client
            .delete_points(DeletePointsBuilder::new(&self.collection).points(Filter::default()).wait(true))
            .await
            .context("clearing the Qdrant collection")?;
        Ok(())
    }
}

fn entry_id_only() -> with_payload_selector::SelectorOptions {
    with_payload_selector::SelectorOptions::Include(PayloadIncludeSelector { fields: vec![ENTRY_ID.to_owned()] })
}

/// The entry a returned passage belongs to (its payload); `None` for a point that is not one
/// of ours.
fn entry_of(point: &ScoredPoint) -> Option<uuid::Uuid> {
    match point.payload.get(ENTRY_ID)?.kind.as_ref()? {
        Kind::StringValue(id) => uuid::Uuid::parse_str(id).ok(),
        _ => None,
    }
}

fn dense_vector(point: &ScoredPoint) -> Option<Vec<f32>> {
    match point.vectors.as_ref()?.get_vector_by_name(DENSE)? {
        VectorOutput::Dense(vector) => Some(vector.data),
        _ => None,
    }
}
