//! The conversations store. SQL is written once for both engines (see `switchboard_kit::db`);
//! rows come back as the proto messages the service answers with. Every statement filters on
//! the team: another team's call or chat is `NOT_FOUND`, by id and by `external_id` alike.
//!
//! The service hands the store checked, normalised values (E.164 numbers, parsed times, known
//! enum values); the store checks lengths and ids itself, so that nothing invalid is written
//! whoever calls it.

mod analytics;
mod calls;
mod chats;
mod conversation;
mod export;
mod search;
mod usage;

pub use calls::check_end;
pub use export::{EXPORT_CHUNK, ExportCursor};

use switchboard_kit::db::Db;
use switchboard_kit::{ServiceError, ServiceResult};

/// How a call or chat is named in a request: by our id, or by the runtime's external id.
#[derive(Debug, Clone, Copy)]
pub(crate) enum Key<'a> {
    Id(&'a str),
    External(&'a str),
}

impl<'a> Key<'a> {
    /// The column that holds it, and the value.
    fn column(self) -> (&'static str, &'a str) {
        match self {
            Key::Id(id) => ("id", id),
            Key::External(external_id) => ("external_id", external_id),
        }
    }
}

/// A call's direction.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Direction {
    Incoming,
    Outgoing,
}

impl Direction {
    pub fn as_str(self) -> &'static str {
        match self {
            Direction::Incoming => "INCOMING",
            Direction::Outgoing => "OUTGOING",
        }
    }

    pub fn parse(text: &str) -> Option<Direction> {
        match text {
            "INCOMING" => Some(Direction::Incoming),
            "OUTGOING" => Some(Direction::Outgoing),
            _ => None,
        }
    }
}

/// How a call went, as its analysis says.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Sentiment {
    Positive,
    Neutral,
    Negative,
    Unknown,
}

impl Sentiment {
    pub const ALL: [Sentiment; 4] = [Sentiment::Positive, Sentiment::Neutral, Sentiment::Negative, Sentiment::Unknown];
    pub const NAMES: &str = "positive, neutral, negative, unknown";

    pub fn as_str(self) -> &'static str {
        match self {
            Sentiment::Positive => "positive",
            Sentiment::Neutral => "neutral",
            Sentiment::Negative => "negative",
            Sentiment::Unknown => "unknown",
        }
    }

    pub fn parse(text: &str) -> Option<Sentiment> {
        Self::ALL.into_iter().find(|sentiment| sentiment.as_str() == text)
    }
}

/// Why a call ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum DisconnectionReason {
    CustomerHangup,
    AgentHangup,
    Transfer,
    Voicemail,
    NoAnswer,
    Busy,
    Error,
    Other,
}

impl DisconnectionReason {
    pub const ALL: [DisconnectionReason; 8] = [
        DisconnectionReason::CustomerHangup,
        DisconnectionReason::AgentHangup,
        DisconnectionReason::Transfer,
        DisconnectionReason::Voicemail,
        DisconnectionReason::NoAnswer,
        DisconnectionReason::Busy,
        DisconnectionReason::Error,
        DisconnectionReason::Other,
    ];
    pub const NAMES: &str = "customer_hangup, agent_hangup, transfer, voicemail, no_answer, busy, error, other";

    pub fn as_str(self) -> &'static str {
        match self {
            DisconnectionReason::CustomerHangup => "customer_hangup",
            DisconnectionReason::AgentHangup => "agent_hangup",
            DisconnectionReason::Transfer => "transfer",
            DisconnectionReason::Voicemail => "voicemail",
            DisconnectionReason::NoAnswer => "no_answer",
            DisconnectionReason::Busy => "busy",
            DisconnectionReason::Error => "error",
            DisconnectionReason::Other => "other",
        }
    }

    pub fn parse(text: &str) -> Option<DisconnectionReason> {
        Self::ALL.into_iter().find(|reason| reason.as_str() == text)
    }
}

/// Who said a transcript segment.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Speaker {
    Agent,
    Caller,
}

impl Speaker {
    pub fn as_str(self) -> &'static str {
        match self {
            Speaker::Agent => "agent",
            Speaker::Caller => "caller",
        }
    }

    pub fn parse(text: &str) -> Option<Speaker> {
        match text {
            "agent" => Some(Speaker::Agent),
            "caller" => Some(Speaker::Caller),
            _ => None,
        }
    }
}

/// Where a chat takes place.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Channel {
    Web,
    WebAgent,
    VoiceWidget,
    Whatsapp,
}

impl Channel {
    pub const ALL: [Channel; 4] = [Channel::Web, Channel::WebAgent, Channel::VoiceWidget, Channel::Whatsapp];

    pub fn as_str(self) -> &'static str {
        match self {
            Channel::Web => "web",
            Channel::WebAgent => "web-agent",
            Channel::VoiceWidget => "voice-widget",
            Channel::Whatsapp => "whatsapp",
        }
    }

    pub fn parse(text: &str) -> Option<Channel> {
        Self::ALL.into_iter().find(|channel| channel.as_str() == text)
    }
}

/// Who wrote a chat message.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Role {
    User,
    Agent,
    System,
}

impl Role {
    pub fn as_str(self) -> &'static str {
        match self {
            Role::User => "user",
            Role::Agent => "agent",
            Role::System => "system",
        }
    }

    pub fn parse(text: &str) -> Option<Role> {
        match text {
            "user" => Some(Role::User),
            "agent" => Some(Role::Agent),
            "system" => Some(Role::System),
            _ => None,
        }
    }
}

/// Whether a chat is still going on.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ChatStatus {
    Active,
    Ended,
}

impl ChatStatus {
    pub fn as_str(self) -> &'static str {
        match self {
            ChatStatus::Active => "active",
            ChatStatus::Ended => "ended",
        }
    }

    pub fn parse(text: &str) -> Option<ChatStatus> {
        match text {
            "active" => Some(ChatStatus::Active),
            "ended" => Some(ChatStatus::Ended),
            _ => None,
        }
    }
}

/// A call as a runtime reports it. `from` and `to` are E.164 already.
#[derive(Debug, Clone, PartialEq)]
pub struct NewCall {
    pub external_id: String,
    pub agent_id: Option<String>,
    pub from: String,
    pub to: String,
    pub direction: Direction,
    pub status: String,
    pub started_at_ms: i64,
}

#[derive(Debug, Clone, PartialEq)]
pub struct NewSegment {
    pub seq: i64,
    pub speaker: Speaker,
    pub text: String,
    pub offset_ms: i64,
}

#[derive(Debug, Clone, PartialEq)]
pub struct NewEvent {
    pub kind: String,
    pub at_ms: i64,
    /// A JSON object, serialised.
    pub data: String,
}

#[derive(Debug, Clone, PartialEq)]
pub struct CallEnd {
    pub ended_at_ms: i64,
    pub status: String,
    pub summary: Option<String>,
    pub score: Option<f64>,
    /// Replaces the call's analysis when given.
    pub analysis: Option<AnalysisEnd>,
    pub disconnection_reason: Option<DisconnectionReason>,
    /// Set once: a call that has a cost refuses another one.
    pub cost: Option<CallCost>,
}

impl CallEnd {
    /// An end with nothing beyond its time, status, summary and score.
    pub fn plain(ended_at_ms: i64, status: String, summary: Option<String>, score: Option<f64>) -> Self {
        Self { ended_at_ms, status, summary, score, analysis: None, disconnection_reason: None, cost: None }
    }
}

/// A call's analysis as the store keeps it; its summary is the call's.
#[derive(Debug, Clone, PartialEq)]
pub struct AnalysisEnd {
    pub sentiment: Sentiment,
    pub successful: Option<bool>,
    /// A JSON object, compact, checked by the service against the agent's fields.
    pub custom: String,
}

/// What a call cost and how it was paid.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CallCost {
    pub credits: i64,
    /// What the balance could not cover.
    pub unpaid: i64,
    /// The ledger entry that took the rest; none for a cost of 0.
    pub credit_entry_id: Option<String>,
}

#[derive(Debug, Clone, PartialEq)]
pub struct RecordingMeta {
    pub object_key: String,
    pub content_type: String,
    pub size_bytes: i64,
}

#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct CallFlags {
    pub flagged: Option<bool>,
    pub favorite: Option<bool>,
    pub spam: Option<bool>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum CallSort {
    CreatedAt,
    Duration,
    EndedAt,
}

/// What `GET /calls` asks for; every bound is inclusive.
#[derive(Debug, Clone, PartialEq)]
pub struct CallFilter {
    /// From 1.
    pub page: u32,
    pub limit: u32,
    /// A substring of either number, the transcript or the summary (case-insensitive).
    pub search: Option<String>,
    pub direction: Option<Direction>,
    pub agent_id: Option<String>,
    pub min_duration: Option<i64>,
    pub max_duration: Option<i64>,
    pub created_from_ms: Option<i64>,
    pub created_to_ms: Option<i64>,
    /// Either party, E.164.
    pub number: Option<String>,
    pub sentiment: Option<Sentiment>,
    pub successful: Option<bool>,
    pub disconnection_reason: Option<DisconnectionReason>,
    pub sort: CallSort,
    pub ascending: bool,
}

#[derive(Debug, Clone, PartialEq)]
pub struct NewChat {
    pub external_id: String,
    pub agent_id: Option<String>,
    pub channel: Channel,
    /// E.164 already.
    pub contact_number: Option<String>,
    pub contact_email: Option<String>,
    pub started_at_ms: i64,
}

#[derive(Debug, Clone, PartialEq)]
pub struct NewMessage {
    pub external_id: String,
    pub role: Role,
    pub text: String,
    pub created_at_ms: i64,
}

#[derive(Debug, Clone, PartialEq)]
pub struct ChatEnd {
    pub ended_at_ms: i64,
    pub summary: Option<String>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ChatSort {
    CreatedAt,
    LastMessageAt,
}

#[derive(Debug, Clone, PartialEq)]
pub struct ChatFilter {
    pub page: u32,
    pub limit: u32,
    /// A substring of a message, the contact number or the contact e-mail (case-insensitive).
    pub search: Option<String>,
    pub channel: Option<Channel>,
    pub agent_id: Option<String>,
    pub status: Option<ChatStatus>,
    pub created_from_ms: Option<i64>,
    pub created_to_ms: Option<i64>,
    pub sort: ChatSort,
    pub ascending: bool,
}

/// What an append did: how many items were new, how many the conversation holds.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Appended {
    pub appended: u32,
    pub total: u32,
}

#[derive(Clone, Debug)]
pub struct ConversationStore {
    db: Db,
}

impl ConversationStore {
    pub async fn open(url: &str) -> anyhow::Result<Self> {
        Ok(Self { db: Db::connect(url, &crate::MIGRATIONS).await? })
    }

    pub fn db(&self) -> &Db {
        &self.db
    }
}

pub fn call_not_found() -> ServiceError {
    ServiceError::not_found("Call not found")
}

pub fn chat_not_found() -> ServiceError {
    ServiceError::not_found("Chat not found")
}

pub(crate) fn check_ids(ids: &[(&str, &str)]) -> ServiceResult<()> {
    let violations: Vec<_> = ids
        .iter()
        .filter(|(_, id)| uuid::Uuid::parse_str(id).is_err())
        .map(|(field, _)| switchboard_kit::FieldViolation::new(*field, "must be a UUID"))
        .collect();
    if violations.is_empty() { Ok(()) } else { Err(ServiceError::validation(violations)) }
}
