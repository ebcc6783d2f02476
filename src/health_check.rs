//! `switchboard health <host:port>`: asks a service's gRPC health (`grpc.health.v1`, the
//! server's own status, the empty name) and succeeds when it is SERVING. It is the probe of a
//! Kubernetes cluster whose kubelet has no gRPC probes (before 1.24; the chart picks it by the
//! cluster's version), and answers the same question the kubelet's own probe asks.

use std::time::Duration;

use anyhow::Context;
use tonic_health::pb::HealthCheckRequest;
use tonic_health::pb::health_check_response::ServingStatus;
use tonic_health::pb::health_client::HealthClient;

/// A probe's whole budget: kubelets time an exec probe out after a second by default.
const BOUND: Duration = Duration::from_millis(900);

pub async fn check(address: &str) -> anyhow::Result<()> {
    let endpoint = tonic::transport::Endpoint::from_shared(format!("http://{address}"))
        .with_context(|| format!("{address} is not a host:port"))?
        .connect_timeout(BOUND)
        .timeout(BOUND);
    let asked = async {
        let channel = endpoint.connect().await.with_context(|| format!("connecting to {address}"))?;
        let answer = HealthClient::new(channel)
            .check(HealthCheckRequest { service: String::new() })
            .await
            .with_context(|| format!("asking the health of {address}"))?;
        anyhow::Ok(answer.into_inner().status)
    };
    let status =
        tokio::time::timeout(BOUND, asked).await.with_context(|| format!("{address} did not answer in time"))??;
    anyhow::ensure!(
        status == ServingStatus::Serving as i32,
        "{address} is not serving (status {})",
        ServingStatus::try_from(status).map_or("unknown", |status| status.as_str_name())
    );
    Ok(())
}
