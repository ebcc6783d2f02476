//! `/knowledgebase/...` and `/agents/{agentId}/knowledgebase/...`: knowledge bases, their Q&A
//! references and search. An operation on both paths has one handler, generic over its path
//! type; [`target`] works out which knowledge base is meant.

use schemars::JsonSchema;
use serde::Deserialize;
use switchboard_api::agents::AgentRef;
use switchboard_api::knowledge::{
    AgentKnowledgebase, AgentSearchAnswer, AgentSearchMeta, Knowledgebase, KnowledgebaseSummary, SearchAnswer,
    SearchMeta, SearchResult,
};
use switchboard_api::references::{BulkReferences, Reference};
use switchboard_kit::vocabulary::AuditAction;
use switchboard_kit::{ServiceError, ServiceResult, limits};
use switchboard_proto::v1::{
    self as proto, BulkCreateReferencesRequest, CreateKnowledgebaseRequest, CreateReferenceRequest,
    GetKnowledgebaseRequest, GetReferenceRequest, ListKnowledgebasesRequest, ReferenceText, SearchRequest,
    UpdateKnowledgebaseRequest, UpdateReferenceRequest,
};

use super::agents::{AgentPath, fetch_agent};
use super::groups::{AGENT_KNOWLEDGEBASE, KNOWLEDGEBASE};
use crate::call::Call;
use crate::config::RateClass;
use crate::endpoint::bulk::{BulkBody, BulkItem, Items};
use crate::endpoint::{Answer, Created, Data, Endpoint, Id, Input, Json, List, Nothing, Patch, Updated, serialized};
use crate::reply::Reply;

const THROUGH_AGENT: &str = "Agent not found, Agent has no knowledgebase assigned, or Knowledgebase not found";
const KNOWLEDGEBASE_GONE: &str = "Knowledgebase not found";
const SEARCH_DESCRIPTION: &str = "Semantic search in a knowledge base, given an agentId (its knowledge base) or a \
    knowledgebaseId. Costs 1 credit.";
const ANSWER_DESCRIPTION: &str = "Adds a Q&A reference to a knowledge base, given an agentId (its knowledge base) or \
    a knowledgebaseId; searchable at once.";
const ONE_ANSWER_413: &str = "The answer makes more passages than a request may give the encoder (1,000 by default, \
    `SWITCHBOARD_EMBED_PASSAGES_PER_REQUEST`; one answer makes at most about 200, so only a platform that lowers the \
    bound answers this); nothing is written.";
/// Said on every operation that embeds for the team; the figures are `limits`' defaults (a test
/// checks them).
const BUDGET_SPENT: &str = "The team's embedding budget is spent: at most 6,000 passages a minute (by default; \
    `SWITCHBOARD_EMBED_PASSAGES_PER_MINUTE`) are embedded for a team, every replica together, counted on every path \
    that embeds for it (single and bulk creates, updates that change a text, webpages and documents). An answer is \
    one passage per 128 words. `retryAfter` and `Retry-After` say when the budget is full again; nothing is written.";

pub fn endpoints() -> Vec<Endpoint> {
    vec![
        Endpoint::get("/v1/agents/{agentId}/knowledgebase", get_through_agent)
            .doc("getAgentKnowledgebase", AGENT_KNOWLEDGEBASE, "The agent's knowledge base")
            .gives("referenceId", "/data/knowledgebase/references/0/id")
            .gives("webpageId", "/data/knowledgebase/webpages/0/id")
            .gives("documentId", "/data/knowledgebase/documents/0/id")
            .about("The agent (as a reference) and its linked knowledge base with its webpages, documents and manual references.")
            .fails(404, THROUGH_AGENT),
        Endpoint::get("/v1/agents/{agentId}/knowledgebase/search", search_through_agent)
            .doc("searchAgentKnowledgebase", AGENT_KNOWLEDGEBASE, "Semantic search in the agent's knowledge base (1 credit)")
            .about(
                "Best match first: hybrid retrieval, the entries found by meaning (embeddings of the entries' \
                 passages) and by words (BM25) merged by reciprocal rank fusion: in descending order of each result's `relevance`, not always of \
                 its `similarity` (which `threshold` floors). Costs 1 credit from the team acted on, taken by the knowledgebase service only \
                 after the parameters, the agent and the knowledge base check out, and given back if the search \
                 fails; `meta` also names the agent and its knowledge base.",
            )
            .class(RateClass::Search)
            .spends_credits(limits::SEARCH_CREDITS)
            .fails(402, "Insufficient credits: the team's balance has no credit left; nothing is charged.")
            .fails(404, THROUGH_AGENT)
            .tool("search_knowledge", SEARCH_DESCRIPTION),
        Endpoint::post("/v1/agents/{agentId}/knowledgebase/references", create_reference::<AgentPath>)
            .audited(AuditAction::ReferenceCreated)
            .doc("createAgentReference", AGENT_KNOWLEDGEBASE, "Add a Q&A reference to the agent's knowledge base")
            .creates("referenceId")
            .about(CREATE_REFERENCE)
            .fails(404, THROUGH_AGENT)
            .fails(413, ONE_ANSWER_413)
            .fails(429, BUDGET_SPENT)
            .tool("add_knowledge_answer", ANSWER_DESCRIPTION),
        Endpoint::get("/v1/agents/{agentId}/knowledgebase/references/{referenceId}", get_reference::<AgentItem>)
            .doc("getAgentReference", AGENT_KNOWLEDGEBASE, "Get a Q&A reference")
            .about("A manual reference, or an entry extracted from a webpage or document.")
            .fails(404, "Agent not found, Agent has no knowledgebase assigned, Knowledgebase not found, or Reference not found"),
        Endpoint::put("/v1/agents/{agentId}/knowledgebase/references/{referenceId}", update_reference::<AgentItem>)
            .audited(AuditAction::ReferenceUpdated)
            .doc("updateAgentReference", AGENT_KNOWLEDGEBASE, "Update a Q&A reference")
            .about(UPDATE_REFERENCE)
            .fails(404, "Agent not found, Agent has no knowledgebase assigned, Knowledgebase not found, or Reference not found")
            .fails(409, CHANGE_EXTRACTED)
            .fails(413, ONE_ANSWER_413)
            .fails(429, BUDGET_SPENT),
        Endpoint::delete("/v1/agents/{agentId}/knowledgebase/references/{referenceId}", delete_reference::<AgentItem>)
            .audited(AuditAction::ReferenceDeleted)
            .doc("deleteAgentReference", AGENT_KNOWLEDGEBASE, "Delete a Q&A reference")
            .about(DELETE_REFERENCE)
            .fails(404, "Agent not found, Agent has no knowledgebase assigned, Knowledgebase not found, or Reference not found")
            .fails(409, "This entry was extracted from a webpage or document."),
        Endpoint::get("/v1/knowledgebase", list)
            .doc("listKnowledgebases", KNOWLEDGEBASE, "The team's knowledge bases")
            .lists("knowledgebaseId")
            .about("Beyond the spec: newest first, with counts of their webpages, documents and manual references; not paged."),
        Endpoint::post("/v1/knowledgebase", create)
            .audited(AuditAction::KnowledgebaseCreated)
            .doc("createKnowledgebase", KNOWLEDGEBASE, "Create a knowledge base")
            .creates("knowledgebaseId")
            .about("Beyond the spec: an empty knowledge base."),
        Endpoint::get("/v1/knowledgebase/{knowledgebaseId}", get)
            .doc("getKnowledgebase", KNOWLEDGEBASE, "A knowledge base with its webpages, documents and manual references")
            .gives("referenceId", "/data/references/0/id")
            .gives("webpageId", "/data/webpages/0/id")
            .gives("documentId", "/data/documents/0/id")
            .about("Extracted entries are in each source's detail view.")
            .fails(404, KNOWLEDGEBASE_GONE),
        Endpoint::put("/v1/knowledgebase/{knowledgebaseId}", update)
            .audited(AuditAction::KnowledgebaseUpdated)
            .doc("updateKnowledgebase", KNOWLEDGEBASE, "Rename a knowledge base or change its description")
            .about("Beyond the spec: a partial update (`null` clears the description); answers with its content.")
            .fails(404, KNOWLEDGEBASE_GONE),
        Endpoint::delete("/v1/knowledgebase/{knowledgebaseId}", delete)
            .audited(AuditAction::KnowledgebaseDeleted)
            .doc("deleteKnowledgebase", KNOWLEDGEBASE, "Delete a knowledge base and all its content")
            .about(
                "Beyond the spec: deletes the knowledge base with its references, webpages, documents and uploaded \
                 files; the knowledgebase service unlinks the agents linked to it (a job that retries until the \
                 agents service has done it). `data` is the knowledge base as it was, with empty content lists.",
            )
            .fails(404, KNOWLEDGEBASE_GONE),
        Endpoint::get("/v1/knowledgebase/{knowledgebaseId}/search", search)
            .doc("searchKnowledgebase", KNOWLEDGEBASE, "Semantic search in a knowledge base (1 credit)")
            .about(
                "Best match first: hybrid retrieval, the entries found by meaning (embeddings of the entries' \
                 passages) and by words (BM25) merged by reciprocal rank fusion: in descending order of each result's `relevance`, not always of \
                 its `similarity` (which `threshold` floors). Costs 1 credit from the team acted on, taken by the knowledgebase service only \
                 after the parameters and the knowledge base check out, and given back if the search fails.",
            )
            .class(RateClass::Search)
            .spends_credits(limits::SEARCH_CREDITS)
            .fails(402, "Insufficient credits: the team's balance has no credit left; nothing is charged.")
            .fails(404, KNOWLEDGEBASE_GONE)
            .tool("search_knowledge", SEARCH_DESCRIPTION),
        Endpoint::post("/v1/knowledgebase/{knowledgebaseId}/references", create_reference::<KnowledgebasePath>)
            .audited(AuditAction::ReferenceCreated)
            .doc("createReference", KNOWLEDGEBASE, "Add a Q&A reference")
            .creates("referenceId")
            .about(CREATE_REFERENCE)
            .fails(404, KNOWLEDGEBASE_GONE)
            .fails(413, ONE_ANSWER_413)
            .fails(429, BUDGET_SPENT)
            .tool("add_knowledge_answer", ANSWER_DESCRIPTION),
        Endpoint::post("/v1/knowledgebase/{knowledgebaseId}/references/bulk", bulk_create_references)
            .audited(AuditAction::ReferencesImported)
            .doc("bulkCreateReferences", KNOWLEDGEBASE, "Add up to 1,000 Q&A references; each is checked and written alone")
            .about(
                "Counts in the bulk rate class and costs no credits: the encoder's time is bounded instead. Each item \
                 is a `createReference` body, checked and written on its own: a bad item is listed in `failed` (by \
                 its index in `references`, with the code and details `createReference` would answer) and never \
                 blocks the others. The written ones are embedded together and are searchable when the answer comes; \
                 the request may take minutes (up to 10, beyond the gateway's usual timeout). An answer is embedded \
                 as one passage per 128 words (at least one): the valid items may make at most 1,000 passages \
                 (`SWITCHBOARD_EMBED_PASSAGES_PER_REQUEST`, never above the minute's budget), and they are spent \
                 from the team's 6,000 passages a minute (`SWITCHBOARD_EMBED_PASSAGES_PER_MINUTE`, every replica \
                 together, shared with every other path that embeds for the team); past either bound the request is \
                 refused whole and nothing is written. The team's passages take turns with other teams' in the \
                 encoder's queue. With an `Idempotency-Key`, a retry creates nothing twice.",
            )
            .class(RateClass::Bulk)
            .body_limit(BULK_REFERENCES_BYTES)
            .fails(404, KNOWLEDGEBASE_GONE)
            .fails(
                413,
                "The body is larger than 32 MiB (or the gateway's limit, `SWITCHBOARD_MAX_BODY_BYTES`, if larger), or \
                 the valid items make more passages than a request may (1,000 by default): the error names the bound \
                 and the count, in `error` and in `details` on `references`; nothing is written.",
            )
            .fails(429, BUDGET_SPENT),
        Endpoint::get("/v1/knowledgebase/{knowledgebaseId}/references/{referenceId}", get_reference::<KnowledgebaseItem>)
            .doc("getReference", KNOWLEDGEBASE, "Get a Q&A reference")
            .about("A manual reference, or an entry extracted from a webpage or document.")
            .fails(404, "Knowledgebase not found, or Reference not found"),
        Endpoint::put("/v1/knowledgebase/{knowledgebaseId}/references/{referenceId}", update_reference::<KnowledgebaseItem>)
            .audited(AuditAction::ReferenceUpdated)
            .doc("updateReference", KNOWLEDGEBASE, "Update a Q&A reference")
            .about(UPDATE_REFERENCE)
            .fails(404, "Knowledgebase not found, or Reference not found")
            .fails(409, CHANGE_EXTRACTED)
            .fails(413, ONE_ANSWER_413)
            .fails(429, BUDGET_SPENT),
        Endpoint::delete("/v1/knowledgebase/{knowledgebaseId}/references/{referenceId}", delete_reference::<KnowledgebaseItem>)
            .audited(AuditAction::ReferenceDeleted)
            .doc("deleteReference", KNOWLEDGEBASE, "Delete a Q&A reference")
            .about(DELETE_REFERENCE)
            .fails(404, "Knowledgebase not found, or Reference not found")
            .fails(409, "This entry was extracted from a webpage or document."),
    ]
}

const UPDATE_REFERENCE: &str = "A partial update of a manual reference; it is re-embedded when its text changes \
    (its passages spent from the team's embedding budget). Entries extracted from webpages and documents cannot be \
    changed here (409).";
const CREATE_REFERENCE: &str = "A manual Q&A reference, embedded before the answer: searchable at once. Costs no \
    credits; its passages (one per 128 words of the answer) are spent from the team's embedding budget.";
const DELETE_REFERENCE: &str = "Beyond the spec: deletes a manual reference; it leaves search at once. Entries \
    extracted from webpages and documents cannot be deleted here (409).";
const CHANGE_EXTRACTED: &str = "This entry was extracted from a webpage or document (change its source instead), or \
    The reference kept changing while it was being updated (retry).";

/// A knowledge base's id in the path.
#[derive(Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct KnowledgebasePath {
    pub knowledgebase_id: Id,
}

/// A reference of the agent's knowledge base.
#[derive(Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct AgentItem {
    pub agent_id: Id,
    pub reference_id: Id,
}

/// A reference of a knowledge base.
#[derive(Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct KnowledgebaseItem {
    pub knowledgebase_id: Id,
    pub reference_id: Id,
}

/// How a path names a knowledge base: through an agent, or by its id.
pub enum Address<'a> {
    Agent(&'a Id),
    Knowledgebase(&'a Id),
}

pub trait Addressed: Send + Sync + 'static {
    fn address(&self) -> Address<'_>;
}

/// A path that also names one thing in the knowledge base.
pub trait ItemPath: Addressed {
    fn item(&self) -> &Id;
}

impl Addressed for AgentPath {
    fn address(&self) -> Address<'_> {
        Address::Agent(&self.agent_id)
    }
}

impl Addressed for KnowledgebasePath {
    fn address(&self) -> Address<'_> {
        Address::Knowledgebase(&self.knowledgebase_id)
    }
}

impl Addressed for AgentItem {
    fn address(&self) -> Address<'_> {
        Address::Agent(&self.agent_id)
    }
}

impl ItemPath for AgentItem {
    fn item(&self) -> &Id {
        &self.reference_id
    }
}

impl Addressed for KnowledgebaseItem {
    fn address(&self) -> Address<'_> {
        Address::Knowledgebase(&self.knowledgebase_id)
    }
}

impl ItemPath for KnowledgebaseItem {
    fn item(&self) -> &Id {
        &self.reference_id
    }
}

/// The knowledge base a request is about, and the agent it was reached through.
pub struct Target {
    pub knowledgebase_id: String,
    pub agent: Option<proto::Agent>,
}

pub async fn target(call: &Call, address: Address<'_>) -> ServiceResult<Target> {
    match address {
        Address::Knowledgebase(id) => Ok(Target { knowledgebase_id: id.to_string(), agent: None }),
        Address::Agent(agent_id) => {
            let agent = fetch_agent(call, agent_id).await?;
            let knowledgebase_id = agent
                .knowledgebase_id
                .clone()
                .ok_or_else(|| ServiceError::not_found("Agent has no knowledgebase assigned"))?;
            Ok(Target { knowledgebase_id, agent: Some(agent) })
        }
    }
}

/// Other members are ignored.
#[derive(Deserialize, JsonSchema)]
pub struct CreateKnowledgebase {
    /// Not blank.
    #[schemars(length(min = limits::NAME.min, max = limits::NAME.max))]
    pub name: String,
    /// Null or absent: none.
    #[schemars(length(max = limits::DESCRIPTION.max))]
    pub description: Option<String>,
}

/// A partial update. Other members are ignored.
#[derive(Deserialize, JsonSchema)]
pub struct UpdateKnowledgebase {
    /// Not blank; absent or null keeps it.
    #[schemars(length(min = limits::NAME.min, max = limits::NAME.max))]
    pub name: Option<String>,
    /// Absent keeps it, null clears it.
    #[serde(default)]
    #[schemars(length(max = limits::DESCRIPTION.max))]
    pub description: Patch<String>,
}

/// Other members are ignored.
#[derive(Deserialize, JsonSchema)]
pub struct CreateReference {
    /// Not blank.
    #[schemars(length(min = limits::QUESTION.min, max = limits::QUESTION.max))]
    pub question: String,
    /// Not blank.
    #[schemars(length(min = limits::ANSWER.min, max = limits::ANSWER.max))]
    pub answer: String,
}

impl BulkBody for CreateReference {
    const ITEM: &'static str = "BulkReference";
    const SINGLE: &'static str = "createReference";
}

/// The largest body of a bulk create of references: 1,000 of 32 KiB each on average, beyond the
/// gateway's 2 MiB sized for single writes. (One answer may be 50,000 characters: a bulk of such
/// long ones is sent in several requests.)
const BULK_REFERENCES_BYTES: usize = 32 << 20;

/// Other members are ignored.
#[derive(Deserialize, JsonSchema)]
pub struct BulkCreateReferences {
    #[schemars(length(min = limits::BULK_REFERENCES.min, max = limits::BULK_REFERENCES.max))]
    pub references: Vec<BulkItem<CreateReference>>,
}

/// A partial update. Other members are ignored.
#[derive(Deserialize, JsonSchema)]
pub struct UpdateReference {
    /// Not blank; absent or null keeps it.
    #[schemars(length(min = limits::QUESTION.min, max = limits::QUESTION.max))]
    pub question: Option<String>,
    /// Not blank; absent or null keeps it.
    #[schemars(length(min = limits::ANSWER.min, max = limits::ANSWER.max))]
    pub answer: Option<String>,
}

fn default_limit() -> u32 {
    u32::try_from(limits::SEARCH_LIMIT.default).unwrap_or(10)
}

fn default_threshold() -> f64 {
    limits::SEARCH_THRESHOLD.default
}

/// The parameters of a search.
#[derive(Deserialize, JsonSchema)]
pub struct SearchQuery {
    /// The text to search for (not blank).
    #[schemars(length(min = limits::SEARCH_QUERY.min, max = limits::SEARCH_QUERY.max))]
    pub query: String,
    /// Most results to return.
    #[serde(default = "default_limit")]
    #[schemars(range(min = limits::SEARCH_LIMIT.min, max = limits::SEARCH_LIMIT.max))]
    pub limit: u32,
    /// Minimum cosine similarity of a result.
    #[serde(default = "default_threshold")]
    #[schemars(range(min = limits::SEARCH_THRESHOLD.min, max = limits::SEARCH_THRESHOLD.max))]
    pub threshold: f64,
}

impl Answer for SearchAnswer {
    const STATUS: u16 = 200;

    fn into_reply(self) -> Reply {
        serialized(Self::STATUS, &self)
    }
}

impl Answer for AgentSearchAnswer {
    const STATUS: u16 = 200;

    fn into_reply(self) -> Reply {
        serialized(Self::STATUS, &self)
    }
}

async fn fetch_knowledgebase(
    call: &Call,
    knowledgebase_id: &str,
    include_content: bool,
) -> ServiceResult<proto::Knowledgebase> {
    let request = GetKnowledgebaseRequest {
        team_id: call.team_id().to_owned(),
        knowledgebase_id: knowledgebase_id.to_owned(),
        include_content,
    };
    Ok(call.services.knowledgebase.clone().get_knowledgebase(request).await?.into_inner())
}

async fn list(call: Call, _: Input) -> ServiceResult<List<KnowledgebaseSummary>> {
    let request = ListKnowledgebasesRequest { team_id: call.team_id().to_owned(), ids: Vec::new() };
    let knowledgebases = call.services.knowledgebase.clone().list_knowledgebases(request).await?.into_inner();
    Ok(List::new(knowledgebases.knowledgebases.iter().map(KnowledgebaseSummary::from).collect()))
}

async fn create(
    call: Call,
    input: Input<Nothing, Nothing, Json<CreateKnowledgebase>>,
) -> ServiceResult<Created<Knowledgebase>> {
    let Json(body) = input.body;
    let request = CreateKnowledgebaseRequest {
        team_id: call.team_id().to_owned(),
        name: body.name,
        description: body.description,
    };
    let created = call.services.knowledgebase.clone().create_knowledgebase(request).await?.into_inner();
    Ok(Created::new(Knowledgebase::from(&created), "Knowledgebase created successfully"))
}

async fn get(call: Call, input: Input<KnowledgebasePath>) -> ServiceResult<Data<Knowledgebase>> {
    let knowledgebase = fetch_knowledgebase(&call, input.path.knowledgebase_id.as_str(), true).await?;
    Ok(Data::new(Knowledgebase::from(&knowledgebase)))
}

async fn get_through_agent(call: Call, input: Input<AgentPath>) -> ServiceResult<Data<AgentKnowledgebase>> {
    let target = target(&call, input.path.address()).await?;
    let knowledgebase = fetch_knowledgebase(&call, &target.knowledgebase_id, true).await?;
    let agent = target.agent.as_ref().map(AgentRef::from).ok_or_else(ServiceError::agent_not_found)?;
    Ok(Data::new(AgentKnowledgebase { agent, knowledgebase: Knowledgebase::from(&knowledgebase) }))
}

async fn update(
    call: Call,
    input: Input<KnowledgebasePath, Nothing, Json<UpdateKnowledgebase>>,
) -> ServiceResult<Updated<Knowledgebase>> {
    let Json(body) = input.body;
    let request = UpdateKnowledgebaseRequest {
        team_id: call.team_id().to_owned(),
        knowledgebase_id: input.path.knowledgebase_id.into_string(),
        name: body.name,
        clear_description: body.description == Patch::Null,
        description: body.description.value(),
    };
    let updated = call.services.knowledgebase.clone().update_knowledgebase(request).await?.into_inner();
    let updated = fetch_knowledgebase(&call, &updated.id, true).await?;
    Ok(Updated::new(Knowledgebase::from(&updated), "Knowledgebase updated successfully"))
}

async fn delete(call: Call, input: Input<KnowledgebasePath>) -> ServiceResult<Updated<Knowledgebase>> {
    let request = GetKnowledgebaseRequest {
        team_id: call.team_id().to_owned(),
        knowledgebase_id: input.path.knowledgebase_id.into_string(),
        include_content: false,
    };
    let deleted = call.services.knowledgebase.clone().delete_knowledgebase(request).await?.into_inner();
    Ok(Updated::new(Knowledgebase::from(&deleted), "Knowledgebase deleted successfully"))
}

/// The search itself, on either path; the knowledgebase service charges the credit.
async fn run_search(
    call: &Call,
    knowledgebase_id: &str,
    query: &SearchQuery,
) -> ServiceResult<(Vec<SearchResult>, i64)> {
    let request = SearchRequest {
        team_id: call.team_id().to_owned(),
        knowledgebase_id: knowledgebase_id.to_owned(),
        query: query.query.clone(),
        limit: query.limit,
        // The service searches in f32; the bound check already ran on the f64.
        #[allow(clippy::cast_possible_truncation)]
        threshold: query.threshold as f32,
    };
    let searched = call.services.knowledgebase.clone().search(request).await?.into_inner();
    let ranked = (1..).zip(&searched.hits).map(|(rank, hit)| SearchResult::ranked(rank, hit));
    Ok((ranked.collect(), searched.credits_used))
}

async fn search(call: Call, input: Input<KnowledgebasePath, SearchQuery>) -> ServiceResult<SearchAnswer> {
    let (data, credits_used) = run_search(&call, input.path.knowledgebase_id.as_str(), &input.query).await?;
    let SearchQuery { query, limit, threshold } = input.query;
    let meta = SearchMeta { query, result_count: data.len() as u64, limit, threshold, credits_used };
    Ok(SearchAnswer { data, meta })
}

async fn search_through_agent(call: Call, input: Input<AgentPath, SearchQuery>) -> ServiceResult<AgentSearchAnswer> {
    let target = target(&call, input.path.address()).await?;
    let agent = target.agent.clone().unwrap_or_default();
    let (data, credits_used) = run_search(&call, &target.knowledgebase_id, &input.query).await?;
    let SearchQuery { query, limit, threshold } = input.query;
    let meta = AgentSearchMeta {
        query,
        result_count: data.len() as u64,
        limit,
        threshold,
        credits_used,
        agent_id: Id::stored(agent.id),
        agent_name: Some(agent.name),
        knowledgebase_id: Id::stored(target.knowledgebase_id),
    };
    Ok(AgentSearchAnswer { data, meta })
}

fn reference_request(call: &Call, target: Target, reference_id: &Id) -> GetReferenceRequest {
    GetReferenceRequest {
        team_id: call.team_id().to_owned(),
        knowledgebase_id: target.knowledgebase_id,
        reference_id: reference_id.to_string(),
    }
}

async fn create_reference<P: Addressed + crate::endpoint::input::Params>(
    call: Call,
    input: Input<P, Nothing, Json<CreateReference>>,
) -> ServiceResult<Created<Reference>> {
    let target = target(&call, input.path.address()).await?;
    let Json(body) = input.body;
    let request = CreateReferenceRequest {
        team_id: call.team_id().to_owned(),
        knowledgebase_id: target.knowledgebase_id,
        question: body.question,
        answer: body.answer,
    };
    let reference = call.services.knowledgebase.clone().create_reference(request).await?.into_inner();
    Ok(Created::new(Reference::from(&reference), "Reference created successfully"))
}

async fn bulk_create_references(
    call: Call,
    input: Input<KnowledgebasePath, Nothing, Json<BulkCreateReferences>>,
) -> ServiceResult<Data<BulkReferences>> {
    let target = target(&call, input.path.address()).await?;
    let mut items = Items::read(input.body.0.references);
    let mut created = Vec::new();
    let mut failed = Vec::new();
    if !items.parsed.is_empty() {
        let references = std::mem::take(&mut items.parsed)
            .into_iter()
            .map(|item| ReferenceText { question: item.question, answer: item.answer })
            .collect();
        let request = BulkCreateReferencesRequest {
            team_id: call.team_id().to_owned(),
            knowledgebase_id: target.knowledgebase_id,
            references,
        };
        let answer = call.services.knowledgebase_bulk.clone().bulk_create_references(request).await?.into_inner();
        created = answer.created.iter().map(Reference::from).collect();
        failed = answer.failed;
    }
    Ok(Data::new(BulkReferences { created, failed: items.failures(failed) }))
}

async fn get_reference<P: ItemPath + crate::endpoint::input::Params>(
    call: Call,
    input: Input<P>,
) -> ServiceResult<Data<Reference>> {
    let target = target(&call, input.path.address()).await?;
    let request = reference_request(&call, target, input.path.item());
    let reference = call.services.knowledgebase.clone().get_reference(request).await?.into_inner();
    Ok(Data::new(Reference::from(&reference)))
}

async fn update_reference<P: ItemPath + crate::endpoint::input::Params>(
    call: Call,
    input: Input<P, Nothing, Json<UpdateReference>>,
) -> ServiceResult<Updated<Reference>> {
    let target = target(&call, input.path.address()).await?;
    let Json(body) = input.body;
    let request = UpdateReferenceRequest {
        team_id: call.team_id().to_owned(),
        knowledgebase_id: target.knowledgebase_id,
        reference_id: input.path.item().to_string(),
        question: body.question,
        answer: body.answer,
    };
    let reference = call.services.knowledgebase.clone().update_reference(request).await?.into_inner();
    Ok(Updated::new(Reference::from(&reference), "Reference updated successfully"))
}

async fn delete_reference<P: ItemPath + crate::endpoint::input::Params>(
    call: Call,
    input: Input<P>,
) -> ServiceResult<Updated<Reference>> {
    let target = target(&call, input.path.address()).await?;
    let request = reference_request(&call, target, input.path.item());
    let reference = call.services.knowledgebase.clone().delete_reference(request).await?.into_inner();
    Ok(Updated::new(Reference::from(&reference), "Reference deleted successfully"))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The published bounds are the service's defaults.
    #[test]
    fn the_descriptions_name_the_embedding_bounds_in_force_by_default() {
        let thousands = |n: i64| {
            let digits = n.to_string();
            let mut out = String::new();
            for (i, c) in digits.chars().enumerate() {
                if i > 0 && (digits.len() - i).is_multiple_of(3) {
                    out.push(',');
                }
                out.push(c);
            }
            out
        };
        let per_minute = format!("{} passages a minute", thousands(limits::EMBED_PASSAGES_PER_MINUTE));
        assert!(BUDGET_SPENT.contains(&per_minute), "{BUDGET_SPENT}");
        let bulk = endpoints().into_iter().find(|e| e.operation_id == "bulkCreateReferences").unwrap();
        let per_request = format!("at most {} passages", thousands(limits::EMBED_PASSAGES_PER_REQUEST));
        assert!(bulk.description.contains(&per_request), "{}", bulk.description);
        assert!(bulk.description.contains(&per_minute), "{}", bulk.description);
    }
}
