//! `/chats`: conversations on the web widget, the web agent, the voice widget and WhatsApp, as
//! the chat runtimes recorded them.

use super::failures::TEAM_GONE;
use schemars::JsonSchema;
use serde::Deserialize;
use switchboard_api::chats::{Channel, ChatDetail, ChatStatus, ChatView};
use switchboard_kit::vocabulary::AuditAction;
use switchboard_kit::{ServiceError, ServiceResult, limits};
use switchboard_proto::v1::{GetChatRequest, ListChatsRequest};

use super::calls::agent_names;
use super::groups::CHATS;
use crate::call::Call;
use crate::endpoint::{Data, Endpoint, Id, Input, Nothing, Page, Updated};
use switchboard_api::paging::{DateBound, SortOrder, default_limit, descending, first_page, page_request};

const CHAT_GONE: &str = "Chat not found";

pub fn endpoints() -> Vec<Endpoint> {
    vec![
        Endpoint::get("/v1/chats", list)
            .doc("listChats", CHATS, "The team's chats, newest first")
            .lists("chatId")
            .about(
                "Filters combine; every bound is inclusive. `search` finds a substring (case-insensitive) of a \
                 message, the contact's number or e-mail.",
            )
            .fails(404, TEAM_GONE)
            .tool("list_chats", "Lists the team's chats (web, web agent, voice widget, WhatsApp) with filters."),
        Endpoint::get("/v1/chats/{chatId}", get)
            .doc("getChat", CHATS, "A chat with its messages, oldest first")
            .about(
                "At most `messagesLimit` messages: the newest ones, or the newest before the message \
                 `messagesBefore` for older pages; always oldest first.",
            )
            .fails(404, CHAT_GONE)
            .tool("get_chat", "Reads one chat with its messages."),
        Endpoint::delete("/v1/chats/{chatId}", delete)
            .audited(AuditAction::ChatDeleted)
            .doc("deleteChat", CHATS, "Delete a chat with its messages")
            .fails(404, CHAT_GONE),
    ]
}

/// A chat's id in the path.
#[derive(Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct ChatPath {
    pub chat_id: Id,
}

#[derive(Debug, Clone, Copy, Deserialize, JsonSchema, PartialEq, Eq)]
#[serde(rename_all = "camelCase")]
pub enum ChatSortBy {
    CreatedAt,
    LastMessageAt,
}

fn by_creation() -> ChatSortBy {
    ChatSortBy::CreatedAt
}

/// The filters, order and page of a chat list.
#[derive(Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct ChatQuery {
    /// The page, from 1.
    #[serde(default = "first_page")]
    #[schemars(range(min = limits::PAGE.min, max = limits::PAGE.max))]
    pub page: u32,
    /// Chats per page.
    #[serde(default = "default_limit")]
    #[schemars(range(min = limits::PAGE_LIMIT.min, max = limits::PAGE_LIMIT.max))]
    pub limit: u32,
    #[serde(flatten)]
    pub filters: ChatFilters,
    /// Sort field; chats without messages come last by `lastMessageAt`.
    #[serde(default = "by_creation")]
    pub sort_by: ChatSortBy,
    /// Sort direction; ties are broken by id, so that paging is stable.
    #[serde(default = "descending")]
    pub sort_order: SortOrder,
}

/// Which chats a list or an export holds; every filter given must match.
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

impl ChatFilters {
    /// The request of a list with these filters (a page and sort added by the caller).
    pub fn request(self, team_id: &str) -> ListChatsRequest {
        ListChatsRequest {
            team_id: team_id.to_owned(),
            page: None,
            search: self.search,
            channel: self.channel.map(|channel| channel.as_str().to_owned()),
            agent_id: self.agent_id.map(Id::into_string),
            status: self.status.map(|status| if status == ChatStatus::Ended { "ended" } else { "active" }.to_owned()),
            created_from_ms: self.date_from.map(DateBound::start_ms),
            created_to_ms: self.date_to.map(DateBound::end_ms),
        }
    }
}

fn default_messages() -> u32 {
    u32::try_from(limits::CHAT_MESSAGES.default).unwrap_or(100)
}

/// Which messages of a chat to show.
#[derive(Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct MessagesQuery {
    /// At most this many messages.
    #[serde(default = "default_messages")]
    #[schemars(range(min = limits::CHAT_MESSAGES.min, max = limits::CHAT_MESSAGES.max))]
    pub messages_limit: u32,
    /// Only messages before this one (a message id of the chat), for older pages.
    pub messages_before: Option<Id>,
}

async fn list(call: Call, input: Input<Nothing, ChatQuery>) -> ServiceResult<Page<ChatView>> {
    let query = input.query;
    let sort_by = match query.sort_by {
        ChatSortBy::CreatedAt => "createdAt",
        ChatSortBy::LastMessageAt => "lastMessageAt",
    };
    let request = ListChatsRequest {
        page: Some(page_request(query.page, query.limit, sort_by, query.sort_order)),
        ..query.filters.request(call.team_id())
    };
    let listing =
        async { Ok::<_, ServiceError>(call.services.conversations.clone().list_chats(request).await?.into_inner()) };
    let (listed, names) = tokio::try_join!(listing, agent_names(&call))?;
    Ok(Page {
        data: listed.chats.iter().map(|chat| ChatView::new(chat, &names)).collect(),
        pagination: listed.page.unwrap_or_default().into(),
    })
}

async fn get(call: Call, input: Input<ChatPath, MessagesQuery>) -> ServiceResult<Data<ChatDetail>> {
    let request = GetChatRequest {
        team_id: call.team_id().to_owned(),
        chat_id: input.path.chat_id.into_string(),
        messages_limit: input.query.messages_limit,
        messages_before: input.query.messages_before.map(Id::into_string),
    };
    let reading =
        async { Ok::<_, ServiceError>(call.services.conversations.clone().get_chat(request).await?.into_inner()) };
    let (chat, names) = tokio::try_join!(reading, agent_names(&call))?;
    Ok(Data::new(ChatDetail::new(&chat, &names)))
}

async fn delete(call: Call, input: Input<ChatPath>) -> ServiceResult<Updated<ChatView>> {
    let request = GetChatRequest {
        team_id: call.team_id().to_owned(),
        chat_id: input.path.chat_id.into_string(),
        messages_limit: 0,
        messages_before: None,
    };
    let deleted = call.services.conversations.clone().delete_chat(request).await?.into_inner();
    let names = agent_names(&call).await?;
    Ok(Updated::new(ChatView::new(&deleted, &names), "Chat deleted successfully"))
}
