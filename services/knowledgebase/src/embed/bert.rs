//! A sentence-transformers model in process: a BERT or MPNet encoder (`encoder.rs`), mean
//! pooling over the attention mask, L2 normalisation, which is exactly what sentence-transformers
//! computes for all-MiniLM-L6-v2 (the default) and all-mpnet-base-v2.

use std::path::Path;
use std::sync::Arc;

use anyhow::{Context, anyhow};
use candle_core::{D, DType, Device, Tensor};
use tokenizers::{Tokenizer, TruncationDirection, TruncationParams, TruncationStrategy};

use super::Embedder;
use super::encoder::{Config, Encoder, Precision};
use super::products::{self, Products};
use super::threads::{ModelThreads, Priority};

/// sentence-transformers' `max_seq_length` for all-MiniLM-L6-v2, whose directory (made by
/// `ensure_model`) has no `sentence_bert_config.json` to say so; `tokenizer.json` says 128.
const DEFAULT_MAX_TOKENS: usize = 256;
/// Calls of at most this many texts (a search's query, a reference or two) may run on every
/// core when the others are idle.
const SMALL_CALL: usize = 4;
/// Measured faster than 64 and than 16 on a 2-core machine (SciFact passages: 27 a second
/// against 24 at 16): less padding, and a batch's largest buffers (the attention scores, 25 MB
/// at 256 tokens) stay under glibc's 32 MB ceiling for reusing freed memory, instead of new
/// pages from the kernel, zeroed, at every step.
const BATCH_SIZE: usize = 8;
/// Texts a thread takes at a time from a long call: two batches, 0.3 to 0.6 s of SciFact
/// passages on one core.
const CHUNK: usize = 32;

/// Named for the architecture it started with; it runs MPNet models too.
pub struct BertEmbedder {
    inner: Arc<Inner>,
    dimensions: usize,
    /// The model directory's name (see [`model_name`]).
    name: String,
    /// One thread per core for queries. Texts enough for several batches are split over
    /// them: candle's CPU kernels keep about one core busy per call (measured: the same
    /// passages per second with one thread as with two), so calls side by side are what uses
    /// every core.
    threads: ModelThreads,
    /// As many for the passages of single writes, at a lower priority: a query goes first.
    writes: ModelThreads,
    /// As many for passages of bulk work, lower still: a query or a write goes first.
    ingest: ModelThreads,
    /// Of queries and passages alike, so that a query is embedded as the passages it is
    /// compared with were. bfloat16 by default where the CPU has it: it made searches 1.6 times
    /// cheaper and left SciFact's nDCG@10 within noise (BENCHMARKS.md, issue 43); 8-bit
    /// integers on CPUs with AVX2 but no bfloat16 (issue 57); f32 elsewhere ([`Products`]).
    products: Products,
}

struct Inner {
    model: Encoder,
    tokenizer: Tokenizer,
    device: Device,
    pad_token_id: u32,
}

/// sentence-transformers' own settings of a model, when its directory has them.
#[derive(serde::Deserialize)]
struct SentenceConfig {
    max_seq_length: Option<usize>,
}

impl BertEmbedder {
    /// Loads the model with the products `SWITCHBOARD_ENCODER_PRODUCTS` asks for (the fastest
    /// good ones for this CPU when unset).
    pub fn load(model_dir: &Path) -> anyhow::Result<Self> {
        Self::load_with_products(model_dir, std::env::var(products::VARIABLE).ok().as_deref())
    }

    /// Loads the model with the products `products` names, as `SWITCHBOARD_ENCODER_PRODUCTS`
    /// would: `auto` (or `None`), `f32`, `bf16`, `int8`, or an integer kernel (`int8-avx2`, ...).
    pub fn load_with_products(model_dir: &Path, products: Option<&str>) -> anyhow::Result<Self> {
        let products = Products::choose(products)?;
        let hint = format!(
            "the model directory {} must hold config.json, tokenizer.json and model.safetensors of a BERT or \
             MPNet sentence-transformers model; download the default (all-MiniLM-L6-v2) with \
             `source scripts/lib.sh && ensure_model`, or point SWITCHBOARD_EMBEDDING_MODEL_DIR at a directory \
             that has them",
            model_dir.display()
        );

        let config_path = model_dir.join("config.json");
        let config: Config = std::fs::read(&config_path)
            .map_err(anyhow::Error::from)
            .and_then(|bytes| Ok(serde_json::from_slice(&bytes)?))
            .with_context(|| format!("cannot read {}; {hint}", config_path.display()))?;

        let tokenizer_path = model_dir.join("tokenizer.json");
        let mut tokenizer = Tokenizer::from_file(&tokenizer_path)
            .map_err(|e| anyhow!("{e}"))
            .with_context(|| format!("cannot read {}; {hint}", tokenizer_path.display()))?;
        // The file pads every input to 128 tokens: a short query would cost 4x. Padding is done
        // per batch below, to the longest sequence of the batch.
        tokenizer.with_padding(None);

        let weights_path = model_dir.join("model.safetensors");
        let device = Device::Cpu;
        let model = std::fs::read(&weights_path)
            .map_err(anyhow::Error::from)
            .and_then(|bytes| Encoder::load(&config, &bytes, &device, products.int8))
            .with_context(|| format!("cannot load {}; {hint}", weights_path.display()))?;

        // all-mpnet-base-v2 reads 384 tokens; longer texts are cut there as sentence-transformers
        // cuts them, so that vectors are the ones the model was evaluated with.
        let sentence_path = model_dir.join("sentence_bert_config.json");
        let max_tokens = match std::fs::read(&sentence_path) {
            Ok(bytes) => serde_json::from_slice::<SentenceConfig>(&bytes)
                .with_context(|| format!("cannot parse {}", sentence_path.display()))?
                .max_seq_length
                .unwrap_or(DEFAULT_MAX_TOKENS),
            Err(error) if error.kind() == std::io::ErrorKind::NotFound => DEFAULT_MAX_TOKENS,
            Err(error) => return Err(error).with_context(|| format!("cannot read {}", sentence_path.display())),
        }
        .min(model.max_tokens());

        tokenizer
            .with_truncation(Some(TruncationParams {
                direction: TruncationDirection::Right,
                max_length: max_tokens,
                strategy: TruncationStrategy::LongestFirst,
                stride: 0,
            }))
            .map_err(|e| anyhow!("{e}"))
            .context("cannot set the tokenizer's truncation")?;

        let pad_token_id = u32::try_from(config.pad_token_id).context("pad_token_id in config.json is too large")?;
        let cores = std::thread::available_parallelism().map_or(1, usize::from);
        Ok(Self {
            inner: Arc::new(Inner { model, tokenizer, device, pad_token_id }),
            dimensions: config.hidden_size,
            name: model_name(model_dir),
            threads: ModelThreads::new(cores, Priority::Query)?,
            writes: ModelThreads::new(cores, Priority::Write)?,
            ingest: ModelThreads::new(cores, Priority::Ingest)?,
            products,
        })
    }

    /// The same model with f32 products on every CPU: the reference that the bfloat16 vectors
    /// are checked against.
    #[must_use]
    pub fn with_f32_products(mut self) -> Self {
        self.products = Products { precision: Precision::F32, int8: None };
        self
    }

    /// The arithmetic of the linear layers, as said in logs and benchmarks: `bf16`, `int8 (avx2)`.
    #[must_use]
    pub fn products(&self) -> String {
        self.products.name()
    }
}

/// The name stored with each vector: the model directory's, with symbolic links resolved, as
/// sentence-transformers models are distributed (`all-MiniLM-L6-v2`, `all-mpnet-base-v2`) and as
/// `ensure_model`, the Docker image and the Helm chart lay the default out. `config.json` has
/// no such name: its `_name_or_path` is the base model the sentence model was trained from
/// (`nreimers/MiniLM-L6-H384-uncased`, `microsoft/mpnet-base`). Pointing
/// SWITCHBOARD_EMBEDDING_MODEL_DIR at a differently named copy of the same model therefore
/// marks the stored vectors stale, which `admin reindex` settles by re-embedding.
fn model_name(model_dir: &Path) -> String {
    let resolved = std::fs::canonicalize(model_dir).unwrap_or_else(|_| model_dir.to_path_buf());
    resolved
        .file_name()
        .map(|name| name.to_string_lossy().into_owned())
        .unwrap_or_else(|| resolved.display().to_string())
}

impl BertEmbedder {
    /// Embeds `texts` on `threads`: sorted by length (texts of a length together waste less
    /// on padding), cut into chunks of [`CHUNK`], and the chunks shared out over the threads,
    /// each thread given its next chunk when the last is done. So a long call never holds a
    /// thread for long: work that arrives meanwhile (a single reference behind a bulk import)
    /// waits for one chunk, not for the whole call.
    async fn embed_on(
        &self,
        threads: &ModelThreads,
        texts: Vec<String>,
        precision: Precision,
    ) -> anyhow::Result<Vec<Vec<f32>>> {
        let count = texts.len();
        let mut order: Vec<usize> = (0..count).collect();
        order.sort_by_key(|&i| texts[i].len());
        // A call smaller than a chunk a thread is still shared out: four single writes gathered
        // into one call keep both cores busy, not one.
        let chunk = CHUNK.min(count.div_ceil(threads.len()).max(1));
        let chunks: Vec<&[usize]> = order.chunks(chunk).collect();
        let parts = threads.len().min(chunks.len()).max(1);
        let texts = &texts;
        let chunks = &chunks;
        let runs = (0..parts).map(|part| async move {
            let mut done = Vec::new();
            for &chunk in chunks.iter().skip(part).step_by(parts) {
                let batch: Vec<String> = chunk.iter().map(|&i| texts[i].clone()).collect();
                let inner = Arc::clone(&self.inner);
                done.push((chunk, threads.start(move || inner.embed(batch, precision))?.await?));
            }
            anyhow::Ok(done)
        });
        let mut vectors = vec![Vec::new(); count];
        for (chunk, embedded) in futures::future::try_join_all(runs).await?.into_iter().flatten() {
            for (&i, vector) in chunk.iter().zip(embedded) {
                vectors[i] = vector;
            }
        }
        Ok(vectors)
    }
}

#[async_trait::async_trait]
impl Embedder for BertEmbedder {
    async fn embed(&self, texts: Vec<String>) -> anyhow::Result<Vec<Vec<f32>>> {
        if texts.is_empty() {
            return Ok(Vec::new());
        }
        // CPU-bound for milliseconds to seconds: keep it off the async workers.
        self.embed_on(&self.ingest, texts, self.products.precision).await
    }

    async fn embed_writes(&self, texts: Vec<String>) -> anyhow::Result<Vec<Vec<f32>>> {
        if texts.is_empty() {
            return Ok(Vec::new());
        }
        self.embed_on(&self.writes, texts, self.products.precision).await
    }

    async fn embed_queries(&self, texts: Vec<String>) -> anyhow::Result<Vec<Vec<f32>>> {
        if texts.is_empty() {
            return Ok(Vec::new());
        }
        if texts.len() <= SMALL_CALL {
            let (inner, products) = (Arc::clone(&self.inner), self.products.precision);
            return self.threads.start_small(move || inner.embed(texts, products))?.await;
        }
        self.embed_on(&self.threads, texts, self.products.precision).await
    }

    fn dimensions(&self) -> usize {
        self.dimensions
    }

    fn model(&self) -> &str {
        &self.name
    }

    fn parallelism(&self) -> usize {
        self.threads.len()
    }
}

impl Inner {
    fn embed(&self, texts: Vec<String>, precision: Precision) -> anyhow::Result<Vec<Vec<f32>>> {
        let encodings = self
            .tokenizer
            .encode_batch(texts, true)
            .map_err(|e| anyhow!("{e}"))
            .context("cannot tokenize the texts")?;

        // Batching texts of similar length together wastes less compute on padding; the
        // results go back to their original positions.
        let mut order: Vec<usize> = (0..encodings.len()).collect();
        order.sort_by_key(|&i| encodings[i].get_ids().len());

        let mut vectors = vec![Vec::new(); encodings.len()];
        for chunk in order.chunks(BATCH_SIZE) {
            let batch: Vec<&tokenizers::Encoding> = chunk.iter().map(|&i| &encodings[i]).collect();
            let embedded = self.embed_batch(&batch, precision)?;
            for (&i, vector) in chunk.iter().zip(embedded) {
                vectors[i] = vector;
            }
        }
        Ok(vectors)
    }

    fn embed_batch(&self, batch: &[&tokenizers::Encoding], precision: Precision) -> anyhow::Result<Vec<Vec<f32>>> {
        let longest = batch.iter().map(|e| e.get_ids().len()).max().unwrap_or(0);
        let mut ids = Vec::with_capacity(batch.len() * longest);
        let mut mask = Vec::with_capacity(batch.len() * longest);
        for encoding in batch {
            let padding = longest - encoding.get_ids().len();
            ids.extend_from_slice(encoding.get_ids());
            ids.extend(std::iter::repeat_n(self.pad_token_id, padding));
            mask.extend_from_slice(encoding.get_attention_mask());
            mask.extend(std::iter::repeat_n(0u32, padding));
        }
        let shape = (batch.len(), longest);
        let ids = Tensor::from_vec(ids, shape, &self.device)?;
        let mask = Tensor::from_vec(mask, shape, &self.device)?;
        let hidden = self.model.forward(&ids, &mask, precision).context("the encoder's forward pass failed")?;
        // Mean over the real tokens only: (batch, tokens, hidden) -> (batch, hidden).
        let mask = mask.to_dtype(DType::F32)?.unsqueeze(2)?;
        let summed = hidden.broadcast_mul(&mask)?.sum(1)?;
        let counts = mask.sum(1)?.maximum(1e-9)?;
        let mean = summed.broadcast_div(&counts)?;
        let norms = mean.sqr()?.sum_keepdim(D::Minus1)?.sqrt()?.maximum(1e-12)?;
        Ok(mean.broadcast_div(&norms)?.to_vec2::<f32>()?)
    }
}
