//! all-MiniLM-L6-v2 in process: BERT, mean pooling over the attention mask, L2 normalisation,
//! which is exactly what sentence-transformers computes for this model.

use std::path::Path;
use std::sync::Arc;

use anyhow::{Context, anyhow};
use candle_core::{D, DType, Device, Tensor};
use tokenizers::{Tokenizer, TruncationDirection, TruncationParams, TruncationStrategy};

use super::Embedder;
use super::encoder::{Config, Encoder};
use super::threads::ModelThreads;

const MODEL_NAME: &str = "all-MiniLM-L6-v2";
/// sentence-transformers' `max_seq_length` for this model; `tokenizer.json` says 128.
const MAX_TOKENS: usize = 256;
/// Calls of at most this many texts (a search's query, a reference or two) may run on every
/// core when the others are idle.
const SMALL_CALL: usize = 4;
/// Measured faster than 64 on a 2-core machine: less padding, better cache use.
const BATCH_SIZE: usize = 16;

pub struct BertEmbedder {
    inner: Arc<Inner>,
    dimensions: usize,
    /// One thread per core. Texts enough for several batches are split over them: candle's
    /// CPU kernels keep about one core busy per call (measured: the same passages per second
    /// with one thread as with two), so calls side by side are what uses every core.
    threads: ModelThreads,
}

struct Inner {
    model: Encoder,
    tokenizer: Tokenizer,
    device: Device,
    pad_token_id: u32,
}

impl BertEmbedder {
    pub fn load(model_dir: &Path) -> anyhow::Result<Self> {
        let hint = format!(
            "the model directory {} must hold config.json, tokenizer.json and model.safetensors of {MODEL_NAME}; \
             download it with `source scripts/lib.sh && ensure_model`, or point SWITCHBOARD_EMBEDDING_MODEL_DIR \
             at a directory that has them",
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
        tokenizer
            .with_truncation(Some(TruncationParams {
                direction: TruncationDirection::Right,
                max_length: MAX_TOKENS,
                strategy: TruncationStrategy::LongestFirst,
                stride: 0,
            }))
            .map_err(|e| anyhow!("{e}"))
            .context("cannot set the tokenizer's truncation")?;

        let weights_path = model_dir.join("model.safetensors");
        let device = Device::Cpu;
        let model = std::fs::read(&weights_path)
            .map_err(anyhow::Error::from)
            .and_then(|bytes| Encoder::load(&config, &bytes, &device))
            .with_context(|| format!("cannot load {}; {hint}", weights_path.display()))?;

        let pad_token_id = u32::try_from(config.pad_token_id).context("pad_token_id in config.json is too large")?;
        let threads = ModelThreads::new(std::thread::available_parallelism().map_or(1, usize::from))?;
        Ok(Self {
            inner: Arc::new(Inner { model, tokenizer, device, pad_token_id }),
            dimensions: config.hidden_size,
            threads,
        })
    }
}

#[async_trait::async_trait]
impl Embedder for BertEmbedder {
    async fn embed(&self, texts: Vec<String>) -> anyhow::Result<Vec<Vec<f32>>> {
        if texts.is_empty() {
            return Ok(Vec::new());
        }
        // CPU-bound for milliseconds to seconds: keep it off the async workers.
        if texts.len() <= SMALL_CALL {
            let inner = Arc::clone(&self.inner);
            return self.threads.start_small(move || inner.embed(texts))?.await;
        }
        let parts = self.threads.len().min(texts.len().div_ceil(BATCH_SIZE)).max(1);
        let per_part = texts.len().div_ceil(parts);
        let mut texts = texts.into_iter();
        let calls = (0..parts)
            .map(|_| {
                let part: Vec<String> = texts.by_ref().take(per_part).collect();
                let inner = Arc::clone(&self.inner);
                self.threads.start(move || inner.embed(part))
            })
            .collect::<anyhow::Result<Vec<_>>>()?;
        let mut vectors = Vec::new();
        for call in calls {
            vectors.extend(call.await?);
        }
        Ok(vectors)
    }

    fn dimensions(&self) -> usize {
        self.dimensions
    }

    fn model(&self) -> &str {
        MODEL_NAME
    }

    fn parallelism(&self) -> usize {
        self.threads.len()
    }
}

impl Inner {
    fn embed(&self, texts: Vec<String>) -> anyhow::Result<Vec<Vec<f32>>> {
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
            let embedded = self.embed_batch(&batch)?;
            for (&i, vector) in chunk.iter().zip(embedded) {
                vectors[i] = vector;
            }
        }
        Ok(vectors)
    }

    fn embed_batch(&self, batch: &[&tokenizers::Encoding]) -> anyhow::Result<Vec<Vec<f32>>> {
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
        let hidden = self.model.forward(&ids, &mask).context("the BERT forward pass failed")?;
        // Mean over the real tokens only: (batch, tokens, hidden) -> (batch, hidden).
        let mask = mask.to_dtype(DType::F32)?.unsqueeze(2)?;
        let summed = hidden.broadcast_mul(&mask)?.sum(1)?;
        let counts = mask.sum(1)?.maximum(1e-9)?;
        let mean = summed.broadcast_div(&counts)?;
        let norms = mean.sqr()?.sum_keepdim(D::Minus1)?.sqrt()?.maximum(1e-12)?;
        Ok(mean.broadcast_div(&norms)?.to_vec2::<f32>()?)
    }
}
