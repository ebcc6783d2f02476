//! Agents, their instructions and the saved versions of those.

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use switchboard_kit::vocabulary::JobStatus;
use switchboard_proto::v1::{self as proto, AgentType};

use crate::agent_settings::Settings;
use crate::id::Id;
use crate::time::Timestamp;

#[derive(Debug, Clone, Copy, Serialize, Deserialize, JsonSchema, PartialEq, Eq)]
#[serde(rename_all = "lowercase")]
pub enum AgentKind {
    Phone,
    Chat,
}

impl From<&proto::Agent> for AgentKind {
    fn from(agent: &proto::Agent) -> Self {
        if agent.r#type() == AgentType::Phone { AgentKind::Phone } else { AgentKind::Chat }
    }
}

/// A linked knowledge base by id and name.
#[derive(Serialize, JsonSchema)]
#[schemars(deny_unknown_fields)]
pub struct KnowledgebaseRef {
    pub id: Id,
    pub name: Option<String>,
}

/// An AI agent.
#[derive(Serialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
#[schemars(deny_unknown_fields)]
pub struct Agent {
    pub id: Id,
    pub name: String,
    pub description: Option<String>,
    #[serde(rename = "type")]
    pub kind: AgentKind,
    /// The linked knowledge base, or null when none is linked (or it no longer exists).
    pub knowledgebase: Option<KnowledgebaseRef>,
    pub created_at: Timestamp,
    pub updated_at: Timestamp,
    /// Beyond the spec (issue 41): what a runtime needs beyond the instructions.
    #[serde(flatten)]
    pub settings: Settings,
}

impl Agent {
    /// `knowledgebase` is `None` when it has no (or no longer a) knowledge base.
    pub fn new(agent: &proto::Agent, knowledgebase: Option<KnowledgebaseRef>) -> Self {
        Self {
            id: Id::stored(agent.id.clone()),
            name: agent.name.clone(),
            description: agent.description.clone(),
            kind: AgentKind::from(agent),
            knowledgebase,
            created_at: Timestamp::from_ms(agent.created_at_ms),
            updated_at: Timestamp::from_ms(agent.updated_at_ms),
            settings: agent.settings.as_ref().map(Settings::from).unwrap_or_default(),
        }
    }
}

/// An agent by id, name and type.
#[derive(Serialize, JsonSchema)]
#[schemars(deny_unknown_fields)]
pub struct AgentRef {
    pub id: Id,
    pub name: String,
    #[serde(rename = "type")]
    pub kind: AgentKind,
}

impl From<&proto::Agent> for AgentRef {
    fn from(agent: &proto::Agent) -> Self {
        Self { id: Id::stored(agent.id.clone()), name: agent.name.clone(), kind: AgentKind::from(agent) }
    }
}

/// The build of the runtime prompt from the instructions.
#[derive(Serialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
#[schemars(deny_unknown_fields)]
pub struct PromptOptimization {
    /// State of the latest prompt-optimisation job.
    pub status: JobStatus,
    /// The instructions version that job builds (or last built).
    pub version: u64,
    /// When the job completed; null unless `status` is completed.
    pub completed_at: Option<Timestamp>,
    /// Why the job failed; null unless `status` is failed.
    pub error: Option<String>,
}

/// An agent's instructions.
#[derive(Serialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
#[schemars(deny_unknown_fields)]
pub struct Instructions {
    /// The agent's id.
    pub id: Id,
    /// The agent's name.
    pub name: String,
    /// The current instructions (system prompt); empty when none were ever set.
    pub instructions: String,
    /// Increases by one with each replacement or restore, and with each change of the agent's
    /// runtime settings (one history holds both); 0 when neither was ever set.
    pub version: u64,
    /// When the instructions were last set.
    pub updated_at: Timestamp,
    pub prompt_optimization: PromptOptimization,
}

impl From<&proto::Instructions> for Instructions {
    fn from(instructions: &proto::Instructions) -> Self {
        let optimization = instructions.optimization.clone().unwrap_or_default();
        Self {
            id: Id::stored(instructions.agent_id.clone()),
            name: instructions.agent_name.clone(),
            instructions: instructions.instructions.clone(),
            version: u64::try_from(instructions.version).unwrap_or_default(),
            updated_at: Timestamp::from_ms(instructions.updated_at_ms),
            prompt_optimization: PromptOptimization {
                status: JobStatus::parse(&optimization.status).unwrap_or(JobStatus::Queued),
                version: u64::try_from(optimization.version).unwrap_or_default(),
                completed_at: Timestamp::option(optimization.completed_at_ms),
                error: optimization.error,
            },
        }
    }
}

/// A saved earlier version of an agent's instructions.
#[derive(Serialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
#[schemars(deny_unknown_fields)]
pub struct InstructionVersion {
    #[schemars(range(min = 1))]
    pub version: u64,
    pub instructions: String,
    /// When this text became the agent's instructions.
    pub created_at: Timestamp,
    /// When it was replaced.
    pub replaced_at: Timestamp,
    /// Beyond the spec (issue 41): the runtime settings of this version.
    pub settings: Settings,
}

impl From<&proto::InstructionVersion> for InstructionVersion {
    fn from(version: &proto::InstructionVersion) -> Self {
        Self {
            version: u64::try_from(version.version).unwrap_or_default(),
            instructions: version.instructions.clone(),
            created_at: Timestamp::from_ms(version.created_at_ms),
            replaced_at: Timestamp::from_ms(version.replaced_at_ms),
            settings: version.settings.as_ref().map(Settings::from).unwrap_or_default(),
        }
    }
}

impl From<AgentKind> for AgentType {
    fn from(kind: AgentKind) -> Self {
        match kind {
            AgentKind::Phone => AgentType::Phone,
            AgentKind::Chat => AgentType::Chat,
        }
    }
}
