//! Sentence embeddings. The default is all-MiniLM-L6-v2 run in process with candle
//! (`bert.rs`), which runs other BERT and MPNet sentence-transformers models (all-mpnet-base-v2)
//! from the directory SWITCHBOARD_EMBEDDING_MODEL_DIR names; an OpenAI-compatible
//! `/v1/embeddings` endpoint is the configurable alternative (`openai.rs`).

use std::path::PathBuf;
use std::sync::Arc;

/// Turns texts into L2-normalised vectors, so that a dot product is the cosine similarity.
#[async_trait::async_trait]
pub trait Embedder: Send + Sync + 'static {
    /// One vector per text, in order, each `dimensions()` long: passages to store, which
    /// wait while queries are embedded.
    async fn embed(&self, texts: Vec<String>) -> anyhow::Result<Vec<Vec<f32>>>;
    /// [`Embedder::embed`] for a team's passages: where the embedder queues work (the local
    /// model behind [`Coalescing`]), teams take turns, so that one team's import does not hold
    /// the model while another team's write waits.
    async fn embed_for(&self, _team_id: &str, texts: Vec<String>) -> anyhow::Result<Vec<Vec<f32>>> {
        self.embed(texts).await
    }
    /// [`Embedder::embed`] for the few passages of a single write, which someone waits for:
    /// ahead of bulk ingestion and behind queries where the embedder can tell them apart (the
    /// local model).
    async fn embed_writes(&self, texts: Vec<String>) -> anyhow::Result<Vec<Vec<f32>>> {
        self.embed(texts).await
    }
    /// [`Embedder::embed`] for searches' queries, which go ahead of passages where the
    /// embedder can tell them apart (the local model).
    async fn embed_queries(&self, texts: Vec<String>) -> anyhow::Result<Vec<Vec<f32>>> {
        self.embed(texts).await
    }
    fn dimensions(&self) -> usize;
    /// A name of the model, stored with each vector so that a model change can be detected.
    fn model(&self) -> &str;
    /// How many calls may usefully run side by side.
    fn parallelism(&self) -> usize {
        1
    }
}

/// Whose turn work of no team takes (an operator's reindex, and [`Embedder::embed`] called
/// without one): one more turn among the teams'.
pub const NO_TEAM: &str = "";

#[derive(Debug, Clone)]
pub struct OpenAiConfig {
    /// Base URL, e.g. `https://api.openai.com/v1`; `/embeddings` is appended.
    pub url: String,
    pub model: String,
    pub api_key: Option<String>,
    pub dimensions: usize,
}

#[derive(Debug, Clone)]
pub struct EmbeddingConfig {
    /// Directory holding `config.json`, `tokenizer.json` and `model.safetensors` (and, optionally,
    /// sentence-transformers' `sentence_bert_config.json`); its name is the model's name.
    pub model_dir: PathBuf,
    /// When set, this endpoint is used instead of the local model.
    pub openai: Option<OpenAiConfig>,
}

pub mod batch;
pub mod bert;
mod bf16;
mod encoder;
mod fused;
mod gelu;
mod int8;
pub mod openai;
mod products;
mod threads;

pub use batch::Coalescing;
pub use bert::BertEmbedder;
pub use openai::OpenAiEmbedder;

/// The directory `scripts/lib.sh` (`ensure_model`) downloads the local model to.
pub fn default_model_dir() -> PathBuf {
    if let Some(dir) = std::env::var_os("SWITCHBOARD_EMBEDDING_MODEL_DIR").filter(|d| !d.is_empty()) {
        return PathBuf::from(dir);
    }
    let home = std::env::var_os("HOME").map(PathBuf::from).unwrap_or_default();
    home.join(".cache/switchboard/models/all-MiniLM-L6-v2")
}

/// The configured endpoint wins over the local model, which is loaded (about 90 MB for
/// all-MiniLM-L6-v2, 440 MB for all-mpnet-base-v2) only when needed.
pub fn load(config: &EmbeddingConfig) -> anyhow::Result<Arc<dyn Embedder>> {
    let inner: Arc<dyn Embedder> = match &config.openai {
        Some(openai) => Arc::new(OpenAiEmbedder::new(openai.clone())?),
        None => {
            let model = BertEmbedder::load(&config.model_dir)?;
            tracing::info!(model = model.model(), products = %model.products(), "embedding model loaded");
            Arc::new(model)
        }
    };
    Ok(Arc::new(Timed::new(inner)))
}

/// Records how long each embedding call takes (`switchboard.embedding.duration`, by model and
/// outcome).
struct Timed {
    inner: Arc<dyn Embedder>,
    duration: switchboard_kit::metrics::Histogram<f64>,
}

impl Timed {
    fn new(inner: Arc<dyn Embedder>) -> Self {
        let duration = switchboard_kit::metrics::meter()
            .f64_histogram("switchboard.embedding.duration")
            .with_description("Time to embed one call's texts (a query, or a batch of chunks).")
            .with_unit("s")
            .with_boundaries(vec![0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0])
            .build();
        Self { inner, duration }
    }

    fn record(&self, started: std::time::Instant, ok: bool, work: &'static str) {
        let labels = [
            switchboard_kit::metrics::KeyValue::new("switchboard.embedding.model", self.inner.model().to_owned()),
            switchboard_kit::metrics::KeyValue::new("switchboard.embedding.work", work),
            switchboard_kit::metrics::KeyValue::new("outcome", if ok { "ok" } else { "error" }),
        ];
        self.duration.record(started.elapsed().as_secs_f64(), &labels);
    }
}

#[async_trait::async_trait]
impl Embedder for Timed {
    async fn embed(&self, texts: Vec<String>) -> anyhow::Result<Vec<Vec<f32>>> {
        let started = std::time::Instant::now();
        let embedded = self.inner.embed(texts).await;
        self.record(started, embedded.is_ok(), "ingest");
        embedded
    }

    async fn embed_writes(&self, texts: Vec<String>) -> anyhow::Result<Vec<Vec<f32>>> {
        let started = std::time::Instant::now();
        let embedded = self.inner.embed_writes(texts).await;
        self.record(started, embedded.is_ok(), "write");
        embedded
    }

    async fn embed_queries(&self, texts: Vec<String>) -> anyhow::Result<Vec<Vec<f32>>> {
        let started = std::time::Instant::now();
        let embedded = self.inner.embed_queries(texts).await;
        self.record(started, embedded.is_ok(), "query");
        embedded
    }

    fn dimensions(&self) -> usize {
        self.inner.dimensions()
    }

    fn model(&self) -> &str {
        self.inner.model()
    }

    fn parallelism(&self) -> usize {
        self.inner.parallelism()
    }
}
