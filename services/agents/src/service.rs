//! The gRPC face of the agents store.

use switchboard_kit::ServiceError;
use switchboard_kit::grpc::{Channel, Reply, reply};
use switchboard_proto::v1::agents_service_server::{AgentsService, AgentsServiceServer};
use switchboard_proto::v1::knowledgebase_service_client::KnowledgebaseServiceClient;
use switchboard_proto::v1::*;
use tonic::Request;
use tonic::service::Routes;

use crate::store::{AgentChanges, AgentStore, NewAgent};
use crate::try_it::TryIt;
use crate::watch::Feed;

pub struct AgentsApi {
    store: AgentStore,
    /// Rung after a job is committed, so that the runner starts it at once.
    wake: std::sync::Arc<tokio::sync::Notify>,
    /// Where the knowledge bases that agents link to live.
    knowledgebases: KnowledgebaseServiceClient<Channel>,
    feed: std::sync::Arc<Feed>,
    try_it: TryIt,
}

pub fn routes(
    store: AgentStore,
    wake: std::sync::Arc<tokio::sync::Notify>,
    knowledgebases: KnowledgebaseServiceClient<Channel>,
    feed: std::sync::Arc<Feed>,
    try_it: TryIt,
) -> Routes {
    Routes::new(AgentsServiceServer::new(AgentsApi { store, wake, knowledgebases, feed, try_it }))
}

impl AgentsApi {
    /// A knowledge base an agent is linked to must be one of the team's: 404 otherwise.
    async fn check_knowledgebase(&self, team_id: &str, knowledgebase_id: Option<&str>) -> Result<(), ServiceError> {
        let Some(knowledgebase_id) = knowledgebase_id else {
            return Ok(());
        };
        let request = GetKnowledgebaseRequest {
            team_id: team_id.to_owned(),
            knowledgebase_id: knowledgebase_id.to_owned(),
            include_content: false,
        };
        self.knowledgebases.clone().get_knowledgebase(request).await?;
        Ok(())
    }
}

fn change(kind: FieldChange, value: String) -> Option<Option<String>> {
    match kind {
        FieldChange::Keep => None,
        FieldChange::Set => Some(Some(value)),
        FieldChange::Clear => Some(None),
    }
}

#[tonic::async_trait]
impl AgentsService for AgentsApi {
    async fn list_agents(&self, request: Request<ListAgentsRequest>) -> Reply<ListAgentsResponse> {
        let team_id = request.into_inner().team_id;
        reply(self.store.list(&team_id).await.map(|agents| ListAgentsResponse { agents }))
    }

    async fn get_agent(&self, request: Request<GetAgentRequest>) -> Reply<Agent> {
        let request = request.into_inner();
        reply(self.store.get(&request.team_id, &request.agent_id).await)
    }

    async fn create_agent(&self, request: Request<CreateAgentRequest>) -> Reply<Agent> {
        let request = request.into_inner();
        let agent_type = request.r#type();
        let new = NewAgent {
            name: request.name,
            description: request.description,
            agent_type,
            instructions: request.instructions,
            knowledgebase_id: request.knowledgebase_id,
            settings: request.settings.unwrap_or_default(),
        };
        new.validate()?;
        self.check_knowledgebase(&request.team_id, new.knowledgebase_id.as_deref()).await?;
        let created = self.store.create(&request.team_id, new).await;
        self.wake.notify_one();
        reply(created)
    }

    async fn update_agent(&self, request: Request<UpdateAgentRequest>) -> Reply<Agent> {
        let request = request.into_inner();
        let (description_change, knowledgebase_change) = (request.description_change(), request.knowledgebase_change());
        let changes = AgentChanges {
            description: change(description_change, request.description),
            knowledgebase_id: change(knowledgebase_change, request.knowledgebase_id),
            name: request.name,
            settings: request.settings.unwrap_or_default(),
            settings_paths: request.settings_paths,
        };
        changes.validate()?;
        self.check_knowledgebase(&request.team_id, changes.knowledgebase_id.clone().flatten().as_deref()).await?;
        reply(self.store.update(&request.team_id, &request.agent_id, changes).await)
    }

    async fn delete_agent(&self, request: Request<GetAgentRequest>) -> Reply<Agent> {
        let request = request.into_inner();
        reply(self.store.delete(&request.team_id, &request.agent_id).await)
    }

    async fn get_instructions(&self, request: Request<GetAgentRequest>) -> Reply<Instructions> {
        let request = request.into_inner();
        reply(self.store.instructions(&request.team_id, &request.agent_id).await)
    }

    async fn update_instructions(&self, request: Request<UpdateInstructionsRequest>) -> Reply<Instructions> {
        let request = request.into_inner();
        let updated = self.store.replace_instructions(&request.team_id, &request.agent_id, &request.instructions).await;
        self.wake.notify_one();
        reply(updated)
    }

    async fn list_instruction_versions(
        &self,
        request: Request<GetAgentRequest>,
    ) -> Reply<ListInstructionVersionsResponse> {
        let request = request.into_inner();
        reply(
            self.store
                .history(&request.team_id, &request.agent_id)
                .await
                .map(|versions| ListInstructionVersionsResponse { versions }),
        )
    }

    async fn get_instruction_version(
        &self,
        request: Request<GetInstructionVersionRequest>,
    ) -> Reply<InstructionVersion> {
        let request = request.into_inner();
        reply(self.store.instruction_version(&request.team_id, &request.agent_id, request.version).await)
    }

    async fn restore_instruction_version(
        &self,
        request: Request<RestoreInstructionVersionRequest>,
    ) -> Reply<Instructions> {
        let request = request.into_inner();
        let restored = self.store.restore(&request.team_id, &request.agent_id, request.version).await;
        self.wake.notify_one();
        reply(restored)
    }

    async fn get_runtime_prompt(&self, request: Request<GetAgentRequest>) -> Reply<RuntimePrompt> {
        let request = request.into_inner();
        reply(self.store.runtime_prompt(&request.team_id, &request.agent_id).await)
    }

    type WatchAgentsStream = tokio_stream::wrappers::ReceiverStream<Result<AgentChange, tonic::Status>>;

    async fn get_runtime_config(&self, request: Request<GetAgentRequest>) -> Reply<RuntimeConfig> {
        let request = request.into_inner();
        reply(self.store.runtime_config(&request.team_id, &request.agent_id).await)
    }

    async fn watch_agents(&self, request: Request<WatchAgentsRequest>) -> Reply<Self::WatchAgentsStream> {
        let request = request.into_inner();
        let team_id = Some(request.team_id).filter(|team| !team.is_empty());
        if let Some(team_id) = &team_id {
            crate::store::check_ids(&[("teamId", team_id)])?;
        }
        if request.from_version < 0 {
            return Err(ServiceError::invalid_field("fromVersion", "must not be negative").into());
        }
        let changes = self.feed.watch(team_id, request.from_version).await?;
        Ok(tonic::Response::new(tokio_stream::wrappers::ReceiverStream::new(changes)))
    }

    type TryAgentStream = tokio_stream::wrappers::ReceiverStream<Result<TryAgentEvent, tonic::Status>>;

    async fn try_agent(&self, request: Request<TryAgentRequest>) -> Reply<Self::TryAgentStream> {
        let request = request.into_inner();
        // An agent of another team is not found before anything else is said.
        let config = self.store.runtime_config(&request.team_id, &request.agent_id).await?;
        let events = self.try_it.reply(request, config).await?;
        Ok(tonic::Response::new(tokio_stream::wrappers::ReceiverStream::new(events)))
    }

    async fn unlink_knowledgebase(
        &self,
        request: Request<UnlinkKnowledgebaseRequest>,
    ) -> Reply<UnlinkKnowledgebaseResponse> {
        let request = request.into_inner();
        reply(
            self.store
                .unlink_knowledgebase(&request.team_id, &request.knowledgebase_id)
                .await
                .map(|unlinked| UnlinkKnowledgebaseResponse { unlinked }),
        )
    }
}
