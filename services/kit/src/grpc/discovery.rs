//! Which replicas a channel balances over. A service URL names one host or several
//! (`http://agents:50052` or `http://10.0.0.5:50052,http://10.0.0.6:50052`); every host is
//! resolved again every few seconds, and the channel balances over every address found. So a
//! Kubernetes headless Service (one DNS A record per ready pod) spreads calls over its pods and
//! follows them as they come, go and fail their readiness, where a ClusterIP Service would pin
//! each long-lived HTTP/2 connection to whichever pod it first reached.
//!
//! Each address is also asked the standard gRPC health check every round, and calls go only
//! to the ones that answer SERVING: a replica that was killed or cut off stops getting calls
//! within a round (a static address list is never told), and one that drains on SIGTERM
//! (`SWITCHBOARD_DRAIN_SECONDS`) answers NOT_SERVING while it finishes what it has. When no
//! address answers SERVING, all of them are used, so that calls fail with the real error
//! instead of waiting for a replica.

use std::collections::{BTreeMap, BTreeSet};
use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use anyhow::Context;
use tokio::sync::Notify;
use tokio::sync::mpsc::Sender;
use tonic::transport::Endpoint;
use tonic::transport::channel::Change;
use tonic_health::pb::HealthCheckRequest;
use tonic_health::pb::health_check_response::ServingStatus;
use tonic_health::pb::health_client::HealthClient;

/// How often hosts are resolved and their addresses health-checked again: a drain period of
/// two rounds and a probe is enough for every channel to have moved off a stopping replica.
pub const REFRESH: Duration = Duration::from_secs(2);

/// The least time between two rounds that a failed call starts early: a service that is down
/// altogether fails every call, and its channel should not probe in a busy loop.
const EARLIEST_ROUND: Duration = Duration::from_millis(200);

/// How long a health check may take before its address counts as down.
const PROBE_TIMEOUT: Duration = Duration::from_secs(1);

/// One replica's connection: its address and which of its connections.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Replica {
    Address(SocketAddr, usize),
    /// A host that has not resolved yet, connected to by name (it resolves at connect time),
    /// so that a channel is never without a replica to try and fail on.
    Unresolved(String, usize),
}

/// One host of a service URL.
#[derive(Debug, Clone)]
pub struct Target {
    /// `host:port`, as resolution takes it.
    authority: String,
    /// The URL as given, for the unresolved fallback.
    url: String,
}

/// The hosts a (comma-separated) service URL names; each must be `http://host:port`.
pub fn targets(urls: &str) -> anyhow::Result<Vec<Target>> {
    let mut targets = Vec::new();
    for url in urls.split(',').map(str::trim).filter(|url| !url.is_empty()) {
        let uri: http::Uri = url.parse().with_context(|| format!("invalid service URL {url}"))?;
        anyhow::ensure!(
            uri.scheme_str() == Some("http"),
            "service URL {url}: only http:// is served (gRPC without TLS)"
        );
        let host = uri.host().with_context(|| format!("service URL {url} names no host"))?;
        let port = uri.port_u16().unwrap_or(80);
        targets.push(Target { authority: format!("{host}:{port}"), url: url.to_owned() });
    }
    anyhow::ensure!(!targets.is_empty(), "empty service URL");
    Ok(targets)
}

/// The addresses `target` resolves to now: IPv4 ones when there are any, as a name such as
/// `localhost` may also resolve to an IPv6 address where nothing listens.
async fn resolve(target: &Target) -> anyhow::Result<BTreeSet<SocketAddr>> {
    let found: Vec<SocketAddr> = tokio::net::lookup_host(target.authority.as_str())
        .await
        .with_context(|| format!("resolving {}", target.authority))?
        .collect();
    let has_v4 = found.iter().any(SocketAddr::is_ipv4);
    Ok(found.into_iter().filter(|address| address.is_ipv4() || !has_v4).collect())
}

/// Keeps `changes` (a balanced channel's) in step with what `targets` resolve to and which of
/// those addresses are healthy, `per_replica` connections to each, until the channel is
/// dropped. A host that fails to resolve keeps the addresses it had, so a DNS hiccup does not
/// empty the channel. A call that could not reach its replica (`unreachable`) starts the next
/// round early.
pub async fn follow(
    targets: Vec<Target>,
    endpoint: impl Fn(http::Uri) -> Endpoint,
    per_replica: usize,
    changes: Sender<Change<Replica, Endpoint>>,
    unreachable: Arc<Notify>,
) {
    let mut current = BTreeSet::new();
    let mut known: Vec<Option<BTreeSet<SocketAddr>>> = vec![None; targets.len()];
    let mut probes = Probes::default();
    loop {
        let round = tokio::time::Instant::now();
        for (target, known) in targets.iter().zip(known.iter_mut()) {
            match resolve(target).await {
                Ok(addresses) if !addresses.is_empty() => *known = Some(addresses),
                Ok(_) => tracing::warn!(host = %target.authority, "a service host resolved to no address"),
                Err(error) => {
                    tracing::warn!(host = %target.authority, error = format!("{error:#}"), "a service host did not resolve")
                }
            }
        }
        let addresses: BTreeSet<SocketAddr> = known.iter().flatten().flatten().copied().collect();
        let healthy = probes.healthy(&addresses).await;
        let usable = if healthy.is_empty() { &addresses } else { &healthy };
        let mut wanted = BTreeSet::new();
        for index in 0..per_replica {
            wanted.extend(usable.iter().map(|address| Replica::Address(*address, index)));
            for (target, known) in targets.iter().zip(&known) {
                if known.is_none() {
                    wanted.insert(Replica::Unresolved(target.url.clone(), index));
                }
            }
        }
        for gone in current.difference(&wanted) {
            if changes.send(Change::Remove(gone.clone())).await.is_err() {
                return;
            }
        }
        for new in wanted.difference(&current) {
            let uri = match new {
                Replica::Address(address, _) => origin(*address),
                Replica::Unresolved(url, _) => match url.parse() {
                    Ok(uri) => uri,
                    Err(_) => continue,
                },
            };
            if changes.send(Change::Insert(new.clone(), endpoint(uri))).await.is_err() {
                return;
            }
        }
        if current.len() != wanted.len() || !healthy.is_empty() && healthy.len() != addresses.len() {
            tracing::debug!(
                replicas = usable.len(),
                healthy = healthy.len(),
                known = addresses.len(),
                "service replicas"
            );
        }
        current = wanted;
        tokio::select! {
            () = tokio::time::sleep(REFRESH) => {}
            () = unreachable.notified() => tokio::time::sleep_until(round + EARLIEST_ROUND).await,
            () = changes.closed() => return,
        }
    }
}

/// A health-check client for each address, kept between rounds (one connection each).
#[derive(Default)]
struct Probes {
    clients: BTreeMap<SocketAddr, HealthClient<tonic::transport::Channel>>,
}

impl Probes {
    /// The addresses whose server answers SERVING now, all asked at once.
    async fn healthy(&mut self, addresses: &BTreeSet<SocketAddr>) -> BTreeSet<SocketAddr> {
        self.clients.retain(|address, _| addresses.contains(address));
        for address in addresses {
            self.clients.entry(*address).or_insert_with(|| {
                let channel = Endpoint::from(origin(*address))
                    .connect_timeout(PROBE_TIMEOUT)
                    .timeout(PROBE_TIMEOUT)
                    .tcp_nodelay(true)
                    .connect_lazy();
                HealthClient::new(channel)
            });
        }
        let checks = self.clients.iter().map(|(address, client)| {
            let mut client = client.clone();
            async move {
                // The empty service name is the server as a whole, which a drain turns off.
                let answer = client.check(HealthCheckRequest { service: String::new() }).await;
                let serving = answer.is_ok_and(|answer| answer.into_inner().status() == ServingStatus::Serving);
                serving.then_some(*address)
            }
        });
        futures::future::join_all(checks).await.into_iter().flatten().collect()
    }
}

fn origin(address: SocketAddr) -> http::Uri {
    // A socket address prints as `1.2.3.4:5` or `[::1]:5`, what an authority is.
    http::Uri::builder()
        .scheme("http")
        .authority(address.to_string())
        .path_and_query("/")
        .build()
        .unwrap_or_else(|_| http::Uri::from_static("http://127.0.0.1/"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_url_names_one_host_or_several() {
        let one = targets("http://agents:50052").unwrap();
        assert_eq!(one.len(), 1);
        assert_eq!(one[0].authority, "agents:50052");
        let two = targets("http://10.0.0.5:50052, http://10.0.0.6:50052,").unwrap();
        assert_eq!(
            two.iter().map(|target| target.authority.as_str()).collect::<Vec<_>>(),
            ["10.0.0.5:50052", "10.0.0.6:50052"]
        );
        assert!(targets("https://agents:50052").is_err());
        assert!(targets("").is_err());
        assert!(targets("http://").is_err());
    }

    #[test]
    fn origins_are_authorities() {
        assert_eq!(origin("10.1.2.3:50052".parse().unwrap()).to_string(), "http://10.1.2.3:50052/");
        assert_eq!(origin("[::1]:50052".parse().unwrap()).to_string(), "http://[::1]:50052/");
    }
}
