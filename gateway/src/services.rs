//! gRPC clients of the services behind the gateway. Channels connect lazily and reconnect
//! by themselves; a service that is down or slow answers `UNAVAILABLE` or times out, which
//! the error table turns into a 503 within the request timeout. Every call carries the
//! service token and the trace context (see `switchboard_kit::grpc::client`). One `Services`
//! serves every request of a gateway (shared behind an `Arc`); a call clones only its client.

use std::sync::Arc;
use std::time::Duration;

use switchboard_kit::grpc::Channel;
use switchboard_kit::peers::{Peers, Service};
use switchboard_proto::v1::account_service_client::AccountServiceClient;
use switchboard_proto::v1::agents_service_client::AgentsServiceClient;
use switchboard_proto::v1::conversations_service_client::ConversationsServiceClient;
use switchboard_proto::v1::crm_service_client::CrmServiceClient;
use switchboard_proto::v1::identity_service_client::IdentityServiceClient;
use switchboard_proto::v1::knowledgebase_service_client::KnowledgebaseServiceClient;
use switchboard_proto::v1::webhooks_service_client::WebhooksServiceClient;
use switchboard_proto::v1::{GetIdentitiesRequest, Identity};

use crate::cache::TtlCache;
use crate::combine::Combiner;

/// How long a bulk import of references may take: 1,000 abstracts of SciFact's length are
/// 2,300 passages, about 3 minutes on two cores.
pub const BULK_TIMEOUT: Duration = Duration::from_secs(600);

/// The most teams one identity read asks for.
const IDENTITIES_PER_READ: usize = 256;

/// The most identities kept in memory (a few hundred bytes each).
const IDENTITIES_KEPT: usize = 100_000;

pub struct Services {
    pub identity: IdentityServiceClient<Channel>,
    /// People, sessions and the audit log: served by the identity service's process.
    pub accounts: AccountServiceClient<Channel>,
    pub agents: AgentsServiceClient<Channel>,
    pub knowledgebase: KnowledgebaseServiceClient<Channel>,
    /// The same service for bulk writes, whose embedding takes minutes rather than seconds:
    /// its calls time out after [`BULK_TIMEOUT`] instead of the request timeout.
    pub knowledgebase_bulk: KnowledgebaseServiceClient<Channel>,
    pub conversations: ConversationsServiceClient<Channel>,
    pub crm: CrmServiceClient<Channel>,
    pub webhooks: WebhooksServiceClient<Channel>,
    /// `GET /me` is what clients poll (dashboards, agents confirming their key): requests
    /// that arrive while identities are being read share the next read, whatever their team.
    identity_reads: Combiner<(), String, Result<Arc<Identity>, tonic::Status>>,
    /// The last identity read of each team, under the team version seen before that read.
    identities: TtlCache<String, (i64, Arc<Identity>)>,
}

/// The clients as the registry's services are connected.
#[derive(Default)]
struct Clients {
    identity: Option<IdentityServiceClient<Channel>>,
    accounts: Option<AccountServiceClient<Channel>>,
    agents: Option<AgentsServiceClient<Channel>>,
    knowledgebase: Option<KnowledgebaseServiceClient<Channel>>,
    knowledgebase_bulk: Option<KnowledgebaseServiceClient<Channel>>,
    conversations: Option<ConversationsServiceClient<Channel>>,
    crm: Option<CrmServiceClient<Channel>>,
    webhooks: Option<WebhooksServiceClient<Channel>>,
}

impl Services {
    /// Must run inside the tokio runtime that will drive the connections.
    /// `identity_ttl`: how long a team's identity is kept when its version is not known.
    pub fn connect(peers: &Peers, timeout: Duration, identity_ttl: Duration) -> anyhow::Result<Self> {
        // Lists and documents can be large; identities, agents and webhooks are small.
        const LARGE: usize = 64 * 1024 * 1024;
        let mut clients = Clients::default();
        // Every service of the registry; the match is exhaustive, so a new service does not
        // compile until the gateway says which client it gets.
        for service in Service::ALL {
            let channel = peers.channel(service.info(), timeout)?;
            match service {
                Service::Identity => {
                    clients.accounts = Some(AccountServiceClient::new(channel.clone()));
                    clients.identity = Some(IdentityServiceClient::new(channel));
                }
                Service::Agents => clients.agents = Some(AgentsServiceClient::new(channel)),
                Service::Knowledgebase => {
                    clients.knowledgebase =
                        Some(KnowledgebaseServiceClient::new(channel).max_decoding_message_size(LARGE));
                    let bulk = peers.channel(service.info(), BULK_TIMEOUT.max(timeout))?;
                    clients.knowledgebase_bulk =
                        Some(KnowledgebaseServiceClient::new(bulk).max_decoding_message_size(LARGE));
                }
                Service::Conversations => {
                    clients.conversations =
                        Some(ConversationsServiceClient::new(channel).max_decoding_message_size(LARGE));
                }
                Service::Crm => clients.crm = Some(CrmServiceClient::new(channel).max_decoding_message_size(LARGE)),
                Service::Webhooks => clients.webhooks = Some(WebhooksServiceClient::new(channel)),
            }
        }
        let missing = |name: &str| anyhow::anyhow!("no {name} client: the service registry has no {name} service");
        Ok(Self {
            identity: clients.identity.ok_or_else(|| missing("identity"))?,
            accounts: clients.accounts.ok_or_else(|| missing("identity"))?,
            agents: clients.agents.ok_or_else(|| missing("agents"))?,
            knowledgebase: clients.knowledgebase.ok_or_else(|| missing("knowledgebase"))?,
            knowledgebase_bulk: clients.knowledgebase_bulk.ok_or_else(|| missing("knowledgebase"))?,
            conversations: clients.conversations.ok_or_else(|| missing("conversations"))?,
            crm: clients.crm.ok_or_else(|| missing("crm"))?,
            webhooks: clients.webhooks.ok_or_else(|| missing("webhooks"))?,
            identity_reads: Combiner::new(IDENTITIES_PER_READ),
            identities: TtlCache::new(crate::cache::versioned_ttl(identity_ttl), IDENTITIES_KEPT),
        })
    }

    /// The team's identity (team, credits, subscription). With the team's version as this
    /// request read it (`Call::team_version`), the identity kept under that same version is
    /// current: nothing the identity service changed since it was read (a change gives the
    /// team a new version before it is acknowledged). Otherwise the identity is read after
    /// this call began.
    ///
    /// The version must be read *before* the identity it is kept with: an identity read after
    /// a change but kept under the version before it is read again on the next request, never
    /// the other way round. The subscription's current period is the one thing that changes
    /// without a change: an identity is read again once that period has ended.
    pub async fn identity_of(&self, team_id: &str, version: Option<i64>) -> Result<Arc<Identity>, tonic::Status> {
        if let Some(version) = version
            && let Some((kept_version, identity)) = self.identities.get(team_id)
            && kept_version == version
            && identity
                .subscription
                .as_ref()
                .and_then(|subscription| subscription.current_period_end_ms)
                .is_none_or(|end| end > switchboard_kit::time::now_ms())
        {
            return Ok(identity);
        }
        let identity = self.read_identity(team_id).await?;
        if let Some(version) = version {
            self.identities.insert(team_id.to_owned(), (version, identity.clone()));
        }
        Ok(identity)
    }

    async fn read_identity(&self, team_id: &str) -> Result<Arc<Identity>, tonic::Status> {
        self.identity_reads
            .run(
                (),
                team_id.to_owned(),
                |team_ids| async move {
                    let mut distinct = team_ids.clone();
                    distinct.sort_unstable();
                    distinct.dedup();
                    let request = GetIdentitiesRequest { team_ids: distinct };
                    let read = self.identity.clone().get_identities(request).await;
                    let read =
                        read.map(|response| response.into_inner().identities.into_iter().map(Arc::new).collect());
                    (team_ids, read)
                },
                |(team_ids, read): &(Vec<String>, Result<Vec<Arc<Identity>>, tonic::Status>), index| {
                    let identities = read.as_ref().map_err(Clone::clone)?;
                    let team_id = team_ids.get(index).map(String::as_str).unwrap_or_default();
                    identities
                        .iter()
                        .find(|identity| identity.team.as_ref().is_some_and(|team| team.id == team_id))
                        .cloned()
                        .ok_or_else(|| switchboard_kit::ServiceError::team_not_found().into())
                },
            )
            .await
    }
}
