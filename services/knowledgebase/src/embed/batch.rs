//! Coalesces small embedding requests that arrive together into model calls.
//!
//! References are created one API call at a time, and searches embed one query each; run
//! side by side without limit, each call would fight the others for the same cores. The
//! worker keeps at most as many model calls running as the model can use side by side (one
//! per core for the local model); when one is free it takes the first waiting request plus
//! whatever else is already queued (it never waits for more, so a lone request pays
//! nothing) and embeds them as one batch, which the model does faster per text. Large
//! requests (extraction jobs) go straight to the model.

use std::sync::Arc;

use anyhow::anyhow;
use tokio::sync::{Semaphore, mpsc, oneshot};

use super::Embedder;

/// Requests of at most this many texts are coalesced.
const SMALL_REQUEST: usize = 4;
/// Texts per coalesced model call.
const MAX_BATCH: usize = 32;

type Reply = oneshot::Sender<anyhow::Result<Vec<Vec<f32>>>>;

pub struct Coalescing {
    inner: Arc<dyn Embedder>,
    queue: mpsc::Sender<(Vec<String>, Reply)>,
}

impl Coalescing {
    /// Starts the worker on the current tokio runtime; it ends when the embedder is dropped.
    pub fn new(inner: Arc<dyn Embedder>) -> Arc<Self> {
        let (queue, mut waiting) = mpsc::channel::<(Vec<String>, Reply)>(1024);
        let model = inner.clone();
        let slots = Arc::new(Semaphore::new(inner.parallelism().max(1)));
        tokio::spawn(async move {
            // A free slot first, then the requests: while every slot is busy, requests queue
            // up and the next batch takes them all.
            while let Ok(slot) = slots.clone().acquire_owned().await {
                let Some(first) = waiting.recv().await else { return };
                let mut batch = vec![first];
                let mut texts = batch[0].0.len();
                while texts < MAX_BATCH {
                    let Ok(next) = waiting.try_recv() else { break };
                    texts += next.0.len();
                    batch.push(next);
                }
                let model = model.clone();
                tokio::spawn(async move {
                    embed_batch(model.as_ref(), batch).await;
                    drop(slot);
                });
            }
        });
        Arc::new(Self { inner, queue })
    }
}

/// Embeds the texts of every request of the batch in one call and answers each request.
async fn embed_batch(model: &dyn Embedder, batch: Vec<(Vec<String>, Reply)>) {
    let all: Vec<String> = batch.iter().flat_map(|(texts, _)| texts.iter().cloned()).collect();
    match model.embed(all).await {
        Ok(mut vectors) => {
            for (texts, reply) in batch {
                let rest = vectors.split_off(texts.len().min(vectors.len()));
                let _ = reply.send(Ok(std::mem::replace(&mut vectors, rest)));
            }
        }
        Err(error) => {
            let reason = format!("{error:#}");
            for (_, reply) in batch {
                let _ = reply.send(Err(anyhow!("{reason}")));
            }
        }
    }
}

#[async_trait::async_trait]
impl Embedder for Coalescing {
    async fn embed(&self, texts: Vec<String>) -> anyhow::Result<Vec<Vec<f32>>> {
        if texts.len() > SMALL_REQUEST {
            return self.inner.embed(texts).await;
        }
        let (reply, answer) = oneshot::channel();
        self.queue.send((texts, reply)).await.map_err(|_| anyhow!("the embedding worker has stopped"))?;
        answer.await.map_err(|_| anyhow!("the embedding worker has stopped"))?
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
