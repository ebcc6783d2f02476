//! `GET /v1/chats/export`: the chats a list's filters select, as CSV (RFC 4180), streamed as
//! the calls' export is (see `calls_export`): a page of 1,000 chats at a time, with the names
//! of their contacts looked up once a page.

use std::collections::HashMap;

use bytes::Bytes;
use futures::StreamExt;
use schemars::JsonSchema;
use serde::Deserialize;
use switchboard_api::chats::{Channel, ChatStatus};
use switchboard_api::paging::DateBound;
use switchboard_kit::time::iso_ms;
use switchboard_kit::{ServiceError, ServiceResult, limits};
use switchboard_proto::v1::{Chat, ExportChatsChunk, ListChatsRequest};
use tonic::Streaming;

use super::calls::agent_names;
use super::csv_export::{CsvExport, CsvKind};
use super::groups::CHATS;
use super::people::{Contacts, People};
use crate::call::Call;
use crate::config::RateClass;
use crate::endpoint::{Endpoint, Id, Input, Nothing};
use crate::reply::BodyStream;

pub fn endpoints() -> Vec<Endpoint> {
    vec![
        Endpoint::get("/v1/chats/export", export)
            .doc("exportChats", CHATS, "The team's chats as CSV, for the list's filters")
            .about(
                "Takes the filters of `listChats` (not its page or sort) and answers every chat they select, \
                 oldest first, as `text/csv; charset=utf-8` (RFC 4180, CRLF line ends), streamed as it is read. \
                 Columns: `id`, `created_at`, `ended_at`, `last_message_at`, `channel`, `status`, \
                 `contact_number`, `contact_email`, `contact_name` (the CRM contact with the chat's number; \
                 empty when none, or when the team's access configuration hides the CRM), `agent_id`, \
                 `agent_name`, `message_count`, `summary`, `chat_url` (the chat's page in the portal, with \
                 `?teamId=` when the export is of a client subteam). Empty cells are nulls. A cell a \
                 spreadsheet would run as a formula begins with `'` (OWASP, CSV injection). Messages are not \
                 exported. A failure after the first bytes ends the body early.",
            )
            .class(RateClass::Bulk)
            .fails(404, "Team not found: the key's team, or the `teamId` subteam, has been deleted."),
    ]
}

/// The filters of a chat list, without its page and order.
#[derive(Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct ChatFilters {
    /// A substring of a message, the contact's number or e-mail (case-insensitive).
    #[schemars(length(min = limits::CONVERSATION_SEARCH.min, max = limits::CONVERSATION_SEARCH.max))]
    pub search: Option<String>,
    pub channel: Option<Channel>,
    /// Chats of this agent.
    pub agent_id: Option<Id>,
    pub status: Option<ChatStatus>,
    /// Chats that started at or after this time (a date: from its start, UTC).
    pub date_from: Option<DateBound>,
    /// Chats that started at or before this time (a date: to its end, UTC).
    pub date_to: Option<DateBound>,
}

const COLUMNS: [&str; 14] = [
    "id",
    "created_at",
    "ended_at",
    "last_message_at",
    "channel",
    "status",
    "contact_number",
    "contact_email",
    "contact_name",
    "agent_id",
    "agent_name",
    "message_count",
    "summary",
    "chat_url",
];

/// The chats as CSV.
pub struct ChatsCsv;

impl CsvKind for ChatsCsv {
    const SCHEMA: &'static str = "ChatsCsv";
    const ROW: &'static str = "chat";
    const FILE: &'static str = "chats.csv";
}

pub async fn export(call: Call, input: Input<Nothing, ChatFilters>) -> ServiceResult<CsvExport<ChatsCsv>> {
    let filters = input.query;
    let request = ListChatsRequest {
        team_id: call.team_id().to_owned(),
        page: None,
        search: filters.search,
        channel: filters.channel.map(|channel| channel.as_str().to_owned()),
        agent_id: filters.agent_id.map(Id::into_string),
        status: filters.status.map(|status| if status == ChatStatus::Ended { "ended" } else { "active" }.to_owned()),
        created_from_ms: filters.date_from.map(DateBound::start_ms),
        created_to_ms: filters.date_to.map(DateBound::end_ms),
    };
    let (mut chunks, agents) = tokio::try_join!(
        async { Ok::<_, ServiceError>(call.services.conversations.clone().export_chats(request).await?.into_inner()) },
        agent_names(&call)
    )?;
    // The first chunk is awaited here, so that a missing team is answered with its status.
    let first = chunks.message().await?.unwrap_or_default();
    let sheet = Sheet { agents, people: People::of(&call) };
    Ok(CsvExport::new(body(sheet, first, chunks)))
}

struct Sheet {
    agents: HashMap<String, String>,
    people: People,
}

impl Sheet {
    fn row(&self, writer: &mut csv::Writer<Vec<u8>>, chat: &Chat, contacts: &Contacts) -> csv::Result<()> {
        let text = |value: Option<String>| value.unwrap_or_default();
        let record = [
            chat.id.clone(),
            iso_ms(chat.created_at_ms),
            text(chat.ended_at_ms.map(iso_ms)),
            text(chat.last_message_at_ms.map(iso_ms)),
            chat.channel.clone(),
            chat.status.clone(),
            text(chat.contact_number.clone()),
            text(chat.contact_email.clone()),
            text(chat.contact_number.as_ref().and_then(|number| contacts.get(number).cloned())),
            text(chat.agent_id.clone()),
            text(chat.agent_id.as_ref().and_then(|id| self.agents.get(id).cloned())),
            chat.message_count.to_string(),
            text(chat.summary.clone()),
            self.people.page_url("chats", &chat.id, ""),
        ];
        writer.write_record(record.into_iter().map(crate::spreadsheet::cell))
    }

    /// The CSV of `chats` (after the header when `header`), their contacts looked up at once.
    async fn rows(&self, header: bool, chats: &[Chat]) -> Result<Bytes, ServiceError> {
        let contacts = self.people.names(chats.iter().filter_map(|chat| chat.contact_number.as_deref())).await?;
        let mut writer = csv::WriterBuilder::new().terminator(csv::Terminator::CRLF).from_writer(Vec::new());
        if header {
            writer.write_record(COLUMNS).map_err(ServiceError::internal)?;
        }
        for chat in chats {
            self.row(&mut writer, chat, &contacts).map_err(ServiceError::internal)?;
        }
        writer.into_inner().map(Bytes::from).map_err(|error| ServiceError::internal(error.into_error()))
    }
}

/// The header and the first chunk's rows, then each later chunk's rows as it arrives.
fn body(sheet: Sheet, first: ExportChatsChunk, chunks: Streaming<ExportChatsChunk>) -> BodyStream {
    futures::stream::unfold((sheet, chunks, Some(first)), |(sheet, mut chunks, first)| async move {
        if let Some(first) = first {
            let head = sheet.rows(true, &first.chats).await;
            return Some((head, (sheet, chunks, None)));
        }
        match chunks.message().await {
            Ok(Some(chunk)) => Some((sheet.rows(false, &chunk.chats).await, (sheet, chunks, None))),
            Ok(None) => None,
            Err(status) => Some((Err(ServiceError::from_status(&status)), (sheet, chunks, None))),
        }
    })
    .boxed()
}
