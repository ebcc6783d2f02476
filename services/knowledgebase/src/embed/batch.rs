//! Coalesces small embedding requests that arrive together into one model call.
//!
//! References are created one API call at a time, and searches embed one query each; run
//! side by side, each call would fight the others for the same two cores. A single worker
//! takes the first waiting request plus whatever else is already queued (it never waits for
//! more, so a lone request pays nothing) and embeds them as one batch, which the model does
//! faster per text. Large requests (extraction jobs) go straight to the model.

use std::sync::Arc;

use anyhow::anyhow;
use tokio::sync::{mpsc, oneshot};

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
        tokio::spawn(async move {
            while let Some(first) = waiting.recv().await {
                let mut batch = vec![first];
                let mut texts = batch[0].0.len();
                while texts < MAX_BATCH {
                    let Ok(next) = waiting.try_recv() else { break };
                    texts += next.0.len();
                    batch.push(next);
                }
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
        });
        Arc::new(Self { inner, queue })
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
}
