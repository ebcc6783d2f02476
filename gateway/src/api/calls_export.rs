//! `GET /v1/calls/export`: the calls a list's filters select, as CSV (RFC 4180), streamed a
//! page of 1,000 at a time (see `csv_export`), whatever the number of calls.

use super::failures::TEAM_GONE;
use std::collections::HashMap;

use switchboard_api::calls::{DisconnectionReason, Sentiment, from_wire, wire_name};
use switchboard_kit::time::iso_ms;
use switchboard_kit::{ServiceError, ServiceResult};
use switchboard_proto::v1::{Call as CallRecord, ExportCallsChunk};

use super::calls::{CallFilters, agent_names};
use super::csv_export::{CsvExport, CsvKind, Sheet, body};
use super::groups::CALLS;
use super::people::{Contacts, People};
use crate::call::Call;
use crate::config::RateClass;
use crate::endpoint::{Endpoint, Input, Nothing};

pub fn endpoints() -> Vec<Endpoint> {
    vec![
        Endpoint::get("/v1/calls/export", export)
            .doc("exportCalls", CALLS, "The team's calls as CSV, with their analysis, for the list's filters")
            .about(
                "Takes the filters of `listCalls` (not its page or sort) and answers every call they select, \
                 oldest first, as `text/csv; charset=utf-8` (RFC 4180: a header row, fields quoted when they hold \
                 a comma, a quote or a line break, CRLF line ends), streamed as it is read, so that any number \
                 of calls is exported in constant memory. Columns: `id`, `created_at`, `ended_at`, `type`, \
                 `from`, `to`, `status`, `duration`, `agent_id`, `agent_name`, `summary`, `sentiment`, \
                 `successful`, `disconnection_reason`, `cost`, `cost_unpaid`, `contact_name` (the CRM contact \
                 with the other party's number: the caller of an incoming call, the callee of an outgoing one; \
                 empty when none, or when the team's access configuration hides the CRM), `score` (as the list \
                 shows it), `call_url` (the call's page in the portal, where its transcript is), `recording_url` \
                 (that page's player, when the call has a recording: the recording's own signed URL expires \
                 in 15 minutes, so the sheet links the page that signs a fresh one), then one `custom.<name>` \
                 column per custom analysis field that the exported calls hold (sorted by name; a string value \
                 as it is, another as JSON). The links carry `?teamId=` when the export is of a client subteam. \
                 Empty cells are nulls. A cell a spreadsheet would run as a formula \
                 (it begins with `=`, `+`, `-`, `@`, a tab or a carriage return, and is not a number or an E.164 \
                 phone number) begins with `'` (OWASP, CSV injection), in every column. Transcripts are not exported. A failure after the \
                 first bytes ends the body early (the status is sent already).",
            )
            .class(RateClass::Bulk)
            .fails(404, TEAM_GONE),
    ]
}

/// The columns before the custom analysis fields'. Columns added later go last, before the
/// custom ones, so that a sheet read by position keeps working.
const COLUMNS: [&str; 20] = [
    "id",
    "created_at",
    "ended_at",
    "type",
    "from",
    "to",
    "status",
    "duration",
    "agent_id",
    "agent_name",
    "summary",
    "sentiment",
    "successful",
    "disconnection_reason",
    "cost",
    "cost_unpaid",
    "contact_name",
    "score",
    "call_url",
    "recording_url",
];

/// The calls as CSV.
pub struct CallsCsv;

impl CsvKind for CallsCsv {
    const SCHEMA: &'static str = "CallsCsv";
    const ROW: &'static str = "call";
    const FILE: &'static str = "calls.csv";
}

pub async fn export(call: Call, input: Input<Nothing, CallFilters>) -> ServiceResult<CsvExport<CallsCsv>> {
    let request = input.query.request(call.team_id())?;
    let (chunks, names) = tokio::try_join!(
        async { Ok::<_, ServiceError>(call.services.conversations.clone().export_calls(request).await?.into_inner()) },
        agent_names(&call)
    )?;
    let mut chunks = chunks;
    // The first chunk is awaited here, so that a refused filter or a missing team is answered
    // with its status rather than as a body cut short.
    let first = chunks.message().await?.unwrap_or_default();
    let sheet = CallSheet { custom_names: first.custom_names.clone(), agents: names, people: People::of(&call) };
    Ok(CsvExport::new(body(sheet, first, chunks)))
}

/// What turns calls into rows: the header's custom names, the agents' names, and where the
/// contacts' names and the portal's links come from.
struct CallSheet {
    custom_names: Vec<String>,
    agents: HashMap<String, String>,
    people: People,
}

impl Sheet for CallSheet {
    type Chunk = ExportCallsChunk;
    type Row = CallRecord;

    fn header(&self) -> Vec<String> {
        let custom = self.custom_names.iter().map(|name| format!("custom.{name}"));
        COLUMNS.iter().map(|column| (*column).to_owned()).chain(custom).collect()
    }

    fn rows(chunk: &ExportCallsChunk) -> &[CallRecord] {
        &chunk.calls
    }

    fn number(call: &CallRecord) -> Option<&str> {
        Some(other_party(call))
    }

    fn people(&self) -> &People {
        &self.people
    }

    fn cells(&self, call: &CallRecord, contacts: &Contacts) -> Vec<String> {
        let text = |value: Option<String>| value.unwrap_or_default();
        let number = |value: Option<i64>| value.map(|value| value.to_string()).unwrap_or_default();
        let analysis = call.analysis.as_ref();
        let custom: serde_json::Map<String, serde_json::Value> =
            analysis.and_then(|analysis| serde_json::from_str(&analysis.custom_json).ok()).unwrap_or_default();
        let mut record = vec![
            call.id.clone(),
            iso_ms(call.started_at_ms),
            text(call.ended_at_ms.map(iso_ms)),
            call.direction.clone(),
            call.from.clone(),
            call.to.clone(),
            call.status.clone(),
            number(call.duration_seconds),
            text(call.agent_id.clone()),
            text(call.agent_id.as_ref().and_then(|id| self.agents.get(id).cloned())),
            text(call.summary.clone()),
            text(analysis.and_then(|analysis| from_wire::<Sentiment>(&analysis.sentiment)).map(wire_name)),
            text(analysis.and_then(|analysis| analysis.successful).map(|successful| successful.to_string())),
            text(call.disconnection_reason.as_deref().and_then(from_wire::<DisconnectionReason>).map(wire_name)),
            number(call.cost_credits),
            number(call.cost_credits.map(|_| call.cost_unpaid_credits.unwrap_or_default())),
            text(contacts.get(other_party(call)).cloned()),
            call.score.map(|score| score.to_string()).unwrap_or_default(),
            self.people.page_url("calls", &call.id, ""),
            if call.recording.is_some() {
                self.people.page_url("calls", &call.id, "#recording")
            } else {
                String::new()
            },
        ];
        record.extend(self.custom_names.iter().map(|name| match custom.get(name) {
            None | Some(serde_json::Value::Null) => String::new(),
            Some(serde_json::Value::String(text)) => text.clone(),
            Some(other) => other.to_string(),
        }));
        record
    }
}

/// The number of the person the agent spoke with: the caller of an incoming call, the callee
/// of an outgoing one.
fn other_party(call: &CallRecord) -> &str {
    if call.direction == "OUTGOING" { &call.to } else { &call.from }
}
