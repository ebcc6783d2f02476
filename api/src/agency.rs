//! An agency's client subteams.

use schemars::JsonSchema;
use serde::Serialize;
use switchboard_proto::v1 as proto;

use crate::id::Id;
use crate::identity::{Credits, User};
use crate::time::Timestamp;

/// What a subteam's own keys may use (an agency key acting through `teamId` is not limited by it).
#[derive(Serialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
#[schemars(deny_unknown_fields)]
pub struct AccessConfig {
    /// `GET /users`.
    pub users: bool,
    /// Reading agent instructions and their history.
    pub instructions: bool,
    /// Replacing and restoring agent instructions.
    pub instructions_write: bool,
    /// Trying agents: the "Try it" chat (`POST /v1/agents/{agentId}/test-chat`).
    pub testing: bool,
    /// Every knowledge-base operation.
    pub knowledge_base: bool,
    /// Updating and deleting agents.
    pub agent_configuration: bool,
    /// Creating agents.
    pub agent_creation: bool,
    /// Calls and chats.
    pub conversations: bool,
    /// Contacts, boards, tags and custom fields.
    pub crm: bool,
}

/// A client subteam of the agency.
#[derive(Serialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
#[schemars(deny_unknown_fields)]
pub struct Subteam {
    pub id: Id,
    pub name: String,
    pub created_at: Timestamp,
    /// The subteam's monthly credit allowance.
    pub total_monthly_credits: u64,
    pub credits: Credits,
    pub access_config: AccessConfig,
    /// The subteam's users, oldest first.
    pub users: Vec<User>,
    /// In the answer that created the subteam only: the first user's single-use invitation to
    /// the portal (`/invite/{token}`, valid 7 days), for the agency to hand its client.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub invite_url: Option<String>,
}

impl From<&proto::Subteam> for Subteam {
    fn from(subteam: &proto::Subteam) -> Self {
        let team = subteam.team.clone().unwrap_or_default();
        let access = team.access.unwrap_or_default();
        Self {
            id: Id::stored(team.id),
            name: team.name,
            created_at: Timestamp::from_ms(team.created_at_ms),
            total_monthly_credits: u64::try_from(team.monthly_credits).unwrap_or_default(),
            credits: Credits { balance: subteam.credit_balance },
            access_config: AccessConfig {
                users: access.users,
                instructions: access.instructions,
                instructions_write: access.instructions_write,
                testing: access.testing,
                knowledge_base: access.knowledge_base,
                agent_configuration: access.agent_configuration,
                agent_creation: access.agent_creation,
                conversations: access.conversations,
                crm: access.crm,
            },
            users: subteam.users.iter().map(User::from).collect(),
            invite_url: None,
        }
    }
}
