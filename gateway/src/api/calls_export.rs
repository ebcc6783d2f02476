//! `GET /v1/calls/export`: the calls a list's filters select, as CSV (RFC 4180), streamed.
//! The conversations service reads them in keyset pages of 1,000 and streams each page as one
//! chunk; each chunk becomes CSV here and is written out before the next is asked for (the
//! gRPC stream and the response body both wait for their reader), so that neither process ever
//! holds more than a page, whatever the number of calls.

use std::collections::HashMap;

use bytes::Bytes;
use futures::StreamExt;
use schemars::JsonSchema;
use switchboard_api::calls::{DisconnectionReason, Sentiment, from_wire, wire_name};
use switchboard_kit::time::iso_ms;
use switchboard_kit::{ServiceError, ServiceResult};
use switchboard_proto::v1::{Call as CallRecord, ExportCallsChunk};
use tonic::Streaming;

use super::calls::{CallFilters, agent_names};
use super::groups::CALLS;
use crate::call::Call;
use crate::config::RateClass;
use crate::endpoint::{Answer, Endpoint, Input, Nothing};
use crate::reply::{BodyStream, Reply};

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
                 `successful`, `disconnection_reason`, `cost`, `cost_unpaid`, then one `custom.<name>` column \
                 per custom analysis field that the exported calls hold (sorted by name; a string value as it \
                 is, another as JSON). Empty cells are nulls. A cell a spreadsheet would run as a formula \
                 (it begins with `=`, `+`, `-`, `@`, a tab or a carriage return, and is not a number or an E.164 \
                 phone number) begins with `'` (OWASP, CSV injection), in every column. Transcripts are not exported. A failure after the \
                 first bytes ends the body early (the status is sent already).",
            )
            .class(RateClass::Bulk)
            .fails(404, "Team not found: the key's team, or the `teamId` subteam, has been deleted."),
    ]
}

/// The columns before the custom analysis fields'.
const COLUMNS: [&str; 16] = [
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
];

/// A CSV body sent as it is made.
pub struct CsvExport(BodyStream);

impl JsonSchema for CsvExport {
    fn schema_name() -> std::borrow::Cow<'static, str> {
        "CallsCsv".into()
    }

    fn json_schema(_: &mut schemars::SchemaGenerator) -> schemars::Schema {
        schemars::json_schema!({
            "type": "string",
            "description": "RFC 4180 CSV: a header row, then one call a row.",
        })
    }
}

impl Answer for CsvExport {
    const STATUS: u16 = 200;
    const MEDIA_TYPE: &'static str = "text/csv";

    fn into_reply(self) -> Reply {
        Reply::stream(Self::STATUS, "text/csv; charset=utf-8".to_owned(), None, self.0)
            .with_header("Content-Disposition", "attachment; filename=\"calls.csv\"".to_owned())
    }
}

pub async fn export(call: Call, input: Input<Nothing, CallFilters>) -> ServiceResult<CsvExport> {
    let request = input.query.request(call.team_id())?;
    let (chunks, names) = tokio::try_join!(
        async { Ok::<_, ServiceError>(call.services.conversations.clone().export_calls(request).await?.into_inner()) },
        agent_names(&call)
    )?;
    let mut chunks = chunks;
    // The first chunk is awaited here, so that a refused filter or a missing team is answered
    // with its status rather than as a body cut short.
    let first = chunks.message().await?.unwrap_or_default();
    let sheet = Sheet::new(first.custom_names.clone(), names);
    Ok(CsvExport(body(sheet, first, chunks)))
}

/// What turns calls into rows: the header's custom names and the agents' names.
struct Sheet {
    custom_names: Vec<String>,
    agents: HashMap<String, String>,
}

impl Sheet {
    fn new(custom_names: Vec<String>, agents: HashMap<String, String>) -> Self {
        Self { custom_names, agents }
    }

    fn header(&self, writer: &mut csv::Writer<Vec<u8>>) -> csv::Result<()> {
        let custom = self.custom_names.iter().map(|name| format!("custom.{name}"));
        writer.write_record(COLUMNS.iter().map(|column| (*column).to_owned()).chain(custom))
    }

    fn row(&self, writer: &mut csv::Writer<Vec<u8>>, call: &CallRecord) -> csv::Result<()> {
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
        ];
        record.extend(self.custom_names.iter().map(|name| match custom.get(name) {
            None | Some(serde_json::Value::Null) => String::new(),
            Some(serde_json::Value::String(text)) => text.clone(),
            Some(other) => other.to_string(),
        }));
        writer.write_record(record.into_iter().map(crate::spreadsheet::cell))
    }

    /// The CSV of `calls` (after the header when `header`): a writer of its own per chunk,
    /// whose buffer is the chunk.
    fn rows(&self, header: bool, calls: &[CallRecord]) -> Result<Bytes, ServiceError> {
        let mut writer = csv::WriterBuilder::new().terminator(csv::Terminator::CRLF).from_writer(Vec::new());
        if header {
            self.header(&mut writer).map_err(ServiceError::internal)?;
        }
        for call in calls {
            self.row(&mut writer, call).map_err(ServiceError::internal)?;
        }
        writer.into_inner().map(Bytes::from).map_err(|error| ServiceError::internal(error.into_error()))
    }
}

/// The header and the first chunk's rows, then each later chunk's rows as it arrives.
fn body(sheet: Sheet, first: ExportCallsChunk, chunks: Streaming<ExportCallsChunk>) -> BodyStream {
    let head = sheet.rows(true, &first.calls);
    let rest = futures::stream::unfold((sheet, chunks), |(sheet, mut chunks)| async move {
        match chunks.message().await {
            Ok(Some(chunk)) => Some((sheet.rows(false, &chunk.calls), (sheet, chunks))),
            Ok(None) => None,
            Err(status) => Some((Err(ServiceError::from_status(&status)), (sheet, chunks))),
        }
    });
    futures::stream::once(async move { head }).chain(rest).boxed()
}
