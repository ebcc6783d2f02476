//! The threads the local model runs on: one single-threaded rayon pool per core, one set for
//! queries, one at a lower priority for single writes, and one lower still for bulk ingestion.
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
    /// Every core in one pool, for a small call that finds every worker idle (see
    /// [`ModelThreads::start_small`]).
    wide: Option<rayon::ThreadPool>,
}

struct Worker {
    pool: rayon::ThreadPool,
    /// Calls queued or running on this worker.
    load: AtomicUsize,
}

/// Lowers the loads of the workers a call counts against when it ends, also when the caller
/// stops waiting.
struct Queued<'a>(Vec<&'a AtomicUsize>);

impl Drop for Queued<'_> {
    fn drop(&mut self) {
        for load in &self.0 {
            load.fetch_sub(1, Ordering::Relaxed);
        }
    }
}

/// Whose work a set of threads does.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Priority {
    /// Searches' queries: someone is waiting for each.
    Query,
    /// A few passages of a single write (a reference, a short page): someone waits for them
    /// too, but a search goes first. Their threads run at nice [`WRITE_NICE`], between the
    /// two others, so that another team's bulk import does not hold them back (issue 53).
    Write,
    /// Passages to store (references, webpages, documents): their threads run at nice
    /// [`INGEST_NICE`], so that the kernel gives a core to a query (and to every other
    /// process) as soon as one wants it, and ingestion takes what is left.
    Ingest,
}

impl ModelThreads {
    pub(super) fn new(count: usize, priority: Priority) -> anyhow::Result<Self> {
        let prefix = match priority {
            Priority::Query => "embedder",
            Priority::Write => "embedder-write",
            Priority::Ingest => "embedder-ingest",
        };
        let workers = (0..count.max(1))
            .map(|i| {
                let pool = rayon::ThreadPoolBuilder::new()
                    .num_threads(1)
                    .thread_name(move |_| format!("{prefix}-{i}"))
                    .start_handler(move |_| {
                        if let Some(nice) = priority.nice() {
                            yield_to_other_work(nice);
                        }
                    })
                    .build()
                    .context("cannot start an embedding thread")?;
                Ok(Worker { pool, load: AtomicUsize::new(0) })
            })
            .collect::<anyhow::Result<Vec<_>>>()?;
        let wide = if count > 1 && priority == Priority::Query {
            let pool = rayon::ThreadPoolBuilder::new()
                .num_threads(count)
                .thread_name(|i| format!("embedder-wide-{i}"))
                .build()
                .context("cannot start the embedding threads")?;
            Some(pool)
        } else {
            None
        };
        Ok(Self { workers, wide })
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
        Ok(run(&worker.pool, Queued(vec![&worker.load]), job))
    }

    /// A small call (a search's query): when every worker is idle it runs on all cores, its
    /// matrix products split between them, since nothing else wants them; otherwise as
    /// [`ModelThreads::start`]. Measured on a 2-core Xeon: 25 tokens by the 384 x 1536 weight
    /// take 316 µs on one thread and 219 µs on two, 50 tokens 451 µs and 251 µs, so the long
    /// queries that make a search's p99 gain the most. While it runs, every worker counts it,
    /// and a call that arrives meanwhile queues on a worker as usual.
    pub(super) fn start_small<R: Send + 'static>(
        &self,
        job: impl FnOnce() -> anyhow::Result<R> + Send + 'static,
    ) -> anyhow::Result<impl Future<Output = anyhow::Result<R>> + '_> {
        let idle = || self.workers.iter().all(|worker| worker.load.load(Ordering::Relaxed) == 0);
        let Some(wide) = self.wide.as_ref().filter(|_| idle()) else {
            return Ok(futures::future::Either::Left(self.start(job)?));
        };
        let loads: Vec<&AtomicUsize> = self.workers.iter().map(|worker| &worker.load).collect();
        for load in &loads {
            load.fetch_add(1, Ordering::Relaxed);
        }
        Ok(futures::future::Either::Right(run(wide, Queued(loads), job)))
    }
}

impl Priority {
    /// The nice value its threads take; `None`: the process's own.
    fn nice(self) -> Option<i32> {
        match self {
            Priority::Query => None,
            Priority::Write => Some(WRITE_NICE),
            Priority::Ingest => Some(INGEST_NICE),
        }
    }
}

/// The nice value of ingestion threads. Against busy threads at nice 0 they get about a tenth of
/// a core each (CFS weights 110 and 1024): queries go first, and a bulk import still moves
/// while searches keep every core busy (at nice 19, weight 15, one starved for minutes).
const INGEST_NICE: i32 = 10;

/// The nice value of single writes' threads (CFS weight 335): sharing a core with an ingestion
/// thread a write gets three quarters of it, and a search's query three quarters against a
/// write.
const WRITE_NICE: i32 = 5;

/// Puts the calling thread at `nice` (on Linux a thread's nice value is its own). Where that is
/// refused the thread keeps its priority: queries then only wait longer, nothing is wrong.
fn yield_to_other_work(nice: i32) {
    let thread = rustix::thread::gettid();
    if let Err(error) = rustix::process::setpriority_process(Some(thread), nice) {
        tracing::warn!(%error, "cannot lower the priority of an embedding thread");
    }
}

/// Runs `job` on `pool`; the future yields its result, and a panic in it as an error.
fn run<'a, R: Send + 'static>(
    pool: &rayon::ThreadPool,
    queued: Queued<'a>,
    job: impl FnOnce() -> anyhow::Result<R> + Send + 'static,
) -> impl Future<Output = anyhow::Result<R>> + 'a {
    let (done, result) = tokio::sync::oneshot::channel();
    pool.spawn(move || {
        let outcome = catch_unwind(AssertUnwindSafe(job)).unwrap_or_else(|_| Err(anyhow!("the model panicked")));
        // The caller may have stopped waiting; the result is then of no use.
        let _ = done.send(outcome);
    });
    async move {
        let _queued = queued;
        result.await.context("the embedding thread stopped")?
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn calls_run_on_the_workers_and_a_panic_is_an_error() {
        let threads = ModelThreads::new(2, Priority::Query).unwrap();
        let name = threads.start(|| Ok(std::thread::current().name().map(str::to_owned))).unwrap().await.unwrap();
        assert!(name.is_some_and(|name| name.starts_with("embedder-")));
        let panicked = threads.start::<()>(|| panic!("boom")).unwrap().await.unwrap_err();
        assert!(panicked.to_string().contains("panicked"), "{panicked}");
        // The worker survives the panic.
        assert_eq!(threads.start(|| Ok(rayon::current_num_threads())).unwrap().await.unwrap(), 1);
    }

    #[tokio::test]
    async fn ingestion_threads_run_at_a_lower_priority_than_writes_and_writes_than_queries() {
        let threads = ModelThreads::new(1, Priority::Ingest).unwrap();
        let nice = threads.start(|| Ok(rustix::process::getpriority_process(Some(rustix::thread::gettid()))?));
        assert_eq!(nice.unwrap().await.unwrap(), INGEST_NICE);
        let writes = ModelThreads::new(1, Priority::Write).unwrap();
        let nice = writes.start(|| Ok(rustix::process::getpriority_process(Some(rustix::thread::gettid()))?));
        assert_eq!(nice.unwrap().await.unwrap(), WRITE_NICE);
        const { assert!(0 < WRITE_NICE && WRITE_NICE < INGEST_NICE) };
        let queries = ModelThreads::new(1, Priority::Query).unwrap();
        let nice = queries.start(|| Ok(rustix::process::getpriority_process(Some(rustix::thread::gettid()))?));
        assert_eq!(nice.unwrap().await.unwrap(), rustix::process::getpriority_process(None).unwrap());
    }

    #[tokio::test]
    async fn a_small_call_uses_every_core_only_when_all_workers_are_idle() {
        let threads = ModelThreads::new(2, Priority::Query).unwrap();
        assert_eq!(threads.start_small(|| Ok(rayon::current_num_threads())).unwrap().await.unwrap(), 2);

        let (release, hold) = std::sync::mpsc::channel::<()>();
        let busy = threads.start(move || Ok(hold.recv()?)).unwrap();
        let small = threads.start_small(|| Ok(rayon::current_num_threads())).unwrap();
        assert_eq!(small.await.unwrap(), 1, "a worker is busy: the call runs on one thread");
        release.send(()).unwrap();
        busy.await.unwrap();
        assert_eq!(threads.start_small(|| Ok(rayon::current_num_threads())).unwrap().await.unwrap(), 2);
    }
}
