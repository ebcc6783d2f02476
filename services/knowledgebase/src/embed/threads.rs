//! The threads the local model runs on: one single-threaded rayon pool per core.
//!
//! candle splits every matrix product over `RAYON_NUM_THREADS` (every core by default) and waits
//! for the slowest part. A query embedding is about forty small products; on a 2-core machine
//! where the gateway and the services want a core too, each of them stalled on a preempted helper
//! thread: searches were 2-3 ms slower (p50 13.3 vs 11.2 ms on 10,000 references) than with
//! one thread per call. Inside a one-thread pool candle's parallel loops run on the calling
//! thread, and the cores are used by running calls side by side instead (see `BertEmbedder`).

use std::panic::{AssertUnwindSafe, catch_unwind};
use std::sync::atomic::{AtomicUsize, Ordering};

use anyhow::{Context, anyhow};

pub(super) struct ModelThreads {
    workers: Vec<Worker>,
}

struct Worker {
    pool: rayon::ThreadPool,
    /// Calls queued or running on this worker.
    load: AtomicUsize,
}

/// Lowers a worker's load when its call ends, also when the caller stops waiting.
struct Queued<'a>(&'a AtomicUsize);

impl Drop for Queued<'_> {
    fn drop(&mut self) {
        self.0.fetch_sub(1, Ordering::Relaxed);
    }
}

impl ModelThreads {
    pub(super) fn new(count: usize) -> anyhow::Result<Self> {
        let workers = (0..count.max(1))
            .map(|i| {
                let pool = rayon::ThreadPoolBuilder::new()
                    .num_threads(1)
                    .thread_name(move |_| format!("embedder-{i}"))
                    .build()
                    .context("cannot start an embedding thread")?;
                Ok(Worker { pool, load: AtomicUsize::new(0) })
            })
            .collect::<anyhow::Result<Vec<_>>>()?;
        Ok(Self { workers })
    }

    pub(super) fn len(&self) -> usize {
        self.workers.len()
    }

    /// Queues `job` on the least busy worker at once; the future yields its result, and a panic
    /// in it as an error.
    pub(super) fn start<R: Send + 'static>(
        &self,
        job: impl FnOnce() -> anyhow::Result<R> + Send + 'static,
    ) -> anyhow::Result<impl Future<Output = anyhow::Result<R>> + '_> {
        let worker = self
            .workers
            .iter()
            .min_by_key(|worker| worker.load.load(Ordering::Relaxed))
            .context("no embedding thread")?;
        worker.load.fetch_add(1, Ordering::Relaxed);
        let queued = Queued(&worker.load);
        let (done, result) = tokio::sync::oneshot::channel();
        worker.pool.spawn(move || {
            let outcome = catch_unwind(AssertUnwindSafe(job)).unwrap_or_else(|_| Err(anyhow!("the model panicked")));
            // The caller may have stopped waiting; the result is then of no use.
            let _ = done.send(outcome);
        });
        Ok(async move {
            let _queued = queued;
            result.await.context("the embedding thread stopped")?
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn calls_run_on_the_workers_and_a_panic_is_an_error() {
        let threads = ModelThreads::new(2).unwrap();
        let name = threads.start(|| Ok(std::thread::current().name().map(str::to_owned))).unwrap().await.unwrap();
        assert!(name.is_some_and(|name| name.starts_with("embedder-")));
        let panicked = threads.start::<()>(|| panic!("boom")).unwrap().await.unwrap_err();
        assert!(panicked.to_string().contains("panicked"), "{panicked}");
        // The worker survives the panic.
        assert_eq!(threads.start(|| Ok(rayon::current_num_threads())).unwrap().await.unwrap(), 1);
    }
}
