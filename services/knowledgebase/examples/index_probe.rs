//! Searches an existing embedded index (the platform must be stopped) and reports its
//! segments and search latency before and after an explicit optimize.
//!
//! `cargo run --release -p switchboard-knowledgebase --example index_probe -- DIR KNOWLEDGEBASE_ID`

use std::time::Instant;

use switchboard_knowledgebase::index::{EdgeIndex, SearchQuery, VectorIndex};

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    let mut args = std::env::args().skip(1);
    let (Some(dir), Some(knowledgebase)) = (args.next(), args.next()) else {
        anyhow::bail!("usage: index_probe DIR KNOWLEDGEBASE_ID");
    };
    let index = EdgeIndex::open(std::path::Path::new(&dir), 384)?;
    for round in ["as found", "after optimize"] {
        if round == "after optimize" {
            index.optimize().await?;
        }
        let info = index.info().await?;
        let mut times = Vec::new();
        for i in 0..50 {
            let vector: Vec<f32> = (0..384).map(|d| ((d * 31 + i * 7) % 97) as f32 / 97.0 - 0.5).collect();
            let started = Instant::now();
            index.search(&knowledgebase, &SearchQuery::dense(vector), 10, 0.0).await?;
            times.push(started.elapsed());
        }
        times.sort();
        println!("{round}: {info:?}; search p50 {:?}, p99 {:?}", times[25], times[49]);
    }
    Ok(())
}
