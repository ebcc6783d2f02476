//! Webpages and documents of a knowledge base, on both the agent-addressed and the
//! knowledgebase-addressed paths (see [`super::knowledge::target`]).
//!
//! One path for both kinds where they are the same thing: the address (agent or knowledge
//! base) is resolved once by `target`, and every handler is generic over it. The handlers stay
//! one per kind because the kinds differ where it counts: a webpage is created from JSON and
//! a document from a multipart upload, only a webpage has a URL, a refresh interval and a
//! refresh, and each calls its own RPC with its own message. What they share in the store
//! (their kind, owner, patch, status turns and events) is `switchboard_knowledgebase::store`'s
//! `sources` and `transitions`.

use schemars::JsonSchema;
use serde::Deserialize;
use switchboard_api::sources::{Document, DocumentDetail, Webpage, WebpageDetail, WebpageRefresh};
use switchboard_kit::vocabulary::{AuditAction, SourceStatus};
use switchboard_kit::{ServiceResult, limits};
use switchboard_proto::v1::{
    CreateWebpageRequest, GetSourceRequest, UpdateDocumentRequest, UpdateWebpageRequest, UploadDocumentRequest,
};

use super::agents::AgentPath;
use super::groups::{AGENT_KNOWLEDGEBASE, KNOWLEDGEBASE};
use super::knowledge::{Address, Addressed, ItemPath, KnowledgebasePath, Target, target};
use crate::call::Call;
use crate::endpoint::input::Params;
use crate::endpoint::{Created, Data, Endpoint, Form, Id, Input, Json, NoBody, Nothing, Patch, Updated};
use switchboard_api::references::Reference;

const THROUGH_AGENT: &str = "Agent not found, Agent has no knowledgebase assigned, or Knowledgebase not found";
const UPLOAD_413: &str = "The file is larger than the upload limit (20 MiB by default, \
    `SWITCHBOARD_MAX_UPLOAD_BYTES`), or the whole form is larger than that limit plus 64 KiB.";
const UPLOAD_415: &str = "Content-Type must be multipart/form-data, or Unsupported file type (the file name's \
    extension is not a supported one; `hint` lists them).";
const UPLOAD_422: &str = "The file cannot be read: empty, not UTF-8 text, not really what its extension says, or \
    without text; `hint` says why. Nothing is stored.";
const UPLOAD_503: &str = "File storage is unavailable; retry the upload later.";
const REFRESH_409: &str = "Webpage is already being refreshed (its status is pending or refreshing).";
const REFRESH_429: &str = "Webpage was refreshed within the last 24 hours (with `nextAvailableAt`, `retryAfter` and \
    `resetAt`), or the team's write rate limit was reached.";

/// The endpoints of one kind of source on one path family: `base` is
/// `/v1/agents/{agentId}/knowledgebase` or `/v1/knowledgebase/{knowledgebaseId}`.
pub fn endpoints() -> Vec<Endpoint> {
    let mut all = Vec::new();
    all.extend(webpages::<AgentPath, AgentWebpage>(WEBPAGES_THROUGH_AGENT, AGENT_KNOWLEDGEBASE, THROUGH_AGENT));
    all.extend(documents::<AgentPath, AgentDocument>(DOCUMENTS_THROUGH_AGENT, AGENT_KNOWLEDGEBASE, THROUGH_AGENT));
    all.extend(webpages::<KnowledgebasePath, KnowledgebaseWebpage>(WEBPAGES, KNOWLEDGEBASE, "Knowledgebase not found"));
    all.extend(documents::<KnowledgebasePath, KnowledgebaseDocument>(
        DOCUMENTS,
        KNOWLEDGEBASE,
        "Knowledgebase not found",
    ));
    all
}

const DUPLICATE_PAGE_409: &str = "Another webpage of the knowledge base has this URL, or one that differs only by its \
    `#fragment`, the case of its scheme or host, or a default port: the same page, whose entries would show twice \
    in search.";

/// Paths and operation ids of one family.
struct Family {
    collection: &'static str,
    item: &'static str,
    refresh: &'static str,
    ids: [&'static str; 5],
    item_missing: &'static str,
}

const WEBPAGES_THROUGH_AGENT: Family = Family {
    collection: "/v1/agents/{agentId}/knowledgebase/webpages",
    item: "/v1/agents/{agentId}/knowledgebase/webpages/{webpageId}",
    refresh: "/v1/agents/{agentId}/knowledgebase/webpages/{webpageId}/refresh",
    ids: ["createAgentWebpage", "getAgentWebpage", "updateAgentWebpage", "deleteAgentWebpage", "refreshAgentWebpage"],
    item_missing: "Agent not found, Agent has no knowledgebase assigned, Knowledgebase not found, or Webpage not found",
};
const WEBPAGES: Family = Family {
    collection: "/v1/knowledgebase/{knowledgebaseId}/webpages",
    item: "/v1/knowledgebase/{knowledgebaseId}/webpages/{webpageId}",
    refresh: "/v1/knowledgebase/{knowledgebaseId}/webpages/{webpageId}/refresh",
    ids: ["createWebpage", "getWebpage", "updateWebpage", "deleteWebpage", "refreshWebpage"],
    item_missing: "Knowledgebase not found, or Webpage not found",
};
const DOCUMENTS_THROUGH_AGENT: Family = Family {
    collection: "/v1/agents/{agentId}/knowledgebase/documents",
    item: "/v1/agents/{agentId}/knowledgebase/documents/{documentId}",
    refresh: "",
    ids: ["uploadAgentDocument", "getAgentDocument", "updateAgentDocument", "deleteAgentDocument", ""],
    item_missing: "Agent not found, Agent has no knowledgebase assigned, Knowledgebase not found, or Document not found",
};
const DOCUMENTS: Family = Family {
    collection: "/v1/knowledgebase/{knowledgebaseId}/documents",
    item: "/v1/knowledgebase/{knowledgebaseId}/documents/{documentId}",
    refresh: "",
    ids: ["uploadDocument", "getDocument", "updateDocument", "deleteDocument", ""],
    item_missing: "Knowledgebase not found, or Document not found",
};

fn webpages<B, I>(family: Family, tag: &'static str, base_missing: &'static str) -> Vec<Endpoint>
where
    B: Addressed + Params,
    I: ItemPath + Params,
{
    let [create, get, update, delete, refresh] = family.ids;
    vec![
        Endpoint::post(family.collection, create_webpage::<B>)
            .audited(AuditAction::WebpageCreated)
            .doc(create, tag, "Add a webpage; its first scrape is queued")
            .creates("webpageId")
            .about(
                "Beyond the spec: adds a webpage source with status `pending`; its first scrape is queued in the \
                 same transaction (it does not count as a refresh). The entries' passages are spent from the team's \
                 embedding budget (6,000 passages a minute by default, shared with references): a page that makes \
                 more stays `pending` while its scrape waits for the budget.",
            )
            .fails(404, base_missing)
            .fails(409, DUPLICATE_PAGE_409),
        Endpoint::get(family.item, get_webpage::<I>)
            .doc(get, tag, "A webpage with the Q&A content extracted from it")
            .fails(404, family.item_missing),
        Endpoint::put(family.item, update_webpage::<I>)
            .audited(AuditAction::WebpageUpdated)
            .doc(update, tag, "Change a webpage's name, url or notes (no re-scrape)")
            .about("A partial update (`null` clears the notes); a new url is not scraped until the next refresh.")
            .fails(404, family.item_missing)
            .fails(409, DUPLICATE_PAGE_409),
        Endpoint::delete(family.item, delete_webpage::<I>)
            .audited(AuditAction::WebpageDeleted)
            .doc(delete, tag, "Remove a webpage and its content")
            .about("Beyond the spec: its extracted entries leave search before the answer.")
            .fails(404, family.item_missing),
        Endpoint::post(family.refresh, refresh_webpage::<I>)
            .audited(AuditAction::WebpageRefreshed)
            .doc(refresh, tag, "Re-scrape a webpage (once per 24 hours)")
            .about(
                "Queues a re-scrape and turns the webpage `refreshing`; takes no body. At most one accepted refresh \
                 per webpage per 24 hours (the first scrape after adding does not count), never while a scrape is \
                 under way; the write rate limit applies first.",
            )
            .fails(404, family.item_missing)
            .fails(409, REFRESH_409)
            .fails(429, REFRESH_429),
    ]
    .into_iter()
    .collect()
}

fn documents<B, I>(family: Family, tag: &'static str, base_missing: &'static str) -> Vec<Endpoint>
where
    B: Addressed + Params,
    I: ItemPath + Params,
{
    let [upload, get, update, delete, _] = family.ids;
    vec![
        Endpoint::post(family.collection, upload_document::<B>)
            .audited(AuditAction::DocumentUploaded)
            .doc(upload, tag, "Upload a document; its text is extracted by a job")
            .creates("documentId")
            .about(
                "Beyond the spec: a multipart form. The file is parsed before anything is stored; it is then kept \
                 and its text extraction queued (status `pending`). A form without a `file` part, or whose file has \
                 no file name, is a 400 naming `file`. The entries' passages are spent from the team's embedding \
                 budget (6,000 passages a minute by default, shared with references): a document that makes more \
                 stays `pending` while its extraction waits for the budget.",
            )
            .fails(404, base_missing)
            .fails(413, UPLOAD_413)
            .fails(415, UPLOAD_415)
            .fails(422, UPLOAD_422)
            .fails(503, UPLOAD_503),
        Endpoint::get(family.item, get_document::<I>)
            .doc(get, tag, "A document with the Q&A content extracted from it")
            .fails(404, family.item_missing),
        Endpoint::put(family.item, update_document::<I>)
            .audited(AuditAction::DocumentUpdated)
            .doc(update, tag, "Change a document's name or notes")
            .about("A partial update (`null` clears the notes); the file itself never changes.")
            .fails(404, family.item_missing),
        Endpoint::delete(family.item, delete_document::<I>)
            .audited(AuditAction::DocumentDeleted)
            .doc(delete, tag, "Remove a document, its file and its content")
            .fails(404, family.item_missing),
    ]
    .into_iter()
    .collect()
}

macro_rules! item_path {
    ($name:ident, $base:ident, $base_variant:ident, $item:ident, $doc:literal) => {
        #[doc = $doc]
        #[derive(Deserialize, JsonSchema)]
        #[serde(rename_all = "camelCase")]
        pub struct $name {
            pub $base: Id,
            pub $item: Id,
        }

        impl Addressed for $name {
            fn address(&self) -> Address<'_> {
                Address::$base_variant(&self.$base)
            }
        }

        impl ItemPath for $name {
            fn item(&self) -> &Id {
                &self.$item
            }
        }
    };
}

item_path!(AgentWebpage, agent_id, Agent, webpage_id, "A webpage of the agent's knowledge base.");
item_path!(KnowledgebaseWebpage, knowledgebase_id, Knowledgebase, webpage_id, "A webpage of a knowledge base.");
item_path!(AgentDocument, agent_id, Agent, document_id, "A document of the agent's knowledge base.");
item_path!(KnowledgebaseDocument, knowledgebase_id, Knowledgebase, document_id, "A document of a knowledge base.");

/// Other members are ignored.
#[derive(Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct CreateWebpage {
    /// Display name (not blank).
    #[schemars(length(min = limits::NAME.min, max = limits::NAME.max))]
    pub name: String,
    /// An absolute http or https URL with a host.
    #[schemars(length(min = limits::URL.min, max = limits::URL.max), extend("format" = "uri"))]
    pub url: String,
    /// Shown to the AI alongside the webpage; null or absent: none.
    #[schemars(length(max = limits::NOTES.max))]
    pub notes: Option<String>,
    /// How often the page refreshes itself; absent or null: `off`.
    pub refresh_interval: Option<RefreshInterval>,
}

/// How often a webpage refreshes itself, by the rules of a manual refresh (never twice within
/// 24 hours, never while one runs).
#[derive(Debug, Clone, Copy, Deserialize, JsonSchema, PartialEq, Eq)]
#[serde(rename_all = "lowercase")]
pub enum RefreshInterval {
    Off,
    Daily,
    Weekly,
}

impl RefreshInterval {
    fn as_str(self) -> &'static str {
        match self {
            RefreshInterval::Off => "off",
            RefreshInterval::Daily => "daily",
            RefreshInterval::Weekly => "weekly",
        }
    }
}

/// A partial update. Other members are ignored.
#[derive(Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct UpdateWebpage {
    /// Not blank; absent or null keeps it.
    #[schemars(length(min = limits::NAME.min, max = limits::NAME.max))]
    pub name: Option<String>,
    /// An absolute http or https URL; absent or null keeps it. A new URL is not scraped until the
    /// next refresh.
    #[schemars(length(min = limits::URL.min, max = limits::URL.max), extend("format" = "uri"))]
    pub url: Option<String>,
    /// Absent keeps the notes, null clears them.
    #[serde(default)]
    #[schemars(length(max = limits::NOTES.max))]
    pub notes: Patch<String>,
    /// How often the page refreshes itself; absent or null keeps it.
    pub refresh_interval: Option<RefreshInterval>,
}

/// A partial update; the file itself never changes. Other members (including `url`) are ignored.
#[derive(Deserialize, JsonSchema)]
pub struct UpdateDocument {
    /// Not blank; absent or null keeps it.
    #[schemars(length(min = limits::NAME.min, max = limits::NAME.max))]
    pub name: Option<String>,
    /// Absent keeps the notes, null clears them.
    #[serde(default)]
    #[schemars(length(max = limits::NOTES.max))]
    pub notes: Patch<String>,
}

fn source_request(call: &Call, target: Target, source_id: &Id, include_content: bool) -> GetSourceRequest {
    GetSourceRequest {
        team_id: call.team_id().to_owned(),
        knowledgebase_id: target.knowledgebase_id,
        source_id: source_id.to_string(),
        include_content,
    }
}

fn notes_patch(notes: Patch<String>) -> (Option<String>, bool) {
    let clear = notes == Patch::Null;
    (notes.value(), clear)
}

async fn create_webpage<B: Addressed + Params>(
    call: Call,
    input: Input<B, Nothing, Json<CreateWebpage>>,
) -> ServiceResult<Created<Webpage>> {
    let target = target(&call, input.path.address()).await?;
    let Json(body) = input.body;
    let request = CreateWebpageRequest {
        team_id: call.team_id().to_owned(),
        knowledgebase_id: target.knowledgebase_id,
        name: body.name,
        url: body.url,
        notes: body.notes,
        refresh_interval: body.refresh_interval.map(|interval| interval.as_str().to_owned()),
    };
    let webpage = call.services.knowledgebase.clone().create_webpage(request).await?.into_inner();
    Ok(Created::new(Webpage::from(&webpage), "Webpage added; it is being scraped"))
}

async fn get_webpage<I: ItemPath + Params>(call: Call, input: Input<I>) -> ServiceResult<Data<WebpageDetail>> {
    let target = target(&call, input.path.address()).await?;
    let request = source_request(&call, target, input.path.item(), true);
    let webpage = call.services.knowledgebase.clone().get_webpage(request).await?.into_inner();
    let content = webpage.content.iter().map(Reference::from).collect();
    Ok(Data::new(WebpageDetail { webpage: Webpage::from(&webpage), content }))
}

async fn update_webpage<I: ItemPath + Params>(
    call: Call,
    input: Input<I, Nothing, Json<UpdateWebpage>>,
) -> ServiceResult<Updated<Webpage>> {
    let target = target(&call, input.path.address()).await?;
    let Json(body) = input.body;
    let (notes, clear_notes) = notes_patch(body.notes);
    let request = UpdateWebpageRequest {
        team_id: call.team_id().to_owned(),
        knowledgebase_id: target.knowledgebase_id,
        webpage_id: input.path.item().to_string(),
        name: body.name,
        url: body.url,
        notes,
        clear_notes,
        refresh_interval: body.refresh_interval.map(|interval| interval.as_str().to_owned()),
    };
    let webpage = call.services.knowledgebase.clone().update_webpage(request).await?.into_inner();
    Ok(Updated::new(Webpage::from(&webpage), "Webpage updated successfully"))
}

async fn delete_webpage<I: ItemPath + Params>(call: Call, input: Input<I>) -> ServiceResult<Updated<Webpage>> {
    let target = target(&call, input.path.address()).await?;
    let request = source_request(&call, target, input.path.item(), false);
    let webpage = call.services.knowledgebase.clone().delete_webpage(request).await?.into_inner();
    Ok(Updated::new(Webpage::from(&webpage), "Webpage deleted successfully"))
}

async fn refresh_webpage<I: ItemPath + Params>(
    call: Call,
    input: Input<I, Nothing, NoBody>,
) -> ServiceResult<Updated<WebpageRefresh>> {
    let target = target(&call, input.path.address()).await?;
    let request = source_request(&call, target, input.path.item(), false);
    let webpage = call.services.knowledgebase.clone().refresh_webpage(request).await?.into_inner();
    let refreshed = WebpageRefresh {
        id: Id::stored(webpage.id),
        url: Some(webpage.url),
        name: Some(webpage.name),
        status: SourceStatus::of_stored(&webpage.status),
    };
    Ok(Updated::new(refreshed, "Webpage refresh queued"))
}

async fn upload_document<B: Addressed + Params>(
    call: Call,
    input: Input<B, Nothing, Form>,
) -> ServiceResult<Created<Document>> {
    let target = target(&call, input.path.address()).await?;
    let form = input.body;
    let request = UploadDocumentRequest {
        team_id: call.team_id().to_owned(),
        knowledgebase_id: target.knowledgebase_id,
        file_name: form.file_name,
        name: form.name,
        notes: form.notes,
        content: form.content.to_vec(),
        content_type: form.content_type,
    };
    let document = call.services.knowledgebase.clone().upload_document(request).await?.into_inner();
    Ok(Created::new(Document::from(&document), "Document uploaded; its text is being extracted"))
}

async fn get_document<I: ItemPath + Params>(call: Call, input: Input<I>) -> ServiceResult<Data<DocumentDetail>> {
    let target = target(&call, input.path.address()).await?;
    let request = source_request(&call, target, input.path.item(), true);
    let document = call.services.knowledgebase.clone().get_document(request).await?.into_inner();
    let content = document.content.iter().map(Reference::from).collect();
    Ok(Data::new(DocumentDetail { document: Document::from(&document), content }))
}

async fn update_document<I: ItemPath + Params>(
    call: Call,
    input: Input<I, Nothing, Json<UpdateDocument>>,
) -> ServiceResult<Updated<Document>> {
    let target = target(&call, input.path.address()).await?;
    let Json(body) = input.body;
    let (notes, clear_notes) = notes_patch(body.notes);
    let request = UpdateDocumentRequest {
        team_id: call.team_id().to_owned(),
        knowledgebase_id: target.knowledgebase_id,
        document_id: input.path.item().to_string(),
        name: body.name,
        notes,
        clear_notes,
    };
    let document = call.services.knowledgebase.clone().update_document(request).await?.into_inner();
    Ok(Updated::new(Document::from(&document), "Document updated successfully"))
}

async fn delete_document<I: ItemPath + Params>(call: Call, input: Input<I>) -> ServiceResult<Updated<Document>> {
    let target = target(&call, input.path.address()).await?;
    let request = source_request(&call, target, input.path.item(), false);
    let document = call.services.knowledgebase.clone().delete_document(request).await?.into_inner();
    Ok(Updated::new(Document::from(&document), "Document deleted successfully"))
}
