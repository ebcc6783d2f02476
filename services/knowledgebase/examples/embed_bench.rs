//! Latency and throughput of the local embedding model, through the async `Embedder` API.
//!
//! `cargo run --release -p switchboard-knowledgebase --example embed_bench [QUERIES_FILE]`
//!
//! Query latency cycles through the lines of QUERIES_FILE (default: one short question), so that
//! `bench/knowledgebase.sh` can compare it with searches for the very same queries. The model is
//! the one SWITCHBOARD_EMBEDDING_MODEL_DIR names (all-MiniLM-L6-v2 by default); candle-transformers'
//! BERT, the reference timed beside it, runs BERT models only and is left out for others (MPNet).

use std::time::{Duration, Instant};

#[path = "../tests/support/reference_bert.rs"]
mod reference_bert;

use anyhow::Context;
use switchboard_knowledgebase::embed::{self, BertEmbedder, Embedder};

const QUERY_RUNS: usize = 300;
const PASSAGES: usize = 320;
const PASSAGE_BATCH: usize = 16;

/// A Q&A reference of about 60 tokens: a question plus a short answer.
fn passage(i: usize) -> String {
    let topics = ["refund", "delivery", "password", "invoice", "subscription", "warranty", "account", "booking"];
    let topic = topics[i % topics.len()];
    format!(
        "Q: How long does the {topic} process take for request number {i}? \
         A: Most {topic} requests are handled within two working days. If yours takes longer, \
         contact our support team with your reference number and we will look into it right away."
    )
}

/// `EMBED_BENCH_PASSAGES=<file of JSON strings, one a line>`: those passages in one call, as
/// a bulk import sends them, after a warm-up; prints `passages/s: <rate>` for
/// bench/retrieval.sh to compare the service's ingestion with.
async fn passages_rate(model: &BertEmbedder, path: &str) -> anyhow::Result<()> {
    let texts: Vec<String> = std::fs::read_to_string(path)
        .with_context(|| format!("cannot read {path}"))?
        .lines()
        .filter(|line| !line.trim().is_empty())
        .map(serde_json::from_str)
        .collect::<Result<_, _>>()
        .context("each line must be a JSON string")?;
    anyhow::ensure!(!texts.is_empty(), "no passages in {path}");
    model.embed(texts.iter().take(32).cloned().collect()).await?;
    let started = Instant::now();
    model.embed(texts.clone()).await?;
    eprintln!("products: {}", model.products());
    println!("passages/s: {:.1}", texts.len() as f64 / started.elapsed().as_secs_f64());
    Ok(())
}

fn percentile(sorted: &[Duration], p: f64) -> Duration {
    let rank = ((sorted.len() as f64 - 1.0) * p).round() as usize;
    sorted[rank.min(sorted.len() - 1)]
}

fn ms(d: Duration) -> f64 {
    d.as_secs_f64() * 1000.0
}

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    let dir = embed::default_model_dir();
    let started = Instant::now();
    let model = BertEmbedder::load(&dir).context("cannot load the model")?;
    let load_time = started.elapsed();
    if let Ok(path) = std::env::var("EMBED_BENCH_PASSAGES") {
        return passages_rate(&model, &path).await;
    }

    let queries: Vec<String> = match std::env::args().nth(1) {
        Some(path) => std::fs::read_to_string(&path)
            .with_context(|| format!("cannot read {path}"))?
            .lines()
            .map(str::trim)
            .filter(|line| !line.is_empty())
            .map(str::to_owned)
            .collect(),
        None => vec!["How do I reset my password?".to_owned()],
    };
    anyhow::ensure!(!queries.is_empty(), "no queries to embed");
    for query in queries.iter().cycle().take(20) {
        model.embed(vec![query.clone()]).await?;
    }
    model.embed((0..PASSAGE_BATCH).map(passage).collect()).await?;

    let mut latencies = Vec::with_capacity(QUERY_RUNS);
    for query in queries.iter().cycle().take(QUERY_RUNS) {
        let started = Instant::now();
        model.embed(vec![query.clone()]).await?;
        latencies.push(started.elapsed());
    }
    latencies.sort();

    // The same queries through candle-transformers' BERT (what the encoder replaced), one at a
    // time on one thread as the service's workers run: the reference of this run. It cannot
    // load another architecture's weights.
    let reference = match reference_bert::ReferenceBert::load(&dir) {
        Ok(reference) => Some(compare_with_reference(&model, &reference, &queries).await?),
        Err(error) => {
            eprintln!("no reference run: candle-transformers' BERT cannot load this model ({error:#})");
            None
        }
    };

    let passages: Vec<String> = (0..PASSAGES).map(passage).collect();
    let mut tokenizer =
        tokenizers::Tokenizer::from_file(dir.join("tokenizer.json")).map_err(|e| anyhow::anyhow!("{e}"))?;
    tokenizer.with_padding(None);
    let mut tokens = 0;
    for text in &passages {
        tokens += tokenizer.encode(text.as_str(), true).map_err(|e| anyhow::anyhow!("{e}"))?.get_ids().len();
    }
    let mut query_tokens = Vec::new();
    for query in &queries {
        query_tokens.push(tokenizer.encode(query.as_str(), true).map_err(|e| anyhow::anyhow!("{e}"))?.get_ids().len());
    }
    let (fewest, most) = (query_tokens.iter().min().copied(), query_tokens.iter().max().copied());
    let query_tokens = match (fewest, most) {
        (Some(fewest), Some(most)) if fewest != most => format!("{} queries of {fewest}-{most}", queries.len()),
        _ => most.unwrap_or(0).to_string(),
    };
    let started = Instant::now();
    for batch in passages.chunks(PASSAGE_BATCH) {
        model.embed(batch.to_vec()).await?;
    }
    let passage_time = started.elapsed();
    let throughput = PASSAGES as f64 / passage_time.as_secs_f64();
    // All passages in one call, as an extraction job sends them: split over the cores.
    let started = Instant::now();
    model.embed(passages.clone()).await?;
    let bulk_throughput = PASSAGES as f64 / started.elapsed().as_secs_f64();

    let threads = std::thread::available_parallelism().map(|n| n.get()).unwrap_or(1);
    println!("CPU: {}", cpu_model());
    println!(
        "{}, {} dimensions, {} products, {threads} threads, model loaded in {:.0} ms\n",
        model.model(),
        model.dimensions(),
        model.products(),
        ms(load_time)
    );
    println!("| measurement | value |");
    println!("|---|---|");
    println!(
        "| query latency p50 ({query_tokens} tokens, {QUERY_RUNS} runs) | {:.1} ms |",
        ms(percentile(&latencies, 0.50))
    );
    println!("| query latency p99 | {:.1} ms |", ms(percentile(&latencies, 0.99)));
    if let Some((reference_latencies, largest_difference)) = &reference {
        println!(
            "| reference, candle-transformers BertModel, one thread: query p50 / p99 | {:.1} / {:.1} ms |",
            ms(percentile(reference_latencies, 0.50)),
            ms(percentile(reference_latencies, 0.99))
        );
        println!("| largest difference of a vector component from the reference | {largest_difference:.1e} |");
    }
    println!(
        "| passage throughput ({} tokens on average, batches of {PASSAGE_BATCH}, {PASSAGES} passages) | {throughput:.0} passages/s |",
        tokens / PASSAGES
    );
    println!(
        "| passage throughput ({PASSAGES} passages in one call, split over {} threads) | {bulk_throughput:.0} passages/s |",
        model.parallelism()
    );
    Ok(())
}

/// The reference's query latencies (sorted) and the largest difference of a vector component
/// between the two, over every query.
async fn compare_with_reference(
    model: &BertEmbedder,
    reference: &reference_bert::ReferenceBert,
    queries: &[String],
) -> anyhow::Result<(Vec<Duration>, f32)> {
    let one_thread = rayon::ThreadPoolBuilder::new().num_threads(1).build()?;
    let latencies = one_thread.install(|| -> anyhow::Result<_> {
        let mut latencies = Vec::with_capacity(QUERY_RUNS);
        for query in queries.iter().cycle().take(QUERY_RUNS) {
            let started = Instant::now();
            reference.embed(query)?;
            latencies.push(started.elapsed());
        }
        latencies.sort();
        Ok(latencies)
    })?;
    let mut largest_difference = 0.0_f32;
    for query in queries {
        let ours = model.embed(vec![query.clone()]).await?.remove(0);
        let theirs = reference.embed(query)?;
        for (a, b) in ours.iter().zip(&theirs) {
            largest_difference = largest_difference.max((a - b).abs());
        }
    }
    Ok((latencies, largest_difference))
}

fn cpu_model() -> String {
    std::fs::read_to_string("/proc/cpuinfo")
        .ok()
        .and_then(|info| {
            info.lines().find_map(|line| {
                line.strip_prefix("model name").map(|rest| rest.trim_start_matches([' ', '\t', ':']).to_owned())
            })
        })
        .unwrap_or_else(|| "unknown".to_owned())
}
