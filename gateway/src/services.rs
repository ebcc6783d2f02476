//! gRPC clients of the services behind the gateway. Channels connect lazily and reconnect
//! by themselves; a service that is down or slow answers `UNAVAILABLE` or times out, which
//! the error table turns into a 503 within the request timeout.

use std::sync::Arc;
use std::time::Duration;

use anyhow::Context;
use switchboard_proto::v1::agents_service_client::AgentsServiceClient;
use switchboard_proto::v1::identity_service_client::IdentityServiceClient;
use switchboard_proto::v1::knowledgebase_service_client::KnowledgebaseServiceClient;
use switchboard_proto::v1::{GetIdentityRequest, Identity};
use tonic::transport::{Channel, Endpoint};

use crate::combine::Combiner;
use crate::config::GatewayConfig;

#[derive(Clone)]
pub struct Services {
    pub identity: IdentityServiceClient<Channel>,
    pub agents: AgentsServiceClient<Channel>,
    pub knowledgebase: KnowledgebaseServiceClient<Channel>,
    /// `GET /me` is what clients poll (dashboards, agents confirming their key): requests of
    /// one team that arrive while its identity is being read share the next read.
    identity_reads: Arc<Combiner<String, Result<Identity, tonic::Status>>>,
}

impl Services {
    /// Must run inside the tokio runtime that will drive the connections.
    pub fn connect(config: &GatewayConfig) -> anyhow::Result<Self> {
        let timeout = config.request_timeout;
        Ok(Self {
            identity: IdentityServiceClient::new(channel(&config.identity_url, timeout)?),
            agents: AgentsServiceClient::new(channel(&config.agents_url, timeout)?),
            knowledgebase: KnowledgebaseServiceClient::new(channel(&config.knowledgebase_url, timeout)?)
                .max_decoding_message_size(64 * 1024 * 1024),
            identity_reads: Arc::default(),
        })
    }

    /// The team's identity (team, credits, subscription), read after this call began.
    pub async fn identity_of(&self, team_id: &str) -> Result<Identity, tonic::Status> {
        self.identity_reads
            .run(
                team_id.to_owned(),
                |_| async {
                    let request = traced(GetIdentityRequest { team_id: team_id.to_owned() });
                    Ok(self.identity.clone().get_identity(request).await?.into_inner())
                },
                |read, _| read.clone(),
            )
            .await
    }
}

/// HTTP/2 connections per service: one connection serialises its streams through one
/// connection task, which caps throughput under many concurrent requests.
const CONNECTIONS_PER_SERVICE: usize = 4;

fn channel(url: &str, timeout: Duration) -> anyhow::Result<Channel> {
    let endpoint = Endpoint::from_shared(url.to_owned())
        .with_context(|| format!("invalid service URL {url}"))?
        .connect_timeout(Duration::from_secs(2).min(timeout))
        .timeout(timeout)
        .tcp_nodelay(true)
        .http2_keep_alive_interval(Duration::from_secs(30))
        .keep_alive_while_idle(true);
    Ok(Channel::balance_list(std::iter::repeat_n(endpoint, CONNECTIONS_PER_SERVICE)))
}

/// A request carrying the current trace context.
pub fn traced<T>(message: T) -> tonic::Request<T> {
    let mut request = tonic::Request::new(message);
    switchboard_kit::telemetry::inject(&mut request);
    request
}
