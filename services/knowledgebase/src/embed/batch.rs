//! Queues small embedding requests for the model, queries and passages apart, and gathers
//! passages that arrive together into model calls.
//!
//! Searches embed one query each, and single references, webpages and documents a few
//! passages each; run side by side without limit, each call would fight the others for the
//! same cores. Each kind has a worker that keeps at most as many model calls running as the
//! model can use side by side (one per core for the local model):
//! - queries: one search's query a call, first come first served, so a lone search waits for
//!   nothing. They are not gathered: a query is more tokens than the products' tiles are rows
//!   (8), so a batch of them was no cheaper a query, and each gathered query waited for the
//!   slowest of its batch. (Measured with 8 search clients during a bulk import of SciFact:
//!   search p99 59.5 and 61 ms gathered, 50 and 53 ms one a call; BENCHMARKS.md, issue 43.)
//! - passages: it takes queued requests until the call is about one model batch
//!   ([`FULL_TEXTS`] texts or [`FULL_CHARS`] characters), waiting up to [`GATHER`] for more
//!   while it is smaller. A write takes tens of milliseconds to embed, so the wait is small
//!   against it and makes concurrent short writes one call. It keeps two calls per core going:
//!   while the writes of one call are stored and answered, and their clients send the next,
//!   the cores work on the other. (Measured before: with every waiting write in one call, four
//!   clients left 14 % of two cores idle.) Requests bigger than [`INGEST_BATCH`] texts (a bulk
//!   import, a document) go straight to the model, which cuts them into chunks.
//!
//! The model runs passages at a lower priority than queries (`threads.rs`).

use std::sync::Arc;
use std::time::Duration;

use anyhow::anyhow;
use tokio::sync::{Semaphore, mpsc, oneshot};

use super::Embedder;

/// Queries of at most this many texts are queued; larger calls go to the model at once.
const SMALL_QUERY: usize = 4;
/// A passage request of more texts goes to the model alone.
const INGEST_BATCH: usize = 64;
/// A gathered passage call stops taking requests at this many texts (the model's batch)...
const FULL_TEXTS: usize = 8;
/// ... or this many characters, about 400 tokens: products of that many rows already run at
/// the model's full speed, so gathering more would only hold the writes back.
const FULL_CHARS: usize = 2_000;
/// How long the passage worker waits for more requests to fill a batch.
const GATHER: Duration = Duration::from_millis(5);

type Reply = oneshot::Sender<anyhow::Result<Vec<Vec<f32>>>>;
type Request = (Vec<String>, Reply);

#[derive(Clone, Copy, PartialEq, Eq)]
enum Work {
    Query,
    Ingest,
}

pub struct Coalescing {
    inner: Arc<dyn Embedder>,
    queries: mpsc::Sender<Request>,
    passages: mpsc::Sender<Request>,
}

impl Coalescing {
    /// Starts the workers on the current tokio runtime; they end when the embedder is dropped.
    pub fn new(inner: Arc<dyn Embedder>) -> Arc<Self> {
        let queries = start(inner.clone(), Work::Query);
        let passages = start(inner.clone(), Work::Ingest);
        Arc::new(Self { inner, queries, passages })
    }
}

fn start(model: Arc<dyn Embedder>, work: Work) -> mpsc::Sender<Request> {
    let (queue, mut waiting) = mpsc::channel::<Request>(1024);
    let calls = match work {
        Work::Query => 1,
        Work::Ingest => 2,
    };
    let slots = Arc::new(Semaphore::new(calls * model.parallelism().max(1)));
    tokio::spawn(async move {
        // A free slot first, then the requests: while every slot is busy, requests queue up
        // and the next call takes them.
        while let Ok(slot) = slots.clone().acquire_owned().await {
            let Some(first) = waiting.recv().await else { return };
            let mut batch = vec![first];
            if work == Work::Ingest {
                gather_passages(&mut waiting, &mut batch).await;
            }
            let model = model.clone();
            tokio::spawn(async move {
                embed_batch(model.as_ref(), work, batch).await;
                drop(slot);
            });
        }
    });
    queue
}

/// Adds waiting passage requests to `batch` until it is about one model batch ([`FULL_TEXTS`]
/// texts or [`FULL_CHARS`] characters), waiting up to [`GATHER`] for more.
async fn gather_passages(waiting: &mut mpsc::Receiver<Request>, batch: &mut Vec<Request>) {
    let size = |texts: &[String]| texts.iter().map(String::len).sum::<usize>();
    let mut texts: usize = batch.iter().map(|(texts, _)| texts.len()).sum();
    let mut chars: usize = batch.iter().map(|(texts, _)| size(texts)).sum();
    let deadline = tokio::time::Instant::now() + GATHER;
    while texts < FULL_TEXTS && chars < FULL_CHARS {
        // A request already waiting is taken even once the deadline has passed: the timeout
        // polls the receiver before it looks at the clock.
        let Ok(Some(next)) = tokio::time::timeout_at(deadline, waiting.recv()).await else { break };
        texts += next.0.len();
        chars += size(&next.0);
        batch.push(next);
    }
}

/// Embeds the texts of every request of the batch in one call and answers each request.
async fn embed_batch(model: &dyn Embedder, work: Work, batch: Vec<Request>) {
    let all: Vec<String> = batch.iter().flat_map(|(texts, _)| texts.iter().cloned()).collect();
    let embedded = match work {
        Work::Query => model.embed_queries(all).await,
        Work::Ingest => model.embed(all).await,
    };
    match embedded {
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

async fn queued(queue: &mpsc::Sender<Request>, texts: Vec<String>) -> anyhow::Result<Vec<Vec<f32>>> {
    let (reply, answer) = oneshot::channel();
    queue.send((texts, reply)).await.map_err(|_| anyhow!("the embedding worker has stopped"))?;
    answer.await.map_err(|_| anyhow!("the embedding worker has stopped"))?
}

#[async_trait::async_trait]
impl Embedder for Coalescing {
    async fn embed(&self, texts: Vec<String>) -> anyhow::Result<Vec<Vec<f32>>> {
        if texts.len() > INGEST_BATCH {
            return self.inner.embed(texts).await;
        }
        queued(&self.passages, texts).await
    }

    async fn embed_queries(&self, texts: Vec<String>) -> anyhow::Result<Vec<Vec<f32>>> {
        if texts.len() > SMALL_QUERY {
            return self.inner.embed_queries(texts).await;
        }
        queued(&self.queries, texts).await
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

#[cfg(test)]
mod tests {
    use std::sync::Mutex;

    use super::*;

    /// Records the size and kind of every model call; each text's vector is its length.
    #[derive(Default)]
    struct Recording(Mutex<Vec<(usize, &'static str)>>);

    #[async_trait::async_trait]
    impl Embedder for Recording {
        async fn embed(&self, texts: Vec<String>) -> anyhow::Result<Vec<Vec<f32>>> {
            self.0.lock().unwrap().push((texts.len(), "ingest"));
            Ok(texts.iter().map(|text| vec![text.len() as f32]).collect())
        }

        async fn embed_queries(&self, texts: Vec<String>) -> anyhow::Result<Vec<Vec<f32>>> {
            self.0.lock().unwrap().push((texts.len(), "query"));
            Ok(texts.iter().map(|text| vec![text.len() as f32]).collect())
        }

        fn dimensions(&self) -> usize {
            1
        }

        fn model(&self) -> &str {
            "recording"
        }
    }

    fn texts(sizes: &[usize]) -> Vec<String> {
        sizes.iter().map(|&size| "x".repeat(size)).collect()
    }

    #[tokio::test]
    async fn concurrent_writes_share_a_model_call_and_each_gets_its_own_vectors() {
        let model = Arc::new(Recording::default());
        let coalescing = Coalescing::new(model.clone());
        let writes = (1..=4).map(|i| {
            let coalescing = coalescing.clone();
            async move { coalescing.embed(texts(&[i, 10 * i])).await.unwrap() }
        });
        let answers = futures::future::join_all(writes).await;
        for (i, vectors) in (1..=4).zip(answers) {
            assert_eq!(vectors, vec![vec![i as f32], vec![10.0 * i as f32]]);
        }
        assert_eq!(*model.0.lock().unwrap(), [(8, "ingest")], "one call for the four writes");
    }

    #[tokio::test]
    async fn long_writes_are_shared_between_calls_so_the_cores_can_overlap_them() {
        let model = Arc::new(Recording::default());
        let coalescing = Coalescing::new(model.clone());
        let writes = (0..4).map(|_| {
            let coalescing = coalescing.clone();
            async move { coalescing.embed(texts(&[FULL_CHARS / 2, 10])).await.unwrap() }
        });
        futures::future::join_all(writes).await;
        assert_eq!(*model.0.lock().unwrap(), [(4, "ingest"), (4, "ingest")], "two writes a call");
    }

    #[tokio::test]
    async fn concurrent_queries_are_embedded_one_a_call() {
        let model = Arc::new(Recording::default());
        let coalescing = Coalescing::new(model.clone());
        let searches = (1..=4).map(|i| {
            let coalescing = coalescing.clone();
            async move { coalescing.embed_queries(texts(&[i])).await.unwrap() }
        });
        let answers = futures::future::join_all(searches).await;
        for (i, vectors) in (1..=4).zip(answers) {
            assert_eq!(vectors, vec![vec![i as f32]]);
        }
        assert_eq!(*model.0.lock().unwrap(), [(1, "query"); 4], "a call for each query");
    }

    #[tokio::test]
    async fn queries_go_to_the_query_path_without_waiting_and_big_calls_go_straight() {
        let model = Arc::new(Recording::default());
        let coalescing = Coalescing::new(model.clone());
        assert_eq!(coalescing.embed_queries(texts(&[3])).await.unwrap(), [[3.0]]);
        coalescing.embed(texts(&[1; INGEST_BATCH + 1])).await.unwrap();
        assert_eq!(*model.0.lock().unwrap(), [(1, "query"), (INGEST_BATCH + 1, "ingest")]);
    }
}
