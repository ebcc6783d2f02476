//! The job that unlinks the agents of a deleted knowledge base, queued in the delete's
//! transaction: the agents service may be down when the delete commits, and the job keeps
//! asking until it has answered (the call is idempotent: it unlinks whatever is still linked).

use switchboard_kit::grpc::Channel;
use switchboard_kit::jobs::{Job, JobHandler};
use switchboard_proto::v1::UnlinkKnowledgebaseRequest;
use switchboard_proto::v1::agents_service_client::AgentsServiceClient;

pub struct UnlinkAgents {
    agents: AgentsServiceClient<Channel>,
}

impl UnlinkAgents {
    pub fn new(agents: AgentsServiceClient<Channel>) -> Self {
        Self { agents }
    }
}

#[async_trait::async_trait]
impl JobHandler for UnlinkAgents {
    async fn run(&self, job: &Job) -> anyhow::Result<()> {
        let request =
            UnlinkKnowledgebaseRequest { team_id: job.team_id.clone(), knowledgebase_id: job.subject_id.clone() };
        let unlinked = self
            .agents
            .clone()
            .unlink_knowledgebase(request)
            .await
            .map_err(|status| anyhow::anyhow!("the agents service did not unlink: {status}"))?
            .into_inner()
            .unlinked;
        tracing::debug!(knowledgebase = %job.subject_id, unlinked, "agents unlinked from a deleted knowledge base");
        Ok(())
    }
}
