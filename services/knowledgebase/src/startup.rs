//! Opening the service: the store, the embedder, the index (locked against a second
//! process when it is the embedded shard), then the repair of what a crash left between
//! SQL and the index.

use std::fs::File;
use std::sync::Arc;

use anyhow::Context;

use switchboard_kit::grpc::Channel;
use switchboard_kit::jobs::{Runner, RunnerConfig};
use switchboard_proto::v1::agents_service_client::AgentsServiceClient;

use crate::budget::{BudgetSettings, EmbeddingBudget};
use crate::embed::{self, EmbeddingConfig};
use crate::index::{self, IndexConfig};
use crate::ingest::Ingest;
use crate::knowledge::Knowledge;
use crate::objects::{Objects, ObjectsConfig};
use crate::passages;
use crate::sources::fetch::{FetchPolicy, Fetcher};
use crate::sources::llm::{ChatConfig, ChatExtractor};
use crate::store::{EXTRACT_DOCUMENT, KnowledgeStore, SCRAPE_WEBPAGE, UNLINK_AGENTS};
use crate::sync::IndexSync;
use crate::unlink::UnlinkAgents;

/// Uploaded files up to this size are accepted unless configured otherwise.
pub const DEFAULT_MAX_UPLOAD_BYTES: usize = 20 * 1024 * 1024;

#[derive(Debug, Clone)]
pub struct Settings {
    pub database_url: String,
    pub index: IndexConfig,
    pub embedding: EmbeddingConfig,
    pub objects: ObjectsConfig,
    pub max_upload_bytes: usize,
    pub fetch: FetchPolicy,
    /// Q&A pairs written by a chat model instead of taken from headings.
    pub chat: Option<ChatConfig>,
    /// The least time between two refreshes of a page, and the length of a refresh "day"
    /// (`SWITCHBOARD_WEBPAGE_REFRESH_DAY`, 24 hours; shorter only for tests).
    pub refresh_day_ms: i64,
    /// The passages a request and a team a minute may give the encoder.
    pub budget: BudgetSettings,
}

/// The job runner: it scrapes webpages, extracts documents and unlinks the agents of deleted
/// knowledge bases (through `agents`).
pub fn runner(
    knowledge: &Arc<Knowledge>,
    settings: &Settings,
    config: RunnerConfig,
    agents: AgentsServiceClient<Channel>,
) -> anyhow::Result<Runner> {
    let fetcher = Fetcher::new(settings.fetch.clone()).context("building the page fetcher")?;
    let chat = settings.chat.clone().map(ChatExtractor::new).transpose().context("building the chat client")?;
    let ingest = Ingest::new(knowledge.clone(), fetcher, chat);
    Ok(Runner::new(knowledge.store.db().clone(), config)
        .with_waker(knowledge.jobs.clone())
        .handle(SCRAPE_WEBPAGE, ingest.clone())
        .handle(EXTRACT_DOCUMENT, ingest)
        .handle(UNLINK_AGENTS, Arc::new(UnlinkAgents::new(agents))))
}

/// Opens everything; fails when another process holds the embedded index.
pub async fn open(settings: Settings) -> anyhow::Result<Arc<Knowledge>> {
    let lock = match &settings.index.qdrant_url {
        Some(_) => None,
        None => Some(lock_index(&settings.index)?),
    };
    let store = KnowledgeStore::open(&settings.database_url).await?.with_refresh_day(settings.refresh_day_ms);
    let objects = Objects::open(&settings.objects)?;
    let embedding = settings.embedding.clone();
    let embedder =
        tokio::task::spawn_blocking(move || embed::load(&embedding)).await.context("loading the embedding model")??;
    let embedder: Arc<dyn embed::Embedder> = embed::Coalescing::new(embedder);
    let mut index_config = settings.index;
    index_config.dimensions = embedder.dimensions();
    let index = index::open(&index_config).await.context("opening the vector index")?;
    let sync = IndexSync::new(store.clone(), index, embedder.dimensions(), embedder.model())?;
    let repaired = sync.apply_pending().await.context("applying index changes left from the last run")?;
    if repaired > 0 {
        tracing::info!(repaired, "applied index changes left from the last run");
    }
    if sync.index().count().await? == 0 && store.count_entries().await? > 0 {
        // A new index (a first start with hybrid search replaced the old layout, or the index
        // directory was lost): fill it from SQL with the stored vectors, which takes seconds;
        // re-embedding what is stale is `admin reindex`'s, warned about below.
        tracing::info!("the vector index is empty while entries exist; filling it from SQL");
        let indexed = sync.fill_from_sql().await.context("filling the vector index from SQL")?;
        tracing::info!(indexed, "filled the vector index from SQL");
    }
    if !store.stale_embeddings(&passages::embedding_tag(embedder.model()), 1).await?.is_empty() {
        tracing::warn!(
            model = embedder.model(),
            "some entries were embedded by another model or passage rule; run `switchboard admin reindex` to \
             re-embed them"
        );
    }
    Ok(Arc::new(Knowledge {
        store,
        embedder,
        budget: EmbeddingBudget::open(&settings.budget).context("opening the embedding budget")?,
        sync,
        objects,
        max_upload_bytes: settings.max_upload_bytes,
        jobs: Arc::new(tokio::sync::Notify::new()),
        _index_lock: lock,
    }))
}

/// An exclusive lock next to the embedded index: the shard must have one writer process.
fn lock_index(config: &IndexConfig) -> anyhow::Result<File> {
    let parent = config.path.parent().map(std::path::Path::to_path_buf).unwrap_or_default();
    std::fs::create_dir_all(&parent).with_context(|| format!("creating {}", parent.display()))?;
    let path = config.path.with_extension("lock");
    let file = File::create(&path).with_context(|| format!("creating {}", path.display()))?;
    file.try_lock().map_err(|_| {
        anyhow::anyhow!(
            "the vector index at {} is in use by another Switchboard process \
             (for `admin reindex` on a running platform, pass --url with its knowledgebase gRPC address)",
            config.path.display()
        )
    })?;
    Ok(file)
}
