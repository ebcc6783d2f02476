//! The public API as data: one row per operation with its method, path, rate class, the
//! access it needs and its handler. The router, the access checks, and the generated
//! OpenAPI description and MCP tools all read this one table.

use std::future::Future;
use std::pin::Pin;

use switchboard_proto::v1::AccessConfig;

use crate::call::{Call, HandlerResult};
use crate::handlers;
use crate::limits::RateClass;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Method {
    Get,
    Post,
    Put,
    Patch,
    Delete,
}

impl Method {
    pub fn as_str(self) -> &'static str {
        match self {
            Method::Get => "GET",
            Method::Post => "POST",
            Method::Put => "PUT",
            Method::Patch => "PATCH",
            Method::Delete => "DELETE",
        }
    }

    pub fn parse(method: &str) -> Option<Method> {
        Some(match method {
            "GET" | "HEAD" => Method::Get,
            "POST" => Method::Post,
            "PUT" => Method::Put,
            "PATCH" => Method::Patch,
            "DELETE" => Method::Delete,
            _ => return None,
        })
    }
}

/// A feature that a client subteam's access configuration can switch off for its own keys.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Feature {
    Users,
    Instructions,
    InstructionsWrite,
    Testing,
    KnowledgeBase,
    AgentConfiguration,
    AgentCreation,
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
        }
    }
}

/// What a route expects as its request body.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Body {
    None,
    Json,
    /// `multipart/form-data`, up to the upload limit.
    Multipart,
}

pub type HandlerFuture = Pin<Box<dyn Future<Output = HandlerResult> + Send>>;
pub type Handler = fn(Call) -> HandlerFuture;

#[derive(Clone)]
pub struct Route {
    pub method: Method,
    /// Segments in braces are path parameters, e.g. `/v1/agents/{agentId}`.
    pub path: &'static str,
    pub class: RateClass,
    /// Writes are refused to read-only keys.
    pub write: bool,
    pub feature: Option<Feature>,
    pub body: Body,
    /// Accept `X-AGENCY-KEY` as well as `X-API-Key`.
    pub agency_key_header: bool,
    pub handler: Handler,
    pub operation_id: &'static str,
    pub tag: &'static str,
    pub summary: &'static str,
}

impl Route {
    fn new(method: Method, path: &'static str, handler: Handler) -> Self {
        let write = method != Method::Get;
        Self {
            method,
            path,
            class: if write { RateClass::Write } else { RateClass::Standard },
            write,
            feature: None,
            body: if matches!(method, Method::Post | Method::Put | Method::Patch) { Body::Json } else { Body::None },
            agency_key_header: path.starts_with("/v1/agency/"),
            handler,
            operation_id: "",
            tag: "",
            summary: "",
        }
    }

    pub fn get(path: &'static str, handler: Handler) -> Self {
        Self::new(Method::Get, path, handler)
    }

    pub fn post(path: &'static str, handler: Handler) -> Self {
        Self::new(Method::Post, path, handler)
    }

    pub fn put(path: &'static str, handler: Handler) -> Self {
        Self::new(Method::Put, path, handler)
    }

    pub fn delete(path: &'static str, handler: Handler) -> Self {
        Self::new(Method::Delete, path, handler)
    }

    pub fn class(mut self, class: RateClass) -> Self {
        self.class = class;
        self
    }

    pub fn feature(mut self, feature: Feature) -> Self {
        self.feature = Some(feature);
        self
    }

    pub fn multipart(mut self) -> Self {
        self.body = Body::Multipart;
        self
    }

    pub fn doc(mut self, operation_id: &'static str, tag: &'static str, summary: &'static str) -> Self {
        self.operation_id = operation_id;
        self.tag = tag;
        self.summary = summary;
        self
    }
}

/// Every public operation.
pub fn table() -> Vec<Route> {
    use Feature::{AgentConfiguration, AgentCreation, Instructions, InstructionsWrite, KnowledgeBase};
    use handlers::{agency, agents, identity, knowledgebase as kb, sources, users};
    vec![
        Route::get("/v1/me", identity::me).doc(
            "getMe",
            "Identity",
            "The key's team, whether it owns an agency, its credit balance and subscription",
        ),
        Route::get("/v1/users", users::list).feature(Feature::Users).doc(
            "listUsers",
            "Identity",
            "The team's users (their ids are what contact assignments take)",
        ),
        Route::get("/v1/agents", agents::list).doc("listAgents", "Agents", "List agents, newest first"),
        Route::post("/v1/agents", agents::create).feature(AgentCreation).doc(
            "createAgent",
            "Agents",
            "Create an agent",
        ),
        Route::get("/v1/agents/{agentId}", agents::get).doc("getAgent", "Agents", "Get an agent"),
        Route::put("/v1/agents/{agentId}", agents::update).feature(AgentConfiguration).doc(
            "updateAgent",
            "Agents",
            "Rename an agent, change its description or its knowledge base (null unlinks)",
        ),
        Route::delete("/v1/agents/{agentId}", agents::delete).feature(AgentConfiguration).doc(
            "deleteAgent",
            "Agents",
            "Delete an agent with its instructions history",
        ),
        Route::get("/v1/agents/{agentId}/instructions", agents::get_instructions).feature(Instructions).doc(
            "getAgentInstructions",
            "Agents",
            "Get an agent's instructions (system prompt)",
        ),
        Route::put("/v1/agents/{agentId}/instructions", agents::put_instructions).feature(InstructionsWrite).doc(
            "updateAgentInstructions",
            "Agents",
            "Replace an agent's instructions; the previous text goes to the history",
        ),
        Route::get("/v1/agents/{agentId}/instructions/history", agents::history).feature(Instructions).doc(
            "listAgentInstructionsHistory",
            "Agents",
            "The last 20 versions of an agent's instructions, newest first",
        ),
        Route::post("/v1/agents/{agentId}/instructions/history/{version}/restore", agents::restore)
            .feature(InstructionsWrite)
            .doc("restoreAgentInstructions", "Agents", "Make a saved version the current instructions again"),
        Route::get("/v1/agents/{agentId}/knowledgebase", kb::get).feature(KnowledgeBase).doc(
            "getAgentKnowledgebase",
            "Agent knowledgebase",
            "The agent's knowledge base",
        ),
        Route::get("/v1/agents/{agentId}/knowledgebase/search", kb::search)
            .class(RateClass::Search)
            .feature(KnowledgeBase)
            .doc(
                "searchAgentKnowledgebase",
                "Agent knowledgebase",
                "Semantic search in the agent's knowledge base (1 credit)",
            ),
        Route::post("/v1/agents/{agentId}/knowledgebase/references", kb::create_reference).feature(KnowledgeBase).doc(
            "createAgentReference",
            "Agent knowledgebase",
            "Add a Q&A reference to the agent's knowledge base",
        ),
        Route::get("/v1/agents/{agentId}/knowledgebase/references/{referenceId}", kb::get_reference)
            .feature(KnowledgeBase)
            .doc("getAgentReference", "Agent knowledgebase", "Get a Q&A reference"),
        Route::put("/v1/agents/{agentId}/knowledgebase/references/{referenceId}", kb::update_reference)
            .feature(KnowledgeBase)
            .doc("updateAgentReference", "Agent knowledgebase", "Update a Q&A reference"),
        Route::delete("/v1/agents/{agentId}/knowledgebase/references/{referenceId}", kb::delete_reference)
            .feature(KnowledgeBase)
            .doc("deleteAgentReference", "Agent knowledgebase", "Delete a Q&A reference"),
        Route::get("/v1/knowledgebase", kb::list).feature(KnowledgeBase).doc(
            "listKnowledgebases",
            "Knowledgebase",
            "The team's knowledge bases",
        ),
        Route::post("/v1/knowledgebase", kb::create).feature(KnowledgeBase).doc(
            "createKnowledgebase",
            "Knowledgebase",
            "Create a knowledge base",
        ),
        Route::get("/v1/knowledgebase/{knowledgebaseId}", kb::get).feature(KnowledgeBase).doc(
            "getKnowledgebase",
            "Knowledgebase",
            "A knowledge base with its webpages, documents and manual references",
        ),
        Route::put("/v1/knowledgebase/{knowledgebaseId}", kb::update).feature(KnowledgeBase).doc(
            "updateKnowledgebase",
            "Knowledgebase",
            "Rename a knowledge base or change its description",
        ),
        Route::delete("/v1/knowledgebase/{knowledgebaseId}", kb::delete).feature(KnowledgeBase).doc(
            "deleteKnowledgebase",
            "Knowledgebase",
            "Delete a knowledge base and all its content",
        ),
        Route::get("/v1/knowledgebase/{knowledgebaseId}/search", kb::search)
            .class(RateClass::Search)
            .feature(KnowledgeBase)
            .doc("searchKnowledgebase", "Knowledgebase", "Semantic search in a knowledge base (1 credit)"),
        Route::post("/v1/knowledgebase/{knowledgebaseId}/references", kb::create_reference).feature(KnowledgeBase).doc(
            "createReference",
            "Knowledgebase",
            "Add a Q&A reference",
        ),
        Route::get("/v1/knowledgebase/{knowledgebaseId}/references/{referenceId}", kb::get_reference)
            .feature(KnowledgeBase)
            .doc("getReference", "Knowledgebase", "Get a Q&A reference"),
        Route::put("/v1/knowledgebase/{knowledgebaseId}/references/{referenceId}", kb::update_reference)
            .feature(KnowledgeBase)
            .doc("updateReference", "Knowledgebase", "Update a Q&A reference"),
        Route::delete("/v1/knowledgebase/{knowledgebaseId}/references/{referenceId}", kb::delete_reference)
            .feature(KnowledgeBase)
            .doc("deleteReference", "Knowledgebase", "Delete a Q&A reference"),
        Route::post("/v1/agents/{agentId}/knowledgebase/webpages", sources::create_webpage).feature(KnowledgeBase).doc(
            "createAgentWebpage",
            "Agent knowledgebase",
            "Add a webpage; its first scrape is queued",
        ),
        Route::get("/v1/agents/{agentId}/knowledgebase/webpages/{webpageId}", sources::get_webpage)
            .feature(KnowledgeBase)
            .doc("getAgentWebpage", "Agent knowledgebase", "A webpage with the Q&A content extracted from it"),
        Route::put("/v1/agents/{agentId}/knowledgebase/webpages/{webpageId}", sources::update_webpage)
            .feature(KnowledgeBase)
            .doc("updateAgentWebpage", "Agent knowledgebase", "Change a webpage's name, url or notes (no re-scrape)"),
        Route::delete("/v1/agents/{agentId}/knowledgebase/webpages/{webpageId}", sources::delete_webpage)
            .feature(KnowledgeBase)
            .doc("deleteAgentWebpage", "Agent knowledgebase", "Remove a webpage and its content"),
        Route::post("/v1/agents/{agentId}/knowledgebase/webpages/{webpageId}/refresh", sources::refresh_webpage)
            .feature(KnowledgeBase)
            .doc("refreshAgentWebpage", "Agent knowledgebase", "Re-scrape a webpage (once per 24 hours)"),
        Route::post("/v1/agents/{agentId}/knowledgebase/documents", sources::upload_document)
            .multipart()
            .feature(KnowledgeBase)
            .doc("uploadAgentDocument", "Agent knowledgebase", "Upload a document; its text is extracted by a job"),
        Route::get("/v1/agents/{agentId}/knowledgebase/documents/{documentId}", sources::get_document)
            .feature(KnowledgeBase)
            .doc("getAgentDocument", "Agent knowledgebase", "A document with the Q&A content extracted from it"),
        Route::put("/v1/agents/{agentId}/knowledgebase/documents/{documentId}", sources::update_document)
            .feature(KnowledgeBase)
            .doc("updateAgentDocument", "Agent knowledgebase", "Change a document's name or notes"),
        Route::delete("/v1/agents/{agentId}/knowledgebase/documents/{documentId}", sources::delete_document)
            .feature(KnowledgeBase)
            .doc("deleteAgentDocument", "Agent knowledgebase", "Remove a document, its file and its content"),
        Route::post("/v1/knowledgebase/{knowledgebaseId}/webpages", sources::create_webpage)
            .feature(KnowledgeBase)
            .doc("createWebpage", "Knowledgebase", "Add a webpage; its first scrape is queued"),
        Route::get("/v1/knowledgebase/{knowledgebaseId}/webpages/{webpageId}", sources::get_webpage)
            .feature(KnowledgeBase)
            .doc("getWebpage", "Knowledgebase", "A webpage with the Q&A content extracted from it"),
        Route::put("/v1/knowledgebase/{knowledgebaseId}/webpages/{webpageId}", sources::update_webpage)
            .feature(KnowledgeBase)
            .doc("updateWebpage", "Knowledgebase", "Change a webpage's name, url or notes (no re-scrape)"),
        Route::delete("/v1/knowledgebase/{knowledgebaseId}/webpages/{webpageId}", sources::delete_webpage)
            .feature(KnowledgeBase)
            .doc("deleteWebpage", "Knowledgebase", "Remove a webpage and its content"),
        Route::post("/v1/knowledgebase/{knowledgebaseId}/webpages/{webpageId}/refresh", sources::refresh_webpage)
            .feature(KnowledgeBase)
            .doc("refreshWebpage", "Knowledgebase", "Re-scrape a webpage (once per 24 hours)"),
        Route::post("/v1/knowledgebase/{knowledgebaseId}/documents", sources::upload_document)
            .multipart()
            .feature(KnowledgeBase)
            .doc("uploadDocument", "Knowledgebase", "Upload a document; its text is extracted by a job"),
        Route::get("/v1/knowledgebase/{knowledgebaseId}/documents/{documentId}", sources::get_document)
            .feature(KnowledgeBase)
            .doc("getDocument", "Knowledgebase", "A document with the Q&A content extracted from it"),
        Route::put("/v1/knowledgebase/{knowledgebaseId}/documents/{documentId}", sources::update_document)
            .feature(KnowledgeBase)
            .doc("updateDocument", "Knowledgebase", "Change a document's name or notes"),
        Route::delete("/v1/knowledgebase/{knowledgebaseId}/documents/{documentId}", sources::delete_document)
            .feature(KnowledgeBase)
            .doc("deleteDocument", "Knowledgebase", "Remove a document, its file and its content"),
        Route::get("/v1/agency/subteams", agency::list_subteams).doc(
            "listSubteams",
            "Agency",
            "List the agency's client subteams",
        ),
        Route::post("/v1/agency/subteams", agency::create_subteam).doc(
            "createSubteam",
            "Agency",
            "Create a client subteam with its first user and monthly credits",
        ),
    ]
}
