//! `GET /v1/chats/export`: the chats a list's filters select, as CSV (RFC 4180), streamed as
//! the calls' export is (see `calls_export`): a page of 1,000 chats at a time, with the names
//! of their contacts looked up once a page.

use super::failures::TEAM_GONE;
use std::collections::HashMap;

use switchboard_kit::time::iso_ms;
use switchboard_kit::{ServiceError, ServiceResult};
use switchboard_proto::v1::{Chat, ExportChatsChunk};

use super::calls::agent_names;
use super::chats::ChatFilters;
use super::csv_export::{CsvExport, CsvKind, Sheet, body};
use super::groups::CHATS;
use super::people::{Contacts, People};
use crate::call::Call;
use crate::config::RateClass;
use crate::endpoint::{Endpoint, Input, Nothing};

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
            .fails(404, TEAM_GONE),
    ]
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
    let request = input.query.request(call.team_id());
    let (mut chunks, agents) = tokio::try_join!(
        async { Ok::<_, ServiceError>(call.services.conversations.clone().export_chats(request).await?.into_inner()) },
        agent_names(&call)
    )?;
    // The first chunk is awaited here, so that a missing team is answered with its status.
    let first = chunks.message().await?.unwrap_or_default();
    let sheet = ChatSheet { agents, people: People::of(&call) };
    Ok(CsvExport::new(body(sheet, first, chunks)))
}

struct ChatSheet {
    agents: HashMap<String, String>,
    people: People,
}

impl Sheet for ChatSheet {
    type Chunk = ExportChatsChunk;
    type Row = Chat;

    fn header(&self) -> Vec<String> {
        COLUMNS.iter().map(|column| (*column).to_owned()).collect()
    }

    fn rows(chunk: &ExportChatsChunk) -> &[Chat] {
        &chunk.chats
    }

    fn number(chat: &Chat) -> Option<&str> {
        chat.contact_number.as_deref()
    }

    fn people(&self) -> &People {
        &self.people
    }

    fn cells(&self, chat: &Chat, contacts: &Contacts) -> Vec<String> {
        let text = |value: Option<String>| value.unwrap_or_default();
        vec![
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
        ]
    }
}
