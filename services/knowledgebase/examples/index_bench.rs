//! Benchmarks the embedded vector index the way the service uses it: 10,000 random 384-dimensional
//! unit vectors across 10 knowledge bases, upserted 100 at a time (each batch flushed, as ingestion
//! does), then knowledge-base-filtered searches through the async API.
//!
//! `cargo run --release -p switchboard-knowledgebase --example index_bench`

use std::time::{Duration, Instant};

use switchboard_knowledgebase::index::{EdgeIndex, Point, SearchQuery, Terms, VectorIndex};

const DIMS: usize = 384;
const POINTS: usize = 10_000;
const KNOWLEDGEBASES: usize = 10;
const BATCH: usize = 100;
const QUERIES: usize = 2_000;
const LIMIT: usize = 5;

/// splitmix64: reproducible vectors without another dependency.
struct Rng(u64);

impl Rng {
    fn next_u64(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^ (z >> 31)
    }

    fn unit_vector(&mut self) -> Vec<f32> {
        let mut vector: Vec<f32> =
            (0..DIMS).map(|_| (self.next_u64() >> 40) as f32 / (1u64 << 23) as f32 - 1.0).collect();
        let norm = vector.iter().map(|x| x * x).sum::<f32>().sqrt();
        vector.iter_mut().for_each(|x| *x /= norm);
        vector
    }
}

struct Latencies(Vec<Duration>);

impl Latencies {
    fn percentile(&self, p: usize) -> Duration {
        let mut sorted = self.0.clone();
        sorted.sort();
        sorted.get((sorted.len() * p / 100).min(sorted.len().saturating_sub(1))).copied().unwrap_or_default()
    }

    fn total(&self) -> Duration {
        self.0.iter().sum()
    }
}

fn micros(duration: Duration) -> String {
    format!("{:.0} µs", duration.as_secs_f64() * 1e6)
}

fn millis(duration: Duration) -> String {
    format!("{:.1} ms", duration.as_secs_f64() * 1e3)
}

async fn search_latencies(index: &EdgeIndex, rng: &mut Rng) -> anyhow::Result<Latencies> {
    let mut latencies = Vec::with_capacity(QUERIES);
    for i in 0..QUERIES {
        let query = rng.unit_vector();
        let knowledgebase = format!("kb-{}", i % KNOWLEDGEBASES);
        let started = Instant::now();
        let hits = index.search(&knowledgebase, &SearchQuery::dense(query), LIMIT, 0.0).await?;
        latencies.push(started.elapsed());
        std::hint::black_box(hits);
    }
    Ok(Latencies(latencies))
}

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    let dir = tempfile::tempdir()?;
    let mut rng = Rng(2024);
    let points: Vec<Point> = (0..POINTS)
        .map(|i| {
            let id = uuid::Uuid::new_v4();
            Point {
                id,
                entry_id: id,
                knowledgebase_id: format!("kb-{}", i % KNOWLEDGEBASES),
                team_id: format!("team-{}", i % 3),
                vector: rng.unit_vector(),
                terms: Terms::default(),
            }
        })
        .collect();

    let index = EdgeIndex::open(dir.path(), DIMS)?;
    let mut batches = Vec::with_capacity(POINTS / BATCH);
    for batch in points.chunks(BATCH) {
        let started = Instant::now();
        index.upsert(batch.to_vec()).await?;
        batches.push(started.elapsed());
    }
    let batches = Latencies(batches);
    let after_upsert = index.info().await?;
    let search_after_upsert = search_latencies(&index, &mut rng).await?;

    let started = Instant::now();
    index.optimize().await?;
    let optimize = started.elapsed();
    let after_optimize = index.info().await?;
    let search_after_optimize = search_latencies(&index, &mut rng).await?;

    drop(index);
    let started = Instant::now();
    let index = EdgeIndex::open(dir.path(), DIMS)?;
    let reopen = started.elapsed();
    anyhow::ensure!(index.count().await? == POINTS, "points lost across reopen");
    let search_after_reopen = search_latencies(&index, &mut rng).await?;

    // What the async API adds to every call: the hop to the blocking pool and back.
    let mut hops = Vec::with_capacity(QUERIES);
    for _ in 0..QUERIES {
        let started = Instant::now();
        tokio::task::spawn_blocking(|| ()).await?;
        hops.push(started.elapsed());
    }
    let hops = Latencies(hops);

    println!(
        "Embedded index (qdrant-edge 0.7.2): {POINTS} random unit vectors, {DIMS} dimensions, \
         {KNOWLEDGEBASES} knowledge bases, limit {LIMIT}, {QUERIES} queries per row\n"
    );
    println!("| measurement | value |");
    println!("|---|---|");
    println!(
        "| upsert {POINTS} points in batches of {BATCH} (flushed each, optimize inline) | {} total ({:.0} points/s) |",
        millis(batches.total()),
        POINTS as f64 / batches.total().as_secs_f64()
    );
    println!(
        "| upsert batch p50 / p99 / max | {} / {} / {} |",
        millis(batches.percentile(50)),
        millis(batches.percentile(99)),
        millis(batches.percentile(100))
    );
    println!(
        "| after upserts: segments, HNSW-indexed vectors | {}, {} |",
        after_upsert.segments, after_upsert.indexed_vectors
    );
    println!(
        "| filtered search after upserts p50 / p99 | {} / {} |",
        micros(search_after_upsert.percentile(50)),
        micros(search_after_upsert.percentile(99))
    );
    println!("| explicit optimize() | {} |", millis(optimize));
    println!(
        "| after optimize: segments, HNSW-indexed vectors | {}, {} |",
        after_optimize.segments, after_optimize.indexed_vectors
    );
    println!(
        "| filtered search after optimize p50 / p99 | {} / {} |",
        micros(search_after_optimize.percentile(50)),
        micros(search_after_optimize.percentile(99))
    );
    println!("| reopen (load + optimize check) | {} |", millis(reopen));
    println!(
        "| filtered search after reopen p50 / p99 | {} / {} |",
        micros(search_after_reopen.percentile(50)),
        micros(search_after_reopen.percentile(99))
    );
    println!(
        "| spawn_blocking round trip alone p50 / p99 (included above) | {} / {} |",
        micros(hops.percentile(50)),
        micros(hops.percentile(99))
    );
    Ok(())
}
