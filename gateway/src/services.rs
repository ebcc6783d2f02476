//! gRPC clients of the services behind the gateway. Channels connect lazily and reconnect
//! by themselves; a service that is down or slow answers `UNAVAILABLE` or times out, which
//! the error table turns into a 503 within the request timeout. Every call carries the
//! service token and the trace context (see `switchboard_kit::grpc::client`).

use std::sync::Arc;

use switchboard_kit::grpc::Channel;
use switchboard_kit::peers::{AGENTS, CONVERSATIONS, CRM, IDENTITY, KNOWLEDGEBASE, WEBHOOKS};
use switchboard_proto::v1::agents_service_client::AgentsServiceClient;
use switchboard_proto::v1::conversations_service_client::ConversationsServiceClient;
use switchboard_proto::v1::crm_service_client::CrmServiceClient;
use switchboard_proto::v1::identity_service_client::IdentityServiceClient;
use switchboard_proto::v1::knowledgebase_service_client::KnowledgebaseServiceClient;
use switchboard_proto::v1::webhooks_service_client::WebhooksServiceClient;
use switchboard_proto::v1::{GetIdentityRequest, Identity};

use crate::combine::Combiner;
use crate::config::GatewayConfig;

#[derive(Clone)]
pub struct Services {
    pub identity: IdentityServiceClient<Channel>,
    pub agents: AgentsServiceClient<Channel>,
    pub knowledgebase: KnowledgebaseServiceClient<Channel>,
    pub conversations: ConversationsServiceClient<Channel>,
    pub crm: CrmServiceClient<Channel>,
    pub webhooks: WebhooksServiceClient<Channel>,
    /// `GET /me` is what clients poll (dashboards, agents confirming their key): requests of
    /// one team that arrive while its identity is being read share the next read.
    identity_reads: Arc<Combiner<String, Result<Identity, tonic::Status>>>,
}

impl Services {
    /// Must run inside the tokio runtime that will drive the connections.
    pub fn connect(config: &GatewayConfig) -> anyhow::Result<Self> {
        let (peers, timeout) = (&config.peers, config.request_timeout);
        Ok(Self {
            identity: IdentityServiceClient::new(peers.channel(&IDENTITY, timeout)?),
            agents: AgentsServiceClient::new(peers.channel(&AGENTS, timeout)?),
            knowledgebase: KnowledgebaseServiceClient::new(peers.channel(&KNOWLEDGEBASE, timeout)?)
                .max_decoding_message_size(64 * 1024 * 1024),
            conversations: ConversationsServiceClient::new(peers.channel(&CONVERSATIONS, timeout)?)
                .max_decoding_message_size(64 * 1024 * 1024),
            crm: CrmServiceClient::new(peers.channel(&CRM, timeout)?).max_decoding_message_size(64 * 1024 * 1024),
            webhooks: WebhooksServiceClient::new(peers.channel(&WEBHOOKS, timeout)?),
            identity_reads: Arc::default(),
        })
    }

    /// The team's identity (team, credits, subscription), read after this call began.
    pub async fn identity_of(&self, team_id: &str) -> Result<Identity, tonic::Status> {
        self.identity_reads
            .run(
                team_id.to_owned(),
                |_| async {
                    let request = GetIdentityRequest { team_id: team_id.to_owned() };
                    Ok(self.identity.clone().get_identity(request).await?.into_inner())
                },
                |read, _| read.clone(),
            )
            .await
    }
}
