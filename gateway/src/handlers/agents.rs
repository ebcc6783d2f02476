//! `/agents`: agents, their instructions and the instructions history. Agent views carry
//! their knowledge base's name, which lives in the knowledgebase service: the gateway
//! joins the two.

use std::collections::HashMap;

use serde_json::Value;
use switchboard_kit::{ServiceError, ServiceResult};
use switchboard_proto::v1::{
    Agent, AgentType, CreateAgentRequest, FieldChange, GetAgentRequest, ListAgentsRequest, ListKnowledgebasesRequest,
    RestoreInstructionVersionRequest, UpdateAgentRequest, UpdateInstructionsRequest,
};

use crate::call::{Call, Reply};
use crate::routes::HandlerFuture;
use crate::services::Services;
use crate::validate::Patch;
use crate::views;

const NAME_MAX: usize = 255;
const DESCRIPTION_MAX: usize = 5000;
pub const INSTRUCTIONS_MAX: usize = 100_000;

pub fn agent_request(call: &Call) -> GetAgentRequest {
    GetAgentRequest { team_id: call.team_id().to_owned(), agent_id: call.param("agentId").to_owned() }
}

pub async fn fetch_agent(call: &Call) -> ServiceResult<Agent> {
    Ok(call.services.agents.clone().get_agent(agent_request(call)).await?.into_inner())
}

/// Names of the team's knowledge bases among `ids`; ids of deleted ones are absent.
async fn knowledgebase_names(
    services: &Services,
    team_id: &str,
    ids: Vec<String>,
) -> ServiceResult<HashMap<String, Option<String>>> {
    if ids.is_empty() {
        return Ok(HashMap::new());
    }
    let knowledgebases = services
        .knowledgebase
        .clone()
        .list_knowledgebases(ListKnowledgebasesRequest { team_id: team_id.to_owned(), ids })
        .await?
        .into_inner()
        .knowledgebases;
    Ok(knowledgebases.into_iter().map(|k| (k.id, k.name)).collect())
}

async fn agent_views(call: &Call, agents: &[Agent]) -> ServiceResult<Vec<Value>> {
    let mut ids: Vec<String> = agents.iter().filter_map(|a| a.knowledgebase_id.clone()).collect();
    ids.sort();
    ids.dedup();
    let names = knowledgebase_names(&call.services, call.team_id(), ids).await?;
    Ok(agents
        .iter()
        .map(|agent| {
            let linked =
                agent.knowledgebase_id.as_deref().and_then(|id| names.get(id).map(|name| (id, name.as_deref())));
            views::agent(agent, linked)
        })
        .collect())
}

async fn agent_view(call: &Call, agent: &Agent) -> ServiceResult<Value> {
    Ok(agent_views(call, std::slice::from_ref(agent)).await?.pop().unwrap_or(Value::Null))
}

fn parse_type(value: &str) -> AgentType {
    match value {
        "phone" => AgentType::Phone,
        "chat" => AgentType::Chat,
        _ => AgentType::Unspecified,
    }
}

/// `GET /agents`: newest first.
pub fn list(call: Call) -> HandlerFuture {
    Box::pin(async move {
        let agents = call
            .services
            .agents
            .clone()
            .list_agents(ListAgentsRequest { team_id: call.team_id().to_owned() })
            .await?
            .into_inner()
            .agents;
        Ok(Reply::data(Value::from(agent_views(&call, &agents).await?)))
    })
}

/// `POST /agents`
pub fn create(call: Call) -> HandlerFuture {
    Box::pin(async move {
        let mut fields = call.fields()?;
        let name = fields.required_text("name", 1, NAME_MAX);
        let agent_type = fields.required_text("type", 1, 16);
        let description = fields.optional_text("description", 0, DESCRIPTION_MAX);
        let instructions = fields.optional_text("instructions", 1, INSTRUCTIONS_MAX);
        let knowledgebase_id = match fields.nullable_uuid("knowledgebaseId") {
            Patch::Value(id) => Some(id),
            Patch::Absent | Patch::Null => None,
        };
        if !agent_type.is_empty() && parse_type(&agent_type) == AgentType::Unspecified {
            fields.violation("type", "must be phone or chat");
        }
        fields.finish()?;
        let agent = call
            .services
            .agents
            .clone()
            .create_agent(CreateAgentRequest {
                team_id: call.team_id().to_owned(),
                name,
                description,
                r#type: parse_type(&agent_type).into(),
                instructions,
                knowledgebase_id,
            })
            .await?
            .into_inner();
        Ok(Reply::created(agent_view(&call, &agent).await?, "Agent created successfully"))
    })
}

/// `GET /agents/{agentId}`
pub fn get(call: Call) -> HandlerFuture {
    Box::pin(async move {
        let agent = fetch_agent(&call).await?;
        Ok(Reply::data(agent_view(&call, &agent).await?))
    })
}

/// `PUT /agents/{agentId}`: `name`, `description`, `knowledgebaseId`; `null` clears the
/// last two.
pub fn update(call: Call) -> HandlerFuture {
    Box::pin(async move {
        let mut fields = call.fields()?;
        let name = fields.optional_text("name", 1, NAME_MAX);
        let description = fields.nullable_text("description", 0, DESCRIPTION_MAX);
        let knowledgebase = fields.nullable_uuid("knowledgebaseId");
        fields.finish()?;
        let (description_change, description) = split(description);
        let (knowledgebase_change, knowledgebase_id) = split(knowledgebase);
        let agent = call
            .services
            .agents
            .clone()
            .update_agent(UpdateAgentRequest {
                team_id: call.team_id().to_owned(),
                agent_id: call.param("agentId").to_owned(),
                name,
                description_change: description_change.into(),
                description,
                knowledgebase_change: knowledgebase_change.into(),
                knowledgebase_id,
            })
            .await?
            .into_inner();
        Ok(Reply::updated(agent_view(&call, &agent).await?, "Agent updated successfully"))
    })
}

fn split(patch: Patch<String>) -> (FieldChange, String) {
    match patch {
        Patch::Absent => (FieldChange::Keep, String::new()),
        Patch::Null => (FieldChange::Clear, String::new()),
        Patch::Value(value) => (FieldChange::Set, value),
    }
}

/// `DELETE /agents/{agentId}`
pub fn delete(call: Call) -> HandlerFuture {
    Box::pin(async move {
        let agent = call.services.agents.clone().delete_agent(agent_request(&call)).await?.into_inner();
        Ok(Reply::updated(views::agent(&agent, None), "Agent deleted successfully"))
    })
}

/// `GET /agents/{agentId}/instructions`
pub fn get_instructions(call: Call) -> HandlerFuture {
    Box::pin(async move {
        let instructions = call.services.agents.clone().get_instructions(agent_request(&call)).await?.into_inner();
        Ok(Reply::data(views::instructions(&instructions)))
    })
}

/// `PUT /agents/{agentId}/instructions`: full replacement.
pub fn put_instructions(call: Call) -> HandlerFuture {
    Box::pin(async move {
        let mut fields = call.fields()?;
        let instructions = fields.required_text("instructions", 1, INSTRUCTIONS_MAX);
        fields.finish()?;
        let updated = call
            .services
            .agents
            .clone()
            .update_instructions(UpdateInstructionsRequest {
                team_id: call.team_id().to_owned(),
                agent_id: call.param("agentId").to_owned(),
                instructions,
            })
            .await?
            .into_inner();
        Ok(Reply::updated(views::instructions(&updated), "Agent instructions updated successfully"))
    })
}

/// `GET /agents/{agentId}/instructions/history`: newest first.
pub fn history(call: Call) -> HandlerFuture {
    Box::pin(async move {
        let versions =
            call.services.agents.clone().list_instruction_versions(agent_request(&call)).await?.into_inner().versions;
        Ok(Reply::data(Value::from(versions.iter().map(views::instruction_version).collect::<Vec<_>>())))
    })
}

/// `POST /agents/{agentId}/instructions/history/{version}/restore`
pub fn restore(call: Call) -> HandlerFuture {
    Box::pin(async move {
        let version: i64 = call
            .param("version")
            .parse()
            .ok()
            .filter(|v| *v > 0)
            .ok_or_else(|| ServiceError::invalid_field("version", "must be a positive integer"))?;
        let restored = call
            .services
            .agents
            .clone()
            .restore_instruction_version(RestoreInstructionVersionRequest {
                team_id: call.team_id().to_owned(),
                agent_id: call.param("agentId").to_owned(),
                version,
            })
            .await?
            .into_inner();
        Ok(Reply::updated(views::instructions(&restored), "Agent instructions restored successfully"))
    })
}
