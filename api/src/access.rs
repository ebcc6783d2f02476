//! What each setting of a client subteam's `accessConfig` governs: the operations it switches
//! off for the subteam's own keys and people, and the webhook event types its webhooks may
//! subscribe to and receive. One table, [`TABLE`], and one `match`, [`feature_of_event`], read
//! by the gateway (REST and MCP share its admission) and by the webhooks service
//! (deliveries), so that an operation and the events that tell of the same data are never
//! governed apart.
//!
//! Every operation is either governed here or named in [`UNGOVERNED_OPERATIONS`]; the
//! gateway's tests walk the declared operations against both, so a new endpoint cannot be left
//! out by accident. Event types are governed by [`feature_of_event`], a `match` the compiler
//! keeps complete.

use switchboard_kit::vocabulary::EventType;
use switchboard_proto::v1::{AccessConfig, Team};

/// A setting of `accessConfig`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Feature {
    Users,
    Instructions,
    InstructionsWrite,
    Testing,
    KnowledgeBase,
    AgentConfiguration,
    AgentCreation,
    Conversations,
    Crm,
}

impl Feature {
    /// The name used in `accessConfig`.
    pub fn name(self) -> &'static str {
        match self {
            Feature::Users => "users",
            Feature::Instructions => "instructions",
            Feature::InstructionsWrite => "instructionsWrite",
            Feature::Testing => "testing",
            Feature::KnowledgeBase => "knowledgeBase",
            Feature::AgentConfiguration => "agentConfiguration",
            Feature::AgentCreation => "agentCreation",
            Feature::Conversations => "conversations",
            Feature::Crm => "crm",
        }
    }

    pub fn allowed_by(self, access: &AccessConfig) -> bool {
        match self {
            Feature::Users => access.users,
            Feature::Instructions => access.instructions,
            Feature::InstructionsWrite => access.instructions_write,
            Feature::Testing => access.testing,
            Feature::KnowledgeBase => access.knowledge_base,
            Feature::AgentConfiguration => access.agent_configuration,
            Feature::AgentCreation => access.agent_creation,
            Feature::Conversations => access.conversations,
            Feature::Crm => access.crm,
        }
    }

    /// Whether `team` may use this feature: always, unless it is a client subteam whose access
    /// configuration switches it off.
    pub fn allowed_for(self, team: &Team) -> bool {
        match (&team.parent_team_id, &team.access) {
            (Some(_), Some(access)) => self.allowed_by(access),
            _ => true,
        }
    }
}

/// One setting and what it governs.
#[derive(Debug)]
pub struct Governs {
    pub feature: Feature,
    /// `METHOD /path` as the operation is declared; `*` for any method, and a path ending in
    /// `/**` for the path and everything under it.
    pub operations: &'static [&'static str],
}

pub const TABLE: [Governs; 9] = [
    Governs {
        feature: Feature::Users,
        // Members, their e-mails and roles, their invitations, and the log of what they did.
        operations: &["GET /v1/users", "* /v1/members/**", "GET /v1/audit-log"],
    },
    Governs {
        feature: Feature::Instructions,
        operations: &[
            "GET /v1/agents/{agentId}/instructions",
            "GET /v1/agents/{agentId}/instructions/history",
            "GET /v1/agents/{agentId}/instructions/history/{version}",
        ],
    },
    Governs {
        feature: Feature::InstructionsWrite,
        operations: &[
            "PUT /v1/agents/{agentId}/instructions",
            "POST /v1/agents/{agentId}/instructions/history/{version}/restore",
        ],
    },
    Governs { feature: Feature::Testing, operations: &["POST /v1/agents/{agentId}/test-chat"] },
    Governs {
        feature: Feature::KnowledgeBase,
        operations: &["* /v1/knowledgebase/**", "* /v1/agents/{agentId}/knowledgebase/**"],
    },
    Governs {
        feature: Feature::AgentConfiguration,
        operations: &["PUT /v1/agents/{agentId}", "DELETE /v1/agents/{agentId}"],
    },
    Governs { feature: Feature::AgentCreation, operations: &["POST /v1/agents"] },
    Governs {
        feature: Feature::Conversations,
        operations: &["* /v1/calls/**", "* /v1/chats/**", "GET /v1/analytics/calls"],
    },
    Governs { feature: Feature::Crm, operations: &["* /v1/contacts/**", "* /v1/boards/**", "* /v1/tags/**"] },
];

/// Operations no setting governs, and why.
pub const UNGOVERNED_OPERATIONS: &[(&str, &str)] = &[
    ("* /v1/me/**", "who the caller is, and a person's own name and e-mail address"),
    ("* /v1/auth/**", "signing in and out, one's own session and password"),
    ("GET /v1/agents", "listing agents: the spec gates only their creation and configuration"),
    ("GET /v1/agents/{agentId}", "reading an agent: the spec gates only its creation and configuration"),
    ("* /v1/api-keys/**", "the team's keys are the team's own, whatever it may use"),
    ("* /v1/agency/**", "the agency's own subteams (a subteam owns no agency)"),
    ("* /v1/webhooks/**", "endpoints themselves; the event types they take are governed"),
    ("* /v1/credits/**", "the team's balance alert"),
    ("GET /v1/usage", "the team's own credit usage"),
];

/// Whether the operation pattern `pattern` (an entry of [`TABLE`] or [`UNGOVERNED_OPERATIONS`])
/// covers `method` on the declared `path`.
pub fn covers(pattern: &str, method: &str, path: &str) -> bool {
    let Some((wanted, template)) = pattern.split_once(' ') else { return false };
    if wanted != "*" && wanted != method {
        return false;
    }
    match template.strip_suffix("/**") {
        Some(root) => path == root || path.strip_prefix(root).is_some_and(|rest| rest.starts_with('/')),
        None => path == template,
    }
}

/// The setting that governs `method` on the declared `path`, if any.
pub fn feature_of_operation(method: &str, path: &str) -> Option<Feature> {
    TABLE
        .iter()
        .find(|governs| governs.operations.iter().any(|pattern| covers(pattern, method, path)))
        .map(|governs| governs.feature)
}

/// Whether no setting governs the operation, by a reasoned entry of [`UNGOVERNED_OPERATIONS`].
pub fn is_ungoverned_operation(method: &str, path: &str) -> bool {
    UNGOVERNED_OPERATIONS.iter().any(|(pattern, _)| covers(pattern, method, path))
}

/// The setting that governs webhook events of type `event`: those whose payloads show what
/// the setting hides. A `match`, so that a new event type cannot be left out.
pub fn feature_of_event(event: EventType) -> Option<Feature> {
    match event {
        // Its payload is the instructions themselves.
        EventType::AgentInstructionsUpdated => Some(Feature::Instructions),
        EventType::WebpageReady | EventType::WebpageFailed | EventType::DocumentReady | EventType::DocumentFailed => {
            Some(Feature::KnowledgeBase)
        }
        EventType::CallEnded | EventType::ChatEnded => Some(Feature::Conversations),
        EventType::ContactCreated | EventType::ContactUpdated | EventType::ContactDeleted => Some(Feature::Crm),
        // An agency's event; subteams own no agency.
        EventType::SubteamCreated => None,
        // The team's own balance.
        EventType::CreditsLow => None,
    }
}

/// The setting that governs an event named `kind`; none for a name that is no [`EventType`]
/// (`webhook.test`, sent on request to one endpoint).
pub fn feature_of_event_named(kind: &str) -> Option<Feature> {
    EventType::parse(kind).and_then(feature_of_event)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn patterns_cover_their_method_and_their_subtree_only() {
        assert!(covers("* /v1/contacts/**", "GET", "/v1/contacts"));
        assert!(covers("* /v1/contacts/**", "DELETE", "/v1/contacts/{contactId}/notes/{noteId}"));
        assert!(!covers("* /v1/contacts/**", "GET", "/v1/contactsx"));
        assert!(covers("GET /v1/users", "GET", "/v1/users"));
        assert!(!covers("GET /v1/users", "POST", "/v1/users"));
        assert!(!covers("PUT /v1/agents/{agentId}", "PUT", "/v1/agents/{agentId}/instructions"));
    }

    #[test]
    fn events_are_governed_with_the_operations_that_show_the_same_data() {
        assert_eq!(feature_of_event_named("call.ended"), Some(Feature::Conversations));
        assert_eq!(feature_of_event_named("contact.deleted"), Some(Feature::Crm));
        assert_eq!(feature_of_event_named("document.failed"), Some(Feature::KnowledgeBase));
        assert_eq!(feature_of_event_named("agent.instructions.updated"), Some(Feature::Instructions));
        assert_eq!(feature_of_event_named("credits.low"), None);
        assert_eq!(feature_of_event_named("webhook.test"), None, "sent on request, to one endpoint");
    }

    #[test]
    fn no_setting_governs_what_another_does() {
        for (index, governs) in TABLE.iter().enumerate() {
            for other in &TABLE[index + 1..] {
                for pattern in governs.operations {
                    assert!(!other.operations.contains(pattern), "{pattern} in two settings");
                }
            }
        }
    }

    #[test]
    fn a_subteam_is_held_to_its_settings_and_other_teams_are_not() {
        let off = AccessConfig { crm: false, ..AccessConfig::default() };
        let subteam = Team { parent_team_id: Some("agency".into()), access: Some(off), ..Team::default() };
        assert!(!Feature::Crm.allowed_for(&subteam));
        let own = Team { access: Some(off), ..Team::default() };
        assert!(Feature::Crm.allowed_for(&own), "a team that is no subteam has no access configuration to obey");
    }
}
