//! Change-to-runtime latency of `WatchAgents` (bench/watch.sh runs it): opens WATCHERS streams
//! on one team, then changes an agent CHANGES times, RATE a second, through `UpdateAgent`, and
//! times from just before each change is sent until each stream receives it. Prints one JSON
//! line: the latency percentiles in milliseconds over every (change, stream) pair, and how many
//! of them arrived. Reaches only the agents service at AGENTS_URL (a loopback address).

use std::collections::HashMap;
use std::sync::Arc;
use std::time::{Duration, Instant};

use anyhow::{Context, bail};
use parking_lot::Mutex;
use switchboard_proto::v1::agents_service_client::AgentsServiceClient;
use switchboard_proto::v1::{AgentSettings, AgentType, CreateAgentRequest, UpdateAgentRequest, WatchAgentsRequest};
use tonic::transport::{Channel, Endpoint};

/// Each stream gives up on a change after this long; the bench then reports it as missing.
const DEADLINE: Duration = Duration::from_secs(30);

fn setting(name: &str, default: u64) -> anyhow::Result<u64> {
    match std::env::var(name) {
        Ok(value) => value.parse().with_context(|| format!("{name}={value} is not a whole number")),
        Err(_) => Ok(default),
    }
}

fn signed<T>(message: T, token: &str) -> anyhow::Result<tonic::Request<T>> {
    let mut request = tonic::Request::new(message);
    request.metadata_mut().insert("authorization", format!("Bearer {token}").parse()?);
    Ok(request)
}

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    let url = std::env::var("AGENTS_URL").context("AGENTS_URL: the agents service's gRPC URL")?;
    if !url.starts_with("http://127.") && !url.starts_with("http://localhost") {
        bail!("AGENTS_URL must be a loopback address, not {url}");
    }
    let token = std::env::var("SWITCHBOARD_SERVICE_TOKEN").context("SWITCHBOARD_SERVICE_TOKEN")?;
    let (watchers, changes, rate) = (setting("WATCHERS", 1000)?, setting("CHANGES", 100)?, setting("RATE", 10)?);
    // Streams share a few connections, as runtimes behind a handful of processes would.
    let mut channels = Vec::new();
    for _ in 0..8 {
        channels.push(Endpoint::from_shared(url.clone())?.connect_timeout(Duration::from_secs(10)).connect().await?);
    }
    let mut agents = AgentsServiceClient::new(channels[0].clone());
    let team_id = uuid::Uuid::new_v4().to_string();
    let created = agents
        .create_agent(signed(
            CreateAgentRequest {
                team_id: team_id.clone(),
                name: "Watched".into(),
                r#type: AgentType::Phone.into(),
                ..Default::default()
            },
            &token,
        )?)
        .await?
        .into_inner();

    let sent: Arc<Mutex<HashMap<String, Instant>>> = Arc::default();
    let latencies: Arc<Mutex<Vec<f64>>> = Arc::default();
    let mut streams = Vec::new();
    for index in 0..watchers {
        let channel: Channel = channels[usize::try_from(index)? % channels.len()].clone();
        let request = signed(WatchAgentsRequest { team_id: team_id.clone(), from_version: 0 }, &token)?;
        let mut stream = AgentsServiceClient::new(channel).watch_agents(request).await?.into_inner();
        let (sent, latencies) = (sent.clone(), latencies.clone());
        let last = format!("change {}", changes.saturating_sub(1));
        streams.push(tokio::spawn(async move {
            // A change carries the config as it is when sent, so a quick later change may be
            // seen in place of an earlier one: each marker counts once, and the last one ends.
            let mut seen = std::collections::HashSet::new();
            loop {
                let Ok(Ok(Some(change))) = tokio::time::timeout(DEADLINE, stream.message()).await else { break };
                let first = change.config.and_then(|c| c.agent).and_then(|a| a.settings).and_then(|s| s.first_message);
                let Some(marker) = first else { continue };
                let started = sent.lock().get(&marker).copied();
                if let Some(started) = started
                    && seen.insert(marker.clone())
                {
                    latencies.lock().push(started.elapsed().as_secs_f64() * 1000.0);
                }
                if marker == last {
                    break;
                }
            }
        }));
    }
    // Let every stream reach its live phase before the first change.
    tokio::time::sleep(Duration::from_secs(2)).await;

    let every = Duration::from_secs_f64(1.0 / f64::from(u32::try_from(rate.max(1))?));
    let began = Instant::now();
    for n in 0..changes {
        let marker = format!("change {n}");
        sent.lock().insert(marker.clone(), Instant::now());
        let update = UpdateAgentRequest {
            team_id: team_id.clone(),
            agent_id: created.id.clone(),
            settings_paths: vec!["first_message".into()],
            settings: Some(AgentSettings { first_message: Some(marker), ..Default::default() }),
            ..Default::default()
        };
        agents.update_agent(signed(update, &token)?).await?;
        let next = began + every * u32::try_from(n + 1)?;
        tokio::time::sleep_until(next.into()).await;
    }
    for stream in streams {
        stream.await?;
    }
    let mut latencies = std::mem::take(&mut *latencies.lock());
    latencies.sort_by(f64::total_cmp);
    let at = |p: f64| {
        let index = ((latencies.len() as f64 - 1.0) * p).round() as usize;
        latencies.get(index).copied().unwrap_or(f64::NAN)
    };
    println!(
        "{}",
        serde_json::json!({
            "watchers": watchers, "changes": changes, "rate": rate,
            "expected": watchers * changes, "received": latencies.len(),
            "p50_ms": at(0.5), "p99_ms": at(0.99), "max_ms": latencies.last().copied().unwrap_or(f64::NAN),
        })
    );
    Ok(())
}
