//! An OpenAI-compatible `/embeddings` endpoint (OpenAI, Azure, vLLM, Ollama, text-embeddings-inference...).

use std::time::Duration;

use anyhow::{Context, bail};
use serde::Deserialize;

use super::{Embedder, OpenAiConfig};

/// Below OpenAI's limit of 2048 inputs, and small enough to stay far from request size limits
/// and the timeout on self-hosted servers.
const BATCH_SIZE: usize = 64;
const TIMEOUT: Duration = Duration::from_secs(30);

pub struct OpenAiEmbedder {
    client: reqwest::Client,
    endpoint: String,
    config: OpenAiConfig,
}

#[derive(Deserialize)]
struct Response {
    data: Vec<Item>,
}

#[derive(Deserialize)]
struct Item {
    index: usize,
    embedding: Vec<f32>,
}

impl OpenAiEmbedder {
    pub fn new(config: OpenAiConfig) -> anyhow::Result<Self> {
        if config.dimensions == 0 {
            bail!("the embedding dimensions of {} must be configured (e.g. 1536)", config.model);
        }
        let client =
            reqwest::Client::builder().timeout(TIMEOUT).build().context("cannot build the embeddings HTTP client")?;
        let endpoint = format!("{}/embeddings", config.url.trim_end_matches('/'));
        Ok(Self { client, endpoint, config })
    }

    async fn embed_batch(&self, texts: &[String]) -> anyhow::Result<Vec<Vec<f32>>> {
        // OpenAI rejects empty strings in `input`; a space embeds to about the same.
        let input: Vec<&str> = texts.iter().map(|t| if t.is_empty() { " " } else { t.as_str() }).collect();
        let body = serde_json::json!({ "model": self.config.model, "input": input });
        let mut request = self.client.post(&self.endpoint).json(&body);
        if let Some(key) = &self.config.api_key {
            request = request.bearer_auth(key);
        }
        let response =
            request.send().await.with_context(|| format!("embeddings request to {} failed", self.endpoint))?;
        let status = response.status();
        if !status.is_success() {
            let text = response.text().await.unwrap_or_default();
            let text: String = text.chars().take(500).collect();
            bail!("embeddings endpoint {} answered {status}: {text}", self.endpoint);
        }
        let response: Response = response
            .json()
            .await
            .with_context(|| format!("cannot parse the embeddings response of {}", self.endpoint))?;

        if response.data.len() != texts.len() {
            bail!(
                "embeddings endpoint {} returned {} vectors for {} inputs",
                self.endpoint,
                response.data.len(),
                texts.len()
            );
        }
        let mut vectors: Vec<Option<Vec<f32>>> = vec![None; texts.len()];
        for item in response.data {
            if item.embedding.len() != self.config.dimensions {
                bail!(
                    "model {} at {} returned {}-dimensional vectors but {} dimensions are configured",
                    self.config.model,
                    self.endpoint,
                    item.embedding.len(),
                    self.config.dimensions
                );
            }
            match vectors.get_mut(item.index) {
                Some(slot @ None) => *slot = Some(normalise(item.embedding)),
                _ => {
                    bail!("embeddings endpoint {} returned an invalid or repeated index {}", self.endpoint, item.index)
                }
            }
        }
        // Every slot is filled: as many items as inputs, each index in range and distinct.
        Ok(vectors.into_iter().flatten().collect())
    }
}

/// Some servers return unnormalised vectors; the index relies on dot product = cosine.
fn normalise(mut vector: Vec<f32>) -> Vec<f32> {
    let norm = vector.iter().map(|x| x * x).sum::<f32>().sqrt();
    if norm > 0.0 {
        vector.iter_mut().for_each(|x| *x /= norm);
    }
    vector
}

#[async_trait::async_trait]
impl Embedder for OpenAiEmbedder {
    async fn embed(&self, texts: Vec<String>) -> anyhow::Result<Vec<Vec<f32>>> {
        let mut vectors = Vec::with_capacity(texts.len());
        for batch in texts.chunks(BATCH_SIZE) {
            vectors.extend(self.embed_batch(batch).await?);
        }
        Ok(vectors)
    }

    fn dimensions(&self) -> usize {
        self.config.dimensions
    }

    fn model(&self) -> &str {
        &self.config.model
    }
}
