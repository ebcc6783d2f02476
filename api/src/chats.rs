//! Chats and their messages.

use std::collections::HashMap;

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use switchboard_proto::v1 as proto;

use crate::calls::{ConversationAgent, agent_ref};
use crate::id::Id;
use crate::time::Timestamp;

#[derive(Debug, Clone, Copy, Deserialize, Serialize, JsonSchema, PartialEq, Eq)]
#[serde(rename_all = "kebab-case")]
pub enum Channel {
    Web,
    WebAgent,
    VoiceWidget,
    Whatsapp,
}

impl Channel {
    pub fn as_str(self) -> &'static str {
        match self {
            Channel::Web => "web",
            Channel::WebAgent => "web-agent",
            Channel::VoiceWidget => "voice-widget",
            Channel::Whatsapp => "whatsapp",
        }
    }

    /// A stored channel name; anything unknown reads as `web`.
    pub fn parse(text: &str) -> Channel {
        [Channel::WebAgent, Channel::VoiceWidget, Channel::Whatsapp]
            .into_iter()
            .find(|channel| channel.as_str() == text)
            .unwrap_or(Channel::Web)
    }
}

#[derive(Debug, Clone, Copy, Deserialize, Serialize, JsonSchema, PartialEq, Eq)]
#[serde(rename_all = "lowercase")]
pub enum ChatStatus {
    Active,
    Ended,
}

/// Who the chat is with.
#[derive(Serialize, JsonSchema)]
#[schemars(deny_unknown_fields)]
pub struct Contact {
    /// E.164.
    pub number: Option<String>,
    pub email: Option<String>,
}

/// A chat.
#[derive(Serialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
#[schemars(deny_unknown_fields)]
pub struct ChatView {
    pub id: Id,
    pub channel: Channel,
    pub status: ChatStatus,
    pub agent: Option<ConversationAgent>,
    pub contact: Contact,
    pub message_count: u32,
    pub last_message_at: Option<Timestamp>,
    /// When the chat started.
    pub created_at: Timestamp,
    pub ended_at: Option<Timestamp>,
    pub summary: Option<String>,
}

#[derive(Serialize, JsonSchema)]
#[serde(rename_all = "lowercase")]
pub enum Role {
    User,
    Agent,
    System,
}

/// One message of a chat.
#[derive(Serialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
#[schemars(deny_unknown_fields)]
pub struct Message {
    pub id: Id,
    pub role: Role,
    pub text: String,
    pub created_at: Timestamp,
}

/// A chat with its messages.
#[derive(Serialize, JsonSchema)]
#[schemars(deny_unknown_fields)]
pub struct ChatDetail {
    #[serde(flatten)]
    pub chat: ChatView,
    /// Oldest first.
    pub messages: Vec<Message>,
}

impl ChatView {
    pub fn new(chat: &proto::Chat, names: &HashMap<String, String>) -> Self {
        Self {
            id: Id::stored(chat.id.clone()),
            channel: Channel::parse(&chat.channel),
            status: if chat.status == "ended" { ChatStatus::Ended } else { ChatStatus::Active },
            agent: agent_ref(chat.agent_id.as_ref(), names),
            contact: Contact { number: chat.contact_number.clone(), email: chat.contact_email.clone() },
            message_count: chat.message_count,
            last_message_at: Timestamp::option(chat.last_message_at_ms),
            created_at: Timestamp::from_ms(chat.created_at_ms),
            ended_at: Timestamp::option(chat.ended_at_ms),
            summary: chat.summary.clone(),
        }
    }
}

impl ChatDetail {
    pub fn new(chat: &proto::Chat, names: &HashMap<String, String>) -> Self {
        let role = |name: &str| match name {
            "agent" => Role::Agent,
            "system" => Role::System,
            _ => Role::User,
        };
        let messages = chat
            .messages
            .iter()
            .map(|message| Message {
                id: Id::stored(message.id.clone()),
                role: role(&message.role),
                text: message.text.clone(),
                created_at: Timestamp::from_ms(message.created_at_ms),
            })
            .collect();
        Self { chat: ChatView::new(chat, names), messages }
    }
}
