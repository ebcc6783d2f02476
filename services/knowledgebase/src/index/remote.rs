//! The index on a Qdrant server, through qdrant-client (gRPC).
//!
//! One collection holds every team's points; `knowledgebase_id` is a keyword tenant index
//! (`is_tenant`), so the server stores each knowledge base's points together, and every search
//! and knowledge-base delete filters on it. Writes use `wait: true`, so they are applied (and in
//! the server's WAL) when they return.

use anyhow::Context;
use qdrant_client::qdrant::point_id::PointIdOptions;
use qdrant_client::qdrant::vectors_config::Config as VectorsConfigKind;
use qdrant_client::qdrant::{
    Condition, CountPointsBuilder, CreateCollectionBuilder, CreateFieldIndexCollectionBuilder, DeletePointsBuilder,
    Distance, FieldType, Filter, HnswConfigDiffBuilder, KeywordIndexParamsBuilder, PointId, PointStruct, PointsIdsList,
    Query, QueryPointsBuilder, UpsertPointsBuilder, VectorParamsBuilder,
};
use qdrant_client::{Payload, Qdrant};

use super::{Hit, Point, VectorIndex};

const KNOWLEDGEBASE_ID: &str = "knowledgebase_id";
const TEAM_ID: &str = "team_id";

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
        if !self.client.collection_exists(&self.collection).await.context("checking whether the collection exists")? {
            let create = CreateCollectionBuilder::new(&self.collection)
                .vectors_config(VectorParamsBuilder::new(self.dimensions as u64, Distance::Cosine))
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
        Ok(())
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
            Some(VectorsConfigKind::Params(params)) => {
                anyhow::ensure!(
                    params.size == self.dimensions as u64,
                    "the collection holds {}-dimensional vectors, the embedder makes {}",
                    params.size,
                    self.dimensions
                );
                Ok(())
            }
            Some(VectorsConfigKind::ParamsMap(_)) => {
                anyhow::bail!("the collection uses named vectors; it needs a single unnamed vector")
            }
            None => Ok(()),
        }
    }

    fn knowledgebase_filter(knowledgebase_id: &str) -> Filter {
        Filter::must([Condition::matches(KNOWLEDGEBASE_ID, knowledgebase_id.to_owned())])
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
        let points: Vec<PointStruct> = points
            .into_iter()
            .map(|point| {
                let payload =
                    Payload::from([(KNOWLEDGEBASE_ID, point.knowledgebase_id.into()), (TEAM_ID, point.team_id.into())]);
                PointStruct::new(point.id.to_string(), point.vector, payload)
            })
            .collect();
        self.client
            .upsert_points(UpsertPointsBuilder::new(&self.collection, points).wait(true))
            .await
            .context("upserting points into Qdrant")?;
        Ok(())
    }

    async fn delete(&self, ids: Vec<uuid::Uuid>) -> anyhow::Result<()> {
        if ids.is_empty() {
            return Ok(());
        }
        let ids: Vec<PointId> = ids.into_iter().map(|id| PointId::from(id.to_string())).collect();
        self.client
            .delete_points(DeletePointsBuilder::new(&self.collection).points(PointsIdsList { ids }).wait(true))
            .await
            .context("deleting points from Qdrant")?;
        Ok(())
    }

    async fn delete_knowledgebase(&self, knowledgebase_id: &str) -> anyhow::Result<()> {
        self.client
            .delete_points(
                DeletePointsBuilder::new(&self.collection)
                    .points(Self::knowledgebase_filter(knowledgebase_id))
                    .wait(true),
            )
            .await
            .with_context(|| format!("deleting the points of knowledge base {knowledgebase_id} from Qdrant"))?;
        Ok(())
    }

    async fn search(
        &self,
        knowledgebase_id: &str,
        vector: Vec<f32>,
        limit: usize,
        threshold: f32,
    ) -> anyhow::Result<Vec<Hit>> {
        if limit == 0 {
            return Ok(Vec::new());
        }
        anyhow::ensure!(
            vector.len() == self.dimensions,
            "query vector has {} dimensions, the index has {}",
            vector.len(),
            self.dimensions
        );
        let response = self
            .client
            .query(
                QueryPointsBuilder::new(&self.collection)
                    .query(Query::new_nearest(vector))
                    .filter(Self::knowledgebase_filter(knowledgebase_id))
                    .score_threshold(super::qdrant_threshold(threshold))
                    .limit(limit as u64)
                    .with_payload(false),
            )
            .await
            .context("searching Qdrant")?;
        Ok(response
            .result
            .into_iter()
            .filter_map(|point| {
                // Only UUIDs are ever written; anything else is not one of ours.
                let Some(PointIdOptions::Uuid(id)) = point.id?.point_id_options else {
                    return None;
                };
                let id = uuid::Uuid::parse_str(&id).ok()?;
                Some(Hit { id, score: point.score })
            })
            .filter(|hit| super::reaches(hit, threshold))
            .collect())
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
