//! Calls: their transcripts, timelines and recordings.

use std::collections::HashMap;

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use switchboard_proto::v1 as proto;

use crate::id::Id;
use crate::time::Timestamp;

/// The agent that had the conversation; a conversation whose agent has been deleted shows
/// none (its `agentId` filter still finds it).
#[derive(Serialize, JsonSchema)]
#[schemars(deny_unknown_fields)]
pub struct ConversationAgent {
    pub id: Id,
    pub name: String,
}

#[derive(Serialize, JsonSchema)]
#[serde(rename_all = "UPPERCASE")]
pub enum Direction {
    Incoming,
    Outgoing,
}

#[derive(Serialize, JsonSchema)]
#[serde(rename_all = "lowercase")]
pub enum Speaker {
    Agent,
    Caller,
}

/// How a call went, as its analysis says; a call without analysis has none.
#[derive(Debug, Clone, Copy, Serialize, Deserialize, JsonSchema, PartialEq, Eq)]
#[serde(rename_all = "lowercase")]
pub enum Sentiment {
    Positive,
    Neutral,
    Negative,
    Unknown,
}

/// A value's name on the wire (the conversations service spells them as the API does).
pub fn wire_name<T: Serialize>(value: T) -> String {
    match serde_json::to_value(value) {
        Ok(serde_json::Value::String(name)) => name,
        _ => String::new(),
    }
}

/// The value a name on the wire stands for; `None` for a name this API does not know.
pub fn from_wire<T: serde::de::DeserializeOwned>(name: &str) -> Option<T> {
    serde_json::from_value(serde_json::Value::String(name.to_owned())).ok()
}

/// Why a call ended, as its runtime reported it.
#[derive(Debug, Clone, Copy, Serialize, Deserialize, JsonSchema, PartialEq, Eq)]
#[serde(rename_all = "snake_case")]
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

/// What the runtime made of a call after it ended.
#[derive(Serialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
#[schemars(deny_unknown_fields)]
pub struct CallAnalysis {
    /// The call's summary (the same as the call's `summary`).
    pub summary: Option<String>,
    pub sentiment: Sentiment,
    /// Whether the call reached its goal; null when not known.
    pub successful: Option<bool>,
    /// The values of the agent's post-call analysis fields, by name; a field the runtime could
    /// not fill in is left out.
    pub custom: serde_json::Map<String, serde_json::Value>,
}

impl CallAnalysis {
    pub fn of(analysis: &proto::CallAnalysis) -> Self {
        Self {
            summary: analysis.summary.clone(),
            sentiment: from_wire(&analysis.sentiment).unwrap_or(Sentiment::Unknown),
            successful: analysis.successful,
            custom: serde_json::from_str(&analysis.custom_json).unwrap_or_default(),
        }
    }
}

/// One utterance of a call.
#[derive(Serialize, JsonSchema)]
#[schemars(deny_unknown_fields)]
pub struct TranscriptLine {
    pub speaker: Speaker,
    pub text: String,
    /// When it was said: the call's start plus the segment's offset.
    pub timestamp: Timestamp,
}

/// A phone call.
#[derive(Serialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
#[schemars(deny_unknown_fields)]
pub struct CallView {
    pub id: Id,
    /// E.164.
    pub from: String,
    /// E.164.
    pub to: String,
    #[serde(rename = "type")]
    pub kind: Direction,
    /// As the runtime reported it, e.g. `completed`.
    pub status: String,
    /// Whole seconds; null while the call is in progress.
    pub duration: Option<i64>,
    /// When the call started.
    pub created_at: Timestamp,
    pub ended_at: Option<Timestamp>,
    pub summary: Option<String>,
    pub score: Option<f64>,
    pub flagged: bool,
    pub favorite: bool,
    pub spam: bool,
    pub agent: Option<ConversationAgent>,
    /// In the order it was said.
    pub transcript: Vec<TranscriptLine>,
    /// A short-lived link to the recording, playable without headers; null without one.
    pub recording_url: Option<String>,
    /// Null until the runtime reports one at the call's end.
    pub analysis: Option<CallAnalysis>,
    /// Null until the runtime reports it.
    pub disconnection_reason: Option<DisconnectionReason>,
    /// What the call cost, in credits, debited from the team's balance; null when not reported.
    pub cost: Option<i64>,
    /// The part of `cost` the balance could not cover when it was debited (0 when it could);
    /// null without a cost.
    pub cost_unpaid: Option<i64>,
}

/// A moment of a call's timeline.
#[derive(Serialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
#[schemars(deny_unknown_fields)]
pub struct TimelineEvent {
    #[serde(rename = "type")]
    pub kind: String,
    pub at: Timestamp,
    /// The event's data, as the runtime sent it.
    pub data: serde_json::Map<String, serde_json::Value>,
}

/// A call with its timeline.
#[derive(Serialize, JsonSchema)]
#[schemars(deny_unknown_fields)]
pub struct CallDetail {
    #[serde(flatten)]
    pub call: CallView,
    /// In time order.
    pub timeline: Vec<TimelineEvent>,
}

/// The agent reference of a conversation.
pub fn agent_ref(agent_id: Option<&String>, names: &HashMap<String, String>) -> Option<ConversationAgent> {
    let id = agent_id?;
    names.get(id).map(|name| ConversationAgent { id: Id::stored(id.clone()), name: name.clone() })
}

impl CallView {
    /// The view of `call`, its agent named by `names`, with the recording link given.
    pub fn of(call: &proto::Call, names: &HashMap<String, String>, recording_url: Option<String>) -> Self {
        let speaker = |name: &str| if name == "caller" { Speaker::Caller } else { Speaker::Agent };
        Self {
            id: Id::stored(call.id.clone()),
            from: call.from.clone(),
            to: call.to.clone(),
            kind: if call.direction == "OUTGOING" { Direction::Outgoing } else { Direction::Incoming },
            status: call.status.clone(),
            duration: call.duration_seconds,
            created_at: Timestamp::from_ms(call.started_at_ms),
            ended_at: Timestamp::option(call.ended_at_ms),
            summary: call.summary.clone(),
            score: call.score,
            flagged: call.flagged,
            favorite: call.favorite,
            spam: call.spam,
            agent: agent_ref(call.agent_id.as_ref(), names),
            transcript: call
                .transcript
                .iter()
                .map(|segment| TranscriptLine {
                    speaker: speaker(&segment.speaker),
                    text: segment.text.clone(),
                    timestamp: Timestamp::from_ms(segment.timestamp_ms),
                })
                .collect(),
            recording_url,
            analysis: call.analysis.as_ref().map(CallAnalysis::of),
            disconnection_reason: call.disconnection_reason.as_deref().and_then(from_wire),
            cost: call.cost_credits,
            cost_unpaid: call.cost_credits.map(|_| call.cost_unpaid_credits.unwrap_or_default()),
        }
    }
}

impl CallDetail {
    /// The call with its timeline, its agent named by `names`, with the recording link given.
    pub fn of(call: &proto::Call, names: &HashMap<String, String>, recording_url: Option<String>) -> Self {
        let timeline = call
            .timeline
            .iter()
            .map(|event| TimelineEvent {
                kind: event.r#type.clone(),
                at: Timestamp::from_ms(event.at_ms),
                data: serde_json::from_str(&event.data).unwrap_or_default(),
            })
            .collect();
        Self { call: CallView::of(call, names, recording_url), timeline }
    }
}
