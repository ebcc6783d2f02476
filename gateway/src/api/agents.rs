//! `/agents`: agents, their instructions and the instructions history. Agent views carry their
//! knowledge base's name, which lives in the knowledgebase service: the gateway joins the two.

use std::collections::HashMap;

use super::agent_settings::{AnalysisFieldInput, ModelInput, ToolInput, VoiceInput};
use schemars::JsonSchema;
use serde::Deserialize;
use switchboard_api::agents::{Agent, AgentKind, InstructionVersion, Instructions, KnowledgebaseRef};
use switchboard_kit::vocabulary::AuditAction;
use switchboard_kit::{ServiceResult, limits};
use switchboard_proto::v1::{
    self as proto, AgentType, CreateAgentRequest, FieldChange, GetAgentRequest, GetInstructionVersionRequest,
    ListAgentsRequest, ListKnowledgebasesRequest, RestoreInstructionVersionRequest, UpdateAgentRequest,
    UpdateInstructionsRequest,
};

use super::groups::AGENTS;
use crate::call::Call;
use crate::endpoint::{Created, Data, Endpoint, Id, Input, Json, List, Method, Nothing, Patch, ToolHints, Updated};
use crate::services::Services;

const AGENT_GONE: &str = "Agent not found";

pub fn endpoints() -> Vec<Endpoint> {
    vec![
        Endpoint::get("/v1/agents", list)
            .doc("listAgents", AGENTS, "List agents, newest first")
            .lists("agentId")
            .about("All of the team's agents, newest first, each with its linked knowledge base; not paged.")
            .tool("list_agents", "Lists the team's phone and chat agents, newest first."),
        Endpoint::post("/v1/agents", create)
            .audited(AuditAction::AgentCreated)
            .doc("createAgent", AGENTS, "Create an agent")
            .creates("agentId")
            .about(
                "Beyond the spec: instructions given here become version 1, and a prompt-optimisation job is \
                 queued either way. A `knowledgebaseId` must name one of the team's knowledge bases. The runtime \
                 settings (`firstMessage`, `language`, `voice`, `model`, `tools`, `postCallAnalysis`) are \
                 optional; given ones are part of version 1.",
            )
            .fails(404, "Knowledgebase not found (the `knowledgebaseId` is not one of the team's)."),
        Endpoint::get("/v1/agents/{agentId}", get)
            .doc("getAgent", AGENTS, "Get an agent")
            .about("Beyond the spec: one agent with its linked knowledge base and runtime settings.")
            .fails(404, AGENT_GONE)
            .tool("get_agent", "Reads one agent with its runtime settings (first message, language, voice, model, tools, post-call analysis)."),
        Endpoint::put("/v1/agents/{agentId}", update)
            .audited(AuditAction::AgentUpdated)
            .doc("updateAgent", AGENTS, "Change an agent: name, description, knowledge base (null unlinks) or runtime settings")
            .about(
                "Beyond the spec: a partial update. `null` clears the description, unlinks the knowledge base or \
                 clears a runtime setting; an absent member is kept. A change to the runtime settings is a new \
                 version in the instructions history (kept with the instructions, restored with them); the \
                 instructions themselves are changed with `PUT .../instructions`.",
            )
            .fails(404, "Agent not found, or Knowledgebase not found (the `knowledgebaseId` is not one of the team's).")
            // Sending the same settings twice adds no second version: idempotent as a PUT is.
            .tool(
                "update_agent",
                "Changes an agent's name, description, knowledge base or runtime settings. Only the members given \
                 change; null clears one. A settings change is a new version in the agent's history (restorable).",
            ),
        Endpoint::delete("/v1/agents/{agentId}", delete)
            .audited(AuditAction::AgentDeleted)
            .doc("deleteAgent", AGENTS, "Delete an agent with its instructions history")
            .about(
                "Beyond the spec: deletes the agent with its instructions history and runtime prompt; its knowledge \
                 base is kept. `data` is the agent as it was, with `knowledgebase` null.",
            )
            .fails(404, AGENT_GONE),
        Endpoint::get("/v1/agents/{agentId}/instructions", get_instructions)
            .doc("getAgentInstructions", AGENTS, "Get an agent's instructions (system prompt)")
            .about(
                "The agent's current instructions with their version and the state of the prompt-optimisation job.",
            )
            .fails(404, AGENT_GONE)
            .tool("get_agent_instructions", "Reads an agent's current instructions (its prompt)."),
        Endpoint::put("/v1/agents/{agentId}/instructions", put_instructions)
            .audited(AuditAction::InstructionsReplaced)
            .doc("updateAgentInstructions", AGENTS, "Replace an agent's instructions; the previous text goes to the history")
            .about(
                "Replaces the instructions in full: the previous text (if any) is saved to the history, which keeps \
                 the newest 20 versions, the version goes up by one, and a prompt-optimisation job is queued so the \
                 change applies to upcoming conversations.",
            )
            .fails(404, AGENT_GONE)
            // A PUT, yet not idempotent: the same text sent twice adds two versions to the history
            // (and pushes the oldest out). Destructive: it replaces the text.
            .tool_annotated(
                "update_agent_instructions",
                "Replaces an agent's instructions. The previous text is kept in the agent's history (last 20 versions); \
                 each call adds a version, even with the same text.",
                ToolHints { idempotent: false, ..ToolHints::of(Method::Put) },
            ),
        Endpoint::get("/v1/agents/{agentId}/instructions/history", history)
            .doc("listAgentInstructionsHistory", AGENTS, "The last 20 versions of an agent's instructions, newest first")
            .gives("version", "/data/0/version")
            .about("Beyond the spec: the saved earlier versions (at most 20), each with when it was set and replaced.")
            .fails(404, AGENT_GONE),
        Endpoint::get("/v1/agents/{agentId}/instructions/history/{version}", history_version)
            .doc("getAgentInstructionsVersion", AGENTS, "One saved version of an agent's instructions")
            .about("Beyond the spec: a saved earlier version, as the history lists it.")
            .fails(404, "Agent not found, or Instructions version not found"),
        Endpoint::post("/v1/agents/{agentId}/instructions/history/{version}/restore", restore)
            .audited(AuditAction::InstructionsRestored)
            .doc("restoreAgentInstructions", AGENTS, "Make a saved version the current instructions again")
            .about(
                "Beyond the spec: makes a saved version current again as a new version (the text it replaces is \
                 saved too) and queues a prompt-optimisation job; takes no body.",
            )
            .fails(404, "Agent not found, or Instructions version not found"),
    ]
}

/// An agent's id in the path.
#[derive(Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct AgentPath {
    pub agent_id: Id,
}

/// A saved version of an agent's instructions in the path.
#[derive(Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct VersionPath {
    pub agent_id: Id,
    #[schemars(range(min = limits::VERSION.min, max = limits::VERSION.max))]
    pub version: u32,
}

/// Other members are ignored.
#[derive(Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct CreateAgent {
    /// Not blank.
    #[schemars(length(min = limits::NAME.min, max = limits::NAME.max))]
    pub name: String,
    #[serde(rename = "type")]
    pub kind: AgentKind,
    /// Null or absent: no description.
    #[schemars(length(max = limits::DESCRIPTION.max))]
    pub description: Option<String>,
    /// The first instructions (version 1; not blank). Absent or null: none yet (version 0).
    #[schemars(length(min = limits::INSTRUCTIONS.min, max = limits::INSTRUCTIONS.max))]
    pub instructions: Option<String>,
    /// One of the team's knowledge bases to link (404 otherwise); null or absent links none.
    pub knowledgebase_id: Option<Id>,
    /// Runtime settings; absent or null: none. Given settings make a version as instructions do.
    #[schemars(length(min = limits::FIRST_MESSAGE.min, max = limits::FIRST_MESSAGE.max))]
    pub first_message: Option<String>,
    /// A BCP 47 language tag such as `en-US`.
    #[schemars(length(min = limits::LANGUAGE_TAG.min, max = limits::LANGUAGE_TAG.max))]
    pub language: Option<String>,
    pub voice: Option<VoiceInput>,
    pub model: Option<ModelInput>,
    /// At most 32; function names unique.
    #[schemars(length(max = limits::TOOLS.max))]
    pub tools: Option<Vec<ToolInput>>,
    /// At most 50; names unique.
    #[schemars(length(max = limits::ANALYSIS_FIELDS.max))]
    pub post_call_analysis: Option<Vec<AnalysisFieldInput>>,
}

/// A partial update: every member is optional. Other members are ignored.
#[derive(Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct UpdateAgent {
    /// Not blank; absent or null keeps the name.
    #[schemars(length(min = limits::NAME.min, max = limits::NAME.max))]
    pub name: Option<String>,
    /// Absent keeps it, null clears it.
    #[serde(default)]
    #[schemars(length(max = limits::DESCRIPTION.max))]
    pub description: Patch<String>,
    /// Absent keeps the link, null unlinks, a UUID links that knowledge base of the team (404
    /// otherwise).
    #[serde(default)]
    pub knowledgebase_id: Patch<Id>,
    /// Runtime settings: absent keeps each, null clears it. A change to any of them is a new
    /// version in the instructions history.
    #[serde(default)]
    #[schemars(length(min = limits::FIRST_MESSAGE.min, max = limits::FIRST_MESSAGE.max))]
    pub first_message: Patch<String>,
    #[serde(default)]
    #[schemars(length(min = limits::LANGUAGE_TAG.min, max = limits::LANGUAGE_TAG.max))]
    pub language: Patch<String>,
    #[serde(default)]
    pub voice: Patch<VoiceInput>,
    #[serde(default)]
    pub model: Patch<ModelInput>,
    /// The whole list; null or `[]` removes every tool.
    #[serde(default)]
    #[schemars(length(max = limits::TOOLS.max))]
    pub tools: Patch<Vec<ToolInput>>,
    /// The whole list; null or `[]` removes every field.
    #[serde(default)]
    #[schemars(length(max = limits::ANALYSIS_FIELDS.max))]
    pub post_call_analysis: Patch<Vec<AnalysisFieldInput>>,
}

/// The value of a setting an update names, noting its name in `paths`.
fn named<T>(patch: Patch<T>, path: &str, paths: &mut Vec<String>) -> Option<T> {
    if !matches!(patch, Patch::Absent) {
        paths.push(path.to_owned());
    }
    patch.value()
}

/// The settings an update names (`settings_paths`) with their values.
fn settings_patch(body: &mut UpdateAgent) -> (proto::AgentSettings, Vec<String>) {
    let mut paths = Vec::new();
    let first_message = named(std::mem::take(&mut body.first_message), "first_message", &mut paths);
    let language = named(std::mem::take(&mut body.language), "language", &mut paths);
    let voice = named(std::mem::take(&mut body.voice), "voice", &mut paths);
    let model = named(std::mem::take(&mut body.model), "model", &mut paths);
    let tools = named(std::mem::take(&mut body.tools), "tools", &mut paths);
    let analysis = named(std::mem::take(&mut body.post_call_analysis), "post_call_analysis", &mut paths);
    let settings = proto::AgentSettings {
        first_message,
        language,
        voice: voice.map(Into::into),
        model: model.map(Into::into),
        tools: tools.unwrap_or_default().into_iter().map(Into::into).collect(),
        post_call_analysis: analysis.unwrap_or_default().into_iter().map(Into::into).collect(),
    };
    (settings, paths)
}

/// Other members are ignored.
#[derive(Deserialize, JsonSchema)]
pub struct ReplaceInstructions {
    /// The full replacement text (not blank).
    #[schemars(length(min = limits::INSTRUCTIONS.min, max = limits::INSTRUCTIONS.max))]
    pub instructions: String,
}

fn agent_request(call: &Call, agent_id: &Id) -> GetAgentRequest {
    GetAgentRequest { team_id: call.team_id().to_owned(), agent_id: agent_id.to_string() }
}

pub async fn fetch_agent(call: &Call, agent_id: &Id) -> ServiceResult<proto::Agent> {
    Ok(call.services.agents.clone().get_agent(agent_request(call, agent_id)).await?.into_inner())
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

async fn agent_views(call: &Call, agents: &[proto::Agent]) -> ServiceResult<Vec<Agent>> {
    let mut ids: Vec<String> = agents.iter().filter_map(|a| a.knowledgebase_id.clone()).collect();
    ids.sort();
    ids.dedup();
    let names = knowledgebase_names(&call.services, call.team_id(), ids).await?;
    Ok(agents
        .iter()
        .map(|agent| {
            let linked = agent.knowledgebase_id.as_deref().and_then(|id| {
                names.get(id).map(|name| KnowledgebaseRef { id: Id::stored(id.to_owned()), name: name.clone() })
            });
            Agent::new(agent, linked)
        })
        .collect())
}

async fn agent_view(call: &Call, agent: proto::Agent) -> ServiceResult<Agent> {
    let mut views = agent_views(call, std::slice::from_ref(&agent)).await?;
    Ok(views.pop().unwrap_or_else(|| Agent::new(&agent, None)))
}

fn change<T: ToString>(patch: Patch<T>) -> (FieldChange, String) {
    match patch {
        Patch::Absent => (FieldChange::Keep, String::new()),
        Patch::Null => (FieldChange::Clear, String::new()),
        Patch::Value(value) => (FieldChange::Set, value.to_string()),
    }
}

async fn list(call: Call, _: Input) -> ServiceResult<List<Agent>> {
    let request = ListAgentsRequest { team_id: call.team_id().to_owned() };
    let agents = call.services.agents.clone().list_agents(request).await?.into_inner().agents;
    Ok(List::new(agent_views(&call, &agents).await?))
}

async fn create(call: Call, input: Input<Nothing, Nothing, Json<CreateAgent>>) -> ServiceResult<Created<Agent>> {
    let Json(body) = input.body;
    let request = CreateAgentRequest {
        team_id: call.team_id().to_owned(),
        name: body.name,
        description: body.description,
        r#type: AgentType::from(body.kind).into(),
        instructions: body.instructions,
        knowledgebase_id: body.knowledgebase_id.map(Id::into_string),
        settings: Some(proto::AgentSettings {
            first_message: body.first_message,
            language: body.language,
            voice: body.voice.map(Into::into),
            model: body.model.map(Into::into),
            tools: body.tools.unwrap_or_default().into_iter().map(Into::into).collect(),
            post_call_analysis: body.post_call_analysis.unwrap_or_default().into_iter().map(Into::into).collect(),
        }),
    };
    let agent = call.services.agents.clone().create_agent(request).await?.into_inner();
    Ok(Created::new(agent_view(&call, agent).await?, "Agent created successfully"))
}

async fn get(call: Call, input: Input<AgentPath>) -> ServiceResult<Data<Agent>> {
    let agent = fetch_agent(&call, &input.path.agent_id).await?;
    Ok(Data::new(agent_view(&call, agent).await?))
}

async fn update(call: Call, input: Input<AgentPath, Nothing, Json<UpdateAgent>>) -> ServiceResult<Updated<Agent>> {
    let Json(mut body) = input.body;
    let (settings, settings_paths) = settings_patch(&mut body);
    let (description_change, description) = change(body.description);
    let (knowledgebase_change, knowledgebase_id) = change(body.knowledgebase_id);
    let request = UpdateAgentRequest {
        team_id: call.team_id().to_owned(),
        agent_id: input.path.agent_id.into_string(),
        name: body.name,
        description_change: description_change.into(),
        description,
        knowledgebase_change: knowledgebase_change.into(),
        knowledgebase_id,
        settings_paths,
        settings: Some(settings),
    };
    let agent = call.services.agents.clone().update_agent(request).await?.into_inner();
    Ok(Updated::new(agent_view(&call, agent).await?, "Agent updated successfully"))
}

async fn delete(call: Call, input: Input<AgentPath>) -> ServiceResult<Updated<Agent>> {
    let request = agent_request(&call, &input.path.agent_id);
    let agent = call.services.agents.clone().delete_agent(request).await?.into_inner();
    Ok(Updated::new(Agent::new(&agent, None), "Agent deleted successfully"))
}

async fn get_instructions(call: Call, input: Input<AgentPath>) -> ServiceResult<Data<Instructions>> {
    let request = agent_request(&call, &input.path.agent_id);
    let instructions = call.services.agents.clone().get_instructions(request).await?.into_inner();
    Ok(Data::new(Instructions::from(&instructions)))
}

async fn put_instructions(
    call: Call,
    input: Input<AgentPath, Nothing, Json<ReplaceInstructions>>,
) -> ServiceResult<Updated<Instructions>> {
    let request = UpdateInstructionsRequest {
        team_id: call.team_id().to_owned(),
        agent_id: input.path.agent_id.into_string(),
        instructions: input.body.0.instructions,
    };
    let updated = call.services.agents.clone().update_instructions(request).await?.into_inner();
    Ok(Updated::new(Instructions::from(&updated), "Agent instructions updated successfully"))
}

async fn history(call: Call, input: Input<AgentPath>) -> ServiceResult<List<InstructionVersion>> {
    let request = agent_request(&call, &input.path.agent_id);
    let versions = call.services.agents.clone().list_instruction_versions(request).await?.into_inner().versions;
    Ok(List::new(versions.iter().map(InstructionVersion::from).collect()))
}

async fn history_version(call: Call, input: Input<VersionPath>) -> ServiceResult<Data<InstructionVersion>> {
    let request = GetInstructionVersionRequest {
        team_id: call.team_id().to_owned(),
        agent_id: input.path.agent_id.into_string(),
        version: i64::from(input.path.version),
    };
    let version = call.services.agents.clone().get_instruction_version(request).await?.into_inner();
    Ok(Data::new(InstructionVersion::from(&version)))
}

async fn restore(call: Call, input: Input<VersionPath>) -> ServiceResult<Updated<Instructions>> {
    let request = RestoreInstructionVersionRequest {
        team_id: call.team_id().to_owned(),
        agent_id: input.path.agent_id.into_string(),
        version: i64::from(input.path.version),
    };
    let restored = call.services.agents.clone().restore_instruction_version(request).await?.into_inner();
    Ok(Updated::new(Instructions::from(&restored), "Agent instructions restored successfully"))
}
