//! `/calls`: phone calls as the voice runtimes recorded them (through the conversations
//! service's ingestion API), with their transcript and timeline.

use super::failures::TEAM_GONE;
use std::collections::HashMap;

use schemars::JsonSchema;
use serde::Deserialize;
use switchboard_api::calls::{CallDetail, CallView, DisconnectionReason, Sentiment, wire_name};
use switchboard_kit::vocabulary::AuditAction;
use switchboard_kit::{FieldViolation, ServiceError, ServiceResult, limits};
use switchboard_proto::v1::{self as proto, GetCallRequest, ListAgentsRequest, ListCallsRequest, UpdateCallRequest};

use super::groups::CALLS;
use crate::call::Call;
use crate::endpoint::{Data, Endpoint, Id, Input, Json, Nothing, Page, Updated};
use switchboard_api::paging::{DateBound, SortOrder, default_limit, descending, first_page, page_request};

const CALL_GONE: &str = "Call not found";

pub fn endpoints() -> Vec<Endpoint> {
    vec![
        Endpoint::get("/v1/calls", list)
            .doc("listCalls", CALLS, "The team's calls, newest first, with their transcripts")
            .lists("callId")
            .about(
                "Filters combine; every bound is inclusive. `search` finds a substring (case-insensitive) of either \
                 number, the transcript or the summary; `number` finds calls with that number on either side, \
                 written in any spelling of the same E.164 number.",
            )
            .fails(404, TEAM_GONE)
            .tool(
                "list_calls",
                "Lists the team's phone calls with filters (number, agent, dates, duration, text, sentiment, \
                 success, disconnection reason).",
            ),
        Endpoint::get("/v1/calls/{callId}", get)
            .doc("getCall", CALLS, "A call with its full transcript and timeline")
            .fails(404, CALL_GONE)
            .tool("get_call", "Reads one phone call: its transcript, timeline, summary and score."),
        Endpoint::patch("/v1/calls/{callId}", update)
            .audited(AuditAction::CallUpdated)
            .doc("updateCall", CALLS, "Flag a call, mark it a favorite or spam")
            .about("Members left out keep their value.")
            .fails(404, CALL_GONE),
        Endpoint::delete("/v1/calls/{callId}", delete)
            .audited(AuditAction::CallDeleted)
            .doc("deleteCall", CALLS, "Delete a call with its transcript, timeline and recording")
            .fails(404, CALL_GONE),
    ]
}

/// A call's id in the path.
#[derive(Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct CallPath {
    pub call_id: Id,
}

#[derive(Debug, Clone, Copy, Deserialize, JsonSchema, PartialEq, Eq)]
#[serde(rename_all = "lowercase")]
pub enum CallType {
    All,
    Incoming,
    Outgoing,
}

#[derive(Debug, Clone, Copy, Deserialize, JsonSchema, PartialEq, Eq)]
#[serde(rename_all = "camelCase")]
pub enum CallSortBy {
    CreatedAt,
    Duration,
    EndedAt,
}

fn all_calls() -> CallType {
    CallType::All
}

fn by_creation() -> CallSortBy {
    CallSortBy::CreatedAt
}

/// The filters, order and page of a call list.
#[derive(Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct CallQuery {
    /// The page, from 1.
    #[serde(default = "first_page")]
    #[schemars(range(min = limits::PAGE.min, max = limits::PAGE.max))]
    pub page: u32,
    /// Calls per page.
    #[serde(default = "default_limit")]
    #[schemars(range(min = limits::PAGE_LIMIT.min, max = limits::PAGE_LIMIT.max))]
    pub limit: u32,
    #[serde(flatten)]
    pub filters: CallFilters,
    /// Sort field.
    #[serde(default = "by_creation")]
    pub sort_by: CallSortBy,
    /// Sort direction; ties are broken by id, so that paging is stable.
    #[serde(default = "descending")]
    pub sort_order: SortOrder,
}

/// Which calls a list or an export holds; every filter given must match.
#[derive(Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct CallFilters {
    /// A substring of either number, the transcript or the summary (case-insensitive).
    #[schemars(length(min = limits::CONVERSATION_SEARCH.min, max = limits::CONVERSATION_SEARCH.max))]
    pub search: Option<String>,
    /// Which calls: both directions, or only incoming or outgoing ones.
    #[serde(default = "all_calls")]
    pub call_type: CallType,
    /// Calls of this agent.
    pub agent_id: Option<Id>,
    /// Calls that lasted at least this many seconds (calls in progress never match).
    #[schemars(range(min = limits::DURATION.min, max = limits::DURATION.max))]
    pub min_duration: Option<i64>,
    /// Calls that lasted at most this many seconds.
    #[schemars(range(min = limits::DURATION.min, max = limits::DURATION.max))]
    pub max_duration: Option<i64>,
    /// Calls that started at or after this time (a date: from its start, UTC).
    pub date_from: Option<DateBound>,
    /// Calls that started at or before this time (a date: to its end, UTC).
    pub date_to: Option<DateBound>,
    /// A phone number on either side, in any spelling (`(415) 555-2671`, `+14155552671`).
    #[schemars(length(min = 1, max = 64))]
    pub number: Option<String>,
    /// Calls whose analysis has this sentiment (calls without analysis have none).
    pub sentiment: Option<Sentiment>,
    /// Calls whose analysis says they reached their goal (`true`) or not (`false`); calls whose
    /// success is not known match neither.
    pub successful: Option<bool>,
    /// Calls that ended for this reason.
    pub disconnection_reason: Option<DisconnectionReason>,
}

impl CallFilters {
    /// The request of a list with these filters (a page and sort added by the caller).
    pub fn request(self, team_id: &str) -> ServiceResult<ListCallsRequest> {
        if let (Some(min), Some(max)) = (self.min_duration, self.max_duration)
            && min > max
        {
            return Err(ServiceError::validation(vec![FieldViolation::new(
                "minDuration",
                "must not be more than maxDuration",
            )]));
        }
        Ok(ListCallsRequest {
            team_id: team_id.to_owned(),
            page: None,
            search: self.search,
            direction: match self.call_type {
                CallType::All => None,
                CallType::Incoming => Some("INCOMING".to_owned()),
                CallType::Outgoing => Some("OUTGOING".to_owned()),
            },
            agent_id: self.agent_id.map(Id::into_string),
            min_duration: self.min_duration,
            max_duration: self.max_duration,
            created_from_ms: self.date_from.map(DateBound::start_ms),
            created_to_ms: self.date_to.map(DateBound::end_ms),
            number: self.number,
            sentiment: self.sentiment.map(wire_name),
            successful: self.successful,
            disconnection_reason: self.disconnection_reason.map(wire_name),
        })
    }
}

/// What a call's flags become; members left out keep their value.
#[derive(Deserialize, JsonSchema)]
pub struct UpdateCall {
    pub flagged: Option<bool>,
    pub favorite: Option<bool>,
    pub spam: Option<bool>,
}

/// Names of the team's agents, to show beside the calls and chats that name them.
pub async fn agent_names(call: &Call) -> ServiceResult<HashMap<String, String>> {
    let request = ListAgentsRequest { team_id: call.team_id().to_owned() };
    let agents = call.services.agents.clone().list_agents(request).await?.into_inner().agents;
    Ok(agents.into_iter().map(|agent| (agent.id, agent.name)).collect())
}

/// Where a browser plays the call's recording: the store's presigned URL (S3), else the
/// gateway's own signed URL.
fn recording_url(request: &Call, call: &proto::Call) -> Option<String> {
    let recording = call.recording.as_ref()?;
    Some(recording.playback_url.clone().unwrap_or_else(|| {
        request.url_key.url(&request.public_base, &call.team_id, &call.id, switchboard_kit::time::now_ms())
    }))
}

fn call_request(call: &Call, path: &CallPath) -> GetCallRequest {
    GetCallRequest { team_id: call.team_id().to_owned(), call_id: path.call_id.to_string() }
}

async fn list(call: Call, input: Input<Nothing, CallQuery>) -> ServiceResult<Page<CallView>> {
    let query = input.query;
    let sort_by = match query.sort_by {
        CallSortBy::CreatedAt => "createdAt",
        CallSortBy::Duration => "duration",
        CallSortBy::EndedAt => "endedAt",
    };
    let request = ListCallsRequest {
        page: Some(page_request(query.page, query.limit, sort_by, query.sort_order)),
        ..query.filters.request(call.team_id())?
    };
    let (listed, names) = tokio::try_join!(
        async { Ok::<_, ServiceError>(call.services.conversations.clone().list_calls(request).await?.into_inner()) },
        agent_names(&call)
    )?;
    Ok(Page {
        data: listed.calls.iter().map(|item| CallView::of(item, &names, recording_url(&call, item))).collect(),
        pagination: listed.page.unwrap_or_default().into(),
    })
}

async fn get(call: Call, input: Input<CallPath>) -> ServiceResult<Data<CallDetail>> {
    let request = call_request(&call, &input.path);
    let (found, names) = tokio::try_join!(
        async { Ok::<_, ServiceError>(call.services.conversations.clone().get_call(request).await?.into_inner()) },
        agent_names(&call)
    )?;
    Ok(Data::new(CallDetail::of(&found, &names, recording_url(&call, &found))))
}

async fn update(call: Call, input: Input<CallPath, Nothing, Json<UpdateCall>>) -> ServiceResult<Updated<CallView>> {
    let Json(body) = input.body;
    let request = UpdateCallRequest {
        team_id: call.team_id().to_owned(),
        call_id: input.path.call_id.into_string(),
        flagged: body.flagged,
        favorite: body.favorite,
        spam: body.spam,
    };
    let updated = call.services.conversations.clone().update_call(request).await?.into_inner();
    let names = agent_names(&call).await?;
    Ok(Updated::new(CallView::of(&updated, &names, recording_url(&call, &updated)), "Call updated successfully"))
}

async fn delete(call: Call, input: Input<CallPath>) -> ServiceResult<Updated<CallView>> {
    let request = call_request(&call, &input.path);
    let deleted = call.services.conversations.clone().delete_call(request).await?.into_inner();
    let names = agent_names(&call).await?;
    let mut view = CallView::of(&deleted, &names, recording_url(&call, &deleted));
    // The recording went with the call.
    view.recording_url = None;
    Ok(Updated::new(view, "Call deleted successfully"))
}
