//! The public API, one module per resource: each declares its endpoints next to their handlers
//! and the types of their requests and answers. The route table is the union of the modules'
//! endpoints.

pub mod agency;
pub mod agents;
pub mod api_keys;
pub mod auth;
pub mod boards;
pub mod calls;
pub mod chats;
pub mod contacts;
pub mod custom_fields;
pub mod identity;
pub mod knowledge;
pub mod members;
pub mod sources;
pub mod tags;
pub mod usage;
pub mod webhooks;

use crate::endpoint::Endpoint;

/// OpenAPI tags, in the order the spec lists its endpoint groups.
pub mod groups {
    pub const IDENTITY: &str = "Identity";
    pub const AUTH: &str = "Sign-in";
    pub const MEMBERS: &str = "Members";
    pub const AGENTS: &str = "Agents";
    pub const AGENT_KNOWLEDGEBASE: &str = "Agent knowledgebase";
    pub const KNOWLEDGEBASE: &str = "Knowledgebase";
    pub const CALLS: &str = "Calls";
    pub const CHATS: &str = "Chats";
    pub const CONTACTS: &str = "Contacts";
    pub const BOARDS: &str = "Boards";
    pub const TAGS: &str = "Tags";
    pub const AGENCY: &str = "Agency";
    pub const WEBHOOKS: &str = "Webhooks";
}

/// Every public operation.
pub fn endpoints() -> Vec<Endpoint> {
    [
        identity::endpoints(),
        auth::endpoints(),
        members::endpoints(),
        api_keys::endpoints(),
        agents::endpoints(),
        knowledge::endpoints(),
        sources::endpoints(),
        calls::endpoints(),
        chats::endpoints(),
        contacts::endpoints(),
        boards::endpoints(),
        tags::endpoints(),
        agency::endpoints(),
        webhooks::endpoints(),
        usage::endpoints(),
    ]
    .into_iter()
    .flatten()
    .collect()
}
