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

    pub fn doc(mut self, operation_id: &'static str, tag: &'static str, summary: &'static str) -> Self {
        self.operation_id = operation_id;
        self.tag = tag;
        self.summary = summary;
        self
    }
}

/// Every public operation.
pub fn table() -> Vec<Route> {
    use handlers::{agency, identity, users};
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
