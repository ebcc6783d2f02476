//! An endpoint, declared once: its method and typed path, rate class, access feature, MCP
//! tool, documentation and handler sit in one [`Endpoint`] next to the handler. Its path,
//! query, body and answer are Rust types; their JSON Schemas validate requests (every violated
//! field reported), describe the operation in the OpenAPI document and give MCP tools their
//! input schema. The route table, the OpenAPI document, the MCP tools and the skill file's
//! endpoint table are all read off the endpoints.

pub mod answer;
pub mod bulk;
pub mod check;

pub mod input;
pub mod schema;

use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;

use schemars::Schema;
use switchboard_kit::ServiceResult;
use switchboard_kit::vocabulary::AuditAction;

pub use answer::{Accepted, Answer, Created, Data, List, Page, Rendered, Updated, WithCookie, serialized};
pub use input::{BodyKind, Form, Id, IdList, Input, Json, NoBody, Nothing, Patch, RawInput, RequestBody};

use crate::call::Call;
use crate::config::RateClass;
use crate::reply::HandlerResult;
use input::{InputSchemas, Params};
use schema::Generators;

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

    /// The key of an OpenAPI path item.
    pub fn key(self) -> &'static str {
        match self {
            Method::Get => "get",
            Method::Post => "post",
            Method::Put => "put",
            Method::Patch => "patch",
            Method::Delete => "delete",
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

/// A setting of a client subteam's access configuration; what each governs is one table,
/// [`switchboard_api::access::TABLE`].
pub use switchboard_api::access::Feature;

/// An error answer an operation documents beyond the ones every operation can give.
#[derive(Debug, Clone)]
pub struct Failure {
    pub status: u16,
    pub description: &'static str,
}

/// A path parameter of other operations whose value an answer of this one holds: what the
/// OpenAPI document publishes as `links`, so that a client (or a stateful fuzzer) can follow
/// a create or a list to the operations on what it made or listed.
#[derive(Debug, Clone, Copy)]
pub struct Gives {
    /// The path parameter, e.g. `agentId`.
    pub parameter: &'static str,
    /// Where the answer holds its value (a JSON pointer into the body), e.g. `/data/id`.
    pub pointer: &'static str,
}

/// The MCP tool an endpoint backs. Two endpoints may back one tool (a knowledge base reached
/// through its agent or by its id): the call's arguments pick the one whose path they fill.
#[derive(Debug, Clone)]
pub struct Tool {
    pub name: &'static str,
    pub description: &'static str,
    pub annotations: ToolHints,
}

/// The MCP annotations of a tool, all four said explicitly. By default they follow the method:
/// GET reads, PUT and DELETE destroy what was there, only POST is not idempotent; no tool
/// reaches outside Switchboard.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ToolHints {
    pub read_only: bool,
    pub destructive: bool,
    pub idempotent: bool,
    pub open_world: bool,
}

impl ToolHints {
    pub fn of(method: Method) -> Self {
        Self {
            read_only: method == Method::Get,
            destructive: matches!(method, Method::Put | Method::Delete),
            idempotent: method != Method::Post,
            open_world: false,
        }
    }
}

pub type HandlerFuture = Pin<Box<dyn Future<Output = HandlerResult> + Send>>;
type Runner = Arc<dyn Fn(Call, RawInput) -> HandlerFuture + Send + Sync>;

/// A success an operation gives besides its main answer, with its own status and schema (a
/// sign-in that asks for a second factor answers 202, not 200).
#[derive(Clone)]
pub struct AlsoAnswer {
    pub status: u16,
    pub description: &'static str,
    pub schema: fn(&mut Generators) -> Schema,
}

fn answer_schema<R: Answer>(generators: &mut Generators) -> Schema {
    generators.answer::<R>()
}

/// What the OpenAPI document says of an endpoint's body and answer.
pub struct Described {
    pub request: Option<Schema>,
    pub status: u16,
    pub answer: Schema,
    pub media_type: &'static str,
}

#[derive(Clone)]
pub struct Endpoint {
    pub method: Method,
    /// Segments in braces are path parameters, e.g. `/v1/agents/{agentId}`; their types are
    /// the members of the handler's path type.
    pub path: &'static str,
    pub operation_id: &'static str,
    pub tag: &'static str,
    pub summary: &'static str,
    pub description: &'static str,
    pub class: RateClass,
    /// Refused to read-only keys: every write, and the reads marked `needs_full_access`.
    pub write: bool,
    /// The `accessConfig` setting that governs it, read off [`switchboard_api::access::TABLE`].
    pub feature: Option<Feature>,
    /// Accept `X-AGENCY-KEY` as well as `X-API-Key`.
    pub agency_key_header: bool,
    /// Served without a credential: what a visitor does before signing in. Rate-limited per
    /// client address, never given a team.
    pub visitor: bool,
    /// Refused to signed-in members and viewers: it manages the team (keys, members,
    /// webhooks, the audit log). Keys are held to `write` alone.
    pub admins_only: bool,
    /// The signed-in person's own account (names, e-mail, factors, password, sessions): any
    /// role may, no API key may.
    pub own_account: bool,
    /// Part of signing in or of the session itself (`/v1/auth/*`: sign-in, sign-up, reset,
    /// the session, its factors and passkeys, re-authentication, SSO): open to a person whose
    /// team requires a second factor they have not set up, and never answered again for an
    /// `Idempotency-Key`, since its answers carry session tokens and secrets.
    pub session_flow: bool,
    /// Changes how the person proves who they are (factors, sessions): only from a session
    /// that did so lately, its sign-in or `POST /v1/auth/reauthenticate` (ASVS 3.7.1).
    pub recent_sign_in: bool,
    /// Written to the team's audit log under this action when it succeeds.
    pub audit: Option<AuditAction>,
    /// Not a GET, yet it changes nothing of the team's data (the "Try it" chat): not audited.
    pub changes_nothing: bool,
    /// Its success answers a secret that is shown once (a key, a link that lets someone in): an
    /// `Idempotency-Key` replay must not show it again, so the answer is never kept.
    pub shows_secret: bool,
    /// Spends the team's credits: signed in by the cookie, even a GET needs the CSRF header.
    pub spends_credits: bool,
    /// The credits it takes each time: the amount its service debits (`GET /v1/credits/prices`).
    pub price: i64,
    pub body: BodyKind,
    /// The largest JSON body it takes, when it needs more than the gateway's limit.
    pub body_limit: Option<usize>,
    pub failures: Vec<Failure>,
    pub also_answers: Vec<AlsoAnswer>,
    pub tool: Option<Tool>,
    pub gives: Vec<Gives>,
    pub inputs: Arc<InputSchemas>,
    describe: fn(&mut Generators) -> Described,
    run: Runner,
}

fn describe<B: RequestBody, R: Answer>(generators: &mut Generators) -> Described {
    Described {
        request: B::describe(generators),
        status: R::STATUS,
        answer: generators.answer::<R>(),
        media_type: R::MEDIA_TYPE,
    }
}

impl Endpoint {
    /// An endpoint served by `handler`; its input and answer types are the handler's.
    pub fn new<P, Q, B, R, F, Fut>(method: Method, path: &'static str, handler: F) -> Self
    where
        P: Params,
        Q: Params,
        B: RequestBody,
        R: Answer,
        F: Fn(Call, Input<P, Q, B>) -> Fut + Copy + Send + Sync + 'static,
        Fut: Future<Output = ServiceResult<R>> + Send + 'static,
    {
        let inputs = Arc::new(Input::<P, Q, B>::schemas());
        let schemas = inputs.clone();
        let run: Runner = Arc::new(move |call: Call, raw: RawInput| {
            let schemas = schemas.clone();
            Box::pin(async move {
                let input = Input::<P, Q, B>::extract(&schemas, raw, call.max_upload_bytes).await?;
                Ok(handler(call, input).await?.into_reply())
            })
        });
        let write = method != Method::Get;
        Self {
            method,
            path,
            operation_id: "",
            tag: "",
            summary: "",
            description: "",
            class: if write { RateClass::Write } else { RateClass::Standard },
            write,
            // From the one table of what each setting governs, so that no declaration can forget it.
            feature: switchboard_api::access::feature_of_operation(method.as_str(), path),
            agency_key_header: path.starts_with("/v1/agency/"),
            visitor: false,
            admins_only: false,
            own_account: false,
            session_flow: false,
            recent_sign_in: false,
            audit: None,
            changes_nothing: false,
            shows_secret: false,
            spends_credits: false,
            price: 0,
            body: B::KIND,
            body_limit: None,
            failures: Vec::new(),
            also_answers: Vec::new(),
            tool: None,
            gives: Vec::new(),
            inputs,
            describe: describe::<B, R>,
            run,
        }
    }

    pub fn get<P: Params, Q: Params, R: Answer, F, Fut>(path: &'static str, handler: F) -> Self
    where
        F: Fn(Call, Input<P, Q, NoBody>) -> Fut + Copy + Send + Sync + 'static,
        Fut: Future<Output = ServiceResult<R>> + Send + 'static,
    {
        Self::new(Method::Get, path, handler)
    }

    pub fn post<P: Params, Q: Params, B: RequestBody, R: Answer, F, Fut>(path: &'static str, handler: F) -> Self
    where
        F: Fn(Call, Input<P, Q, B>) -> Fut + Copy + Send + Sync + 'static,
        Fut: Future<Output = ServiceResult<R>> + Send + 'static,
    {
        Self::new(Method::Post, path, handler)
    }

    pub fn put<P: Params, Q: Params, B: RequestBody, R: Answer, F, Fut>(path: &'static str, handler: F) -> Self
    where
        F: Fn(Call, Input<P, Q, B>) -> Fut + Copy + Send + Sync + 'static,
        Fut: Future<Output = ServiceResult<R>> + Send + 'static,
    {
        Self::new(Method::Put, path, handler)
    }

    pub fn patch<P: Params, Q: Params, B: RequestBody, R: Answer, F, Fut>(path: &'static str, handler: F) -> Self
    where
        F: Fn(Call, Input<P, Q, B>) -> Fut + Copy + Send + Sync + 'static,
        Fut: Future<Output = ServiceResult<R>> + Send + 'static,
    {
        Self::new(Method::Patch, path, handler)
    }

    pub fn delete<P: Params, Q: Params, R: Answer, F, Fut>(path: &'static str, handler: F) -> Self
    where
        F: Fn(Call, Input<P, Q, NoBody>) -> Fut + Copy + Send + Sync + 'static,
        Fut: Future<Output = ServiceResult<R>> + Send + 'static,
    {
        Self::new(Method::Delete, path, handler)
    }

    /// Its operation id, OpenAPI tag and one-line summary.
    pub fn doc(mut self, operation_id: &'static str, tag: &'static str, summary: &'static str) -> Self {
        self.operation_id = operation_id;
        self.tag = tag;
        self.summary = summary;
        self
    }

    /// What the operation does beyond its summary.
    pub fn about(mut self, description: &'static str) -> Self {
        self.description = description;
        self
    }

    pub fn class(mut self, class: RateClass) -> Self {
        self.class = class;
        self
    }

    /// Refused to read-only keys even though it changes nothing: it shows what only those who
    /// administer the team should see.
    pub fn needs_full_access(mut self) -> Self {
        self.write = true;
        self
    }

    /// Served to visitors, with no credential (sign-in and what comes before it).
    pub fn for_visitors(mut self) -> Self {
        self.visitor = true;
        self.class = RateClass::Auth;
        self
    }

    /// Only owners and admins, when signed in (keys: see `write`).
    pub fn for_admins(mut self) -> Self {
        self.admins_only = true;
        self
    }

    /// The caller's own account: a person of any role (a viewer too) changes it, a key never
    /// does; it is a person's, not the team's.
    pub fn for_own_account(mut self) -> Self {
        self.own_account = true;
        self
    }

    /// The caller's own account, and a change to how they prove who they are: refused (403
    /// `REAUTHENTICATION_REQUIRED`) unless their session proved it in the last few minutes.
    pub fn for_recent_sign_in(mut self) -> Self {
        self.own_account = true;
        self.recent_sign_in = true;
        self
    }

    /// Part of signing in or of the session itself: see [`Endpoint::session_flow`].
    pub fn in_session_flow(mut self) -> Self {
        self.session_flow = true;
        self
    }

    /// Whether a repeat with the same `Idempotency-Key` gets the kept answer: writes, but not
    /// a visitor's (no team to keep it for), the session flow's, nor those that change nothing.
    pub fn keeps_idempotent_answers(&self) -> bool {
        self.method != Method::Get && !self.visitor && !self.session_flow && !self.changes_nothing
    }

    /// Answers without changing the team's data, though it is not a GET: not audited.
    pub fn changes_nothing(mut self) -> Self {
        self.changes_nothing = true;
        self
    }

    /// Recorded in the audit log as `action` when it succeeds.
    pub fn audited(mut self, action: AuditAction) -> Self {
        self.audit = Some(action);
        self
    }

    /// Spends `credits` each time (see [`Endpoint::spends_credits`]): the constant its service
    /// debits by, so that the price list cannot drift from what is charged.
    pub fn spends_credits(mut self, credits: i64) -> Self {
        self.spends_credits = true;
        self.price = credits;
        self
    }

    /// Its success answers a secret shown once (see [`Endpoint::shows_secret`]).
    pub fn shows_secret_once(mut self) -> Self {
        self.shows_secret = true;
        self
    }

    /// Takes JSON bodies of up to `bytes` (or the gateway's limit, if larger), for an operation
    /// whose valid bodies can be larger than that limit.
    pub fn body_limit(mut self, bytes: usize) -> Self {
        self.body_limit = Some(bytes);
        self
    }

    /// An error answer of this operation, e.g. `404` with the texts it can carry.
    pub fn fails(mut self, status: u16, description: &'static str) -> Self {
        self.failures.push(Failure { status, description });
        self
    }

    /// Also answers `R` (with its own status) when `description` says so.
    pub fn also_answers<R: Answer>(mut self, description: &'static str) -> Self {
        self.also_answers.push(AlsoAnswer { status: R::STATUS, description, schema: answer_schema::<R> });
        self
    }

    /// Backs the MCP tool `name`, with annotations that follow the method.
    pub fn tool(self, name: &'static str, description: &'static str) -> Self {
        let annotations = ToolHints::of(self.method);
        self.tool_annotated(name, description, annotations)
    }

    /// Backs the MCP tool `name`, with annotations of its own where the method's would say
    /// something untrue of it.
    pub fn tool_annotated(mut self, name: &'static str, description: &'static str, annotations: ToolHints) -> Self {
        self.tool = Some(Tool { name, description, annotations });
        self
    }

    /// Its answer's `data.id` is the `parameter` of the operations on what it created.
    pub fn creates(self, parameter: &'static str) -> Self {
        self.gives(parameter, "/data/id")
    }

    /// The first listed item's id is the `parameter` of the operations on that item.
    pub fn lists(self, parameter: &'static str) -> Self {
        self.gives(parameter, "/data/0/id")
    }

    /// Its answer holds the value of `parameter` at `pointer`.
    pub fn gives(mut self, parameter: &'static str, pointer: &'static str) -> Self {
        self.gives.push(Gives { parameter, pointer });
        self
    }

    pub fn describe(&self, generators: &mut Generators) -> Described {
        (self.describe)(generators)
    }

    /// Checks the input, runs the handler and renders its answer.
    pub fn run(&self, call: Call, raw: RawInput) -> HandlerFuture {
        (self.run)(call, raw)
    }

    /// The names of the path parameters, in path order.
    pub fn path_parameters(&self) -> impl Iterator<Item = &'static str> {
        self.path.split('/').filter_map(|segment| segment.strip_prefix('{').and_then(|s| s.strip_suffix('}')))
    }
}
